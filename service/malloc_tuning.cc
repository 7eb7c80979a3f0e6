#include "service/malloc_tuning.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sluice {

MallocTuningDecision DecideMallocTuning(const char* glibc_tunables, const char* sluice_malloc_tuning) {
  const std::string tuned = absl::StrCat("M_MMAP_THRESHOLD ", kTunedMmapThreshold >> 20,
                                         " MiB, M_TRIM_THRESHOLD ", kTunedTrimThreshold >> 20, " MiB");
  const absl::string_view choice = sluice_malloc_tuning == nullptr ? "" : sluice_malloc_tuning;
  if (choice == "off") return {false, "not tuned: SLUICE_MALLOC_TUNING=off"};
  if (glibc_tunables != nullptr &&
      absl::string_view(glibc_tunables).find("glibc.malloc.") != absl::string_view::npos)
    return {false, "not tuned: GLIBC_TUNABLES sets malloc tunables"};
  if (choice.empty() || choice == "on") return {true, absl::StrCat("tuned: ", tuned)};
  return {true, absl::StrCat("tuned: ", tuned, " (SLUICE_MALLOC_TUNING='", choice,
                             "' is neither 'on' nor 'off'; taken as 'on')")};
}

const MallocTuningDecision& TuneMallocForLargeMessages() {
  static const MallocTuningDecision decision = [] {
    MallocTuningDecision decided =
        DecideMallocTuning(std::getenv("GLIBC_TUNABLES"), std::getenv("SLUICE_MALLOC_TUNING"));
#if defined(__GLIBC__)
    if (decided.tune && (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kTunedMmapThreshold)) != 1 ||
                         mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTunedTrimThreshold)) != 1)) {
      decided.reason = "not tuned: mallopt failed";
      decided.tune = false;
    }
#else
    decided = {false, "not tuned: the C library is not glibc"};
#endif
    return decided;
  }();
  return decision;
}

}  // namespace sluice
