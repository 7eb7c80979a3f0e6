#include "service/malloc_tuning.h"

#include <catch2/catch.hpp>
#include <cstdlib>

namespace sluice {
namespace {

TEST_CASE("malloc tuning: on by default, and off where the user chose", "[malloc_tuning]") {
  const std::string tuned = "tuned: M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 256 MiB";
  MallocTuningDecision decision = DecideMallocTuning(nullptr, nullptr);
  CHECK(decision.tune);
  CHECK(decision.reason == tuned);
  decision = DecideMallocTuning("glibc.rtld.nns=2", "on");
  CHECK(decision.tune);
  CHECK(decision.reason == tuned);
  // Any malloc tunable of the user's wins, whatever SLUICE_MALLOC_TUNING says.
  decision = DecideMallocTuning("glibc.rtld.nns=2:glibc.malloc.arena_max=2", "on");
  CHECK_FALSE(decision.tune);
  CHECK(decision.reason == "not tuned: GLIBC_TUNABLES sets malloc tunables");
  decision = DecideMallocTuning(nullptr, "off");
  CHECK_FALSE(decision.tune);
  CHECK(decision.reason == "not tuned: SLUICE_MALLOC_TUNING=off");
  decision = DecideMallocTuning(nullptr, "0");
  CHECK(decision.tune);
  CHECK(decision.reason == tuned + " (SLUICE_MALLOC_TUNING='0' is neither 'on' nor 'off'; taken as 'on')");
}

TEST_CASE("malloc tuning: the process's decision is made once and kept", "[malloc_tuning]") {
  const MallocTuningDecision& first = TuneMallocForLargeMessages();
  const MallocTuningDecision& again = TuneMallocForLargeMessages();
  CHECK(&first == &again);
  // The test runs with the environment ctest gives it: the decision is the
  // one DecideMallocTuning makes from it, and glibc accepted the values.
  MallocTuningDecision expected =
      DecideMallocTuning(std::getenv("GLIBC_TUNABLES"), std::getenv("SLUICE_MALLOC_TUNING"));
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator replaces glibc's, and its mallopt refuses every
  // value: the process says it is not tuned, and why.
  if (expected.tune) expected = {false, "not tuned: mallopt failed"};
#endif
  CHECK(first.tune == expected.tune);
  CHECK(first.reason == expected.reason);
}

}  // namespace
}  // namespace sluice
