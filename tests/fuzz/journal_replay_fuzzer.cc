// Journal replay (dispatcher/journal.h, dispatcher/dispatcher_state.h), as
// a restarting dispatcher runs it. The first byte picks the input's form:
//   even: a journal file's bytes, recovered by Journal::Open (a torn tail
//         cut off, any other damage DataLoss) and its updates applied;
//   odd:  updates as length-prefixed protos, applied to a fresh state one
//         by one (one that contradicts the state is refused and changes
//         nothing), then the state's snapshot restored: a state the
//         updates reach must survive a restart, or the input is a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/journal_fuzz.h"

namespace sluice {
namespace {

void WriteSeeds(const std::string& dir) {
  const std::vector<proto::Update> history = fuzz::SeedHistory();
  fuzz::WriteSeed(dir, "updates", std::string(1, '\1') + fuzz::EncodeUpdates(history));
  for (const auto& [name, bytes] : fuzz::JournalFiles(fuzz::ScratchDir() + "/seed", history, false)) {
    if (name.starts_with("journal-") && bytes.size() > 8)
      fuzz::WriteSeed(dir, "file-" + name, std::string(1, '\0') + bytes);
  }
}

void ApplyUpdates(const uint8_t* data, size_t size) {
  dispatcher::DispatcherState state;
  for (const proto::Update& update : fuzz::DecodeUpdates(data, size)) (void)state.Apply(update);
  absl::StatusOr<dispatcher::DispatcherState> restored =
      dispatcher::DispatcherState::FromSnapshot(state.ToSnapshot());
  if (!restored.ok()) {
    std::fprintf(stderr, "a state the updates reached does not restore from its snapshot: %s\n",
                 std::string(restored.status().message()).c_str());
    std::abort();
  }
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return sluice::fuzz::WriteSeedsIfAsked(sluice::WriteSeeds);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (size_t{1} << 20)) return 0;
  if (data[0] % 2 == 1) {
    sluice::ApplyUpdates(data + 1, size - 1);
    return 0;
  }
  const std::string dir = sluice::fuzz::ScratchDir() + "/work";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  sluice::fuzz::WriteScratchFile("work/journal-0000000001.log",
                                 std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  sluice::fuzz::Recover(dir);
  return 0;
}
