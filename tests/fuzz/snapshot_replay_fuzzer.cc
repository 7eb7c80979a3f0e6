// Snapshot replay (dispatcher/dispatcher_state.h FromSnapshot, and the
// snapshot file Journal::Open reads). The first byte picks the form:
//   even: a serialized StateSnapshot, restored; a state that restores
//         must give a snapshot that restores again, or the input is a
//         crash, and take the seed history's updates after it;
//   odd:  a snapshot file's bytes (size record, then chunks), recovered
//         by Journal::Open and restored, as a restart does.
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
  dispatcher::DispatcherState state;
  for (size_t i = 0; i < history.size(); ++i) {
    if (!state.Apply(history[i]).ok()) std::exit(1);
    if (i % 6 == 5 || i + 1 == history.size()) {
      fuzz::WriteSeed(dir, "snapshot-" + std::to_string(i),
                      std::string(1, '\0') + state.ToSnapshot().SerializeAsString());
    }
  }
  for (const auto& [name, bytes] : fuzz::JournalFiles(fuzz::ScratchDir() + "/seed", history, true)) {
    if (name.starts_with("snapshot-")) fuzz::WriteSeed(dir, "file-" + name, std::string(1, '\1') + bytes);
  }
}

void Restore(const uint8_t* data, size_t size) {
  proto::StateSnapshot snapshot;
  if (!snapshot.ParseFromArray(data, static_cast<int>(size))) return;
  absl::StatusOr<dispatcher::DispatcherState> state = dispatcher::DispatcherState::FromSnapshot(snapshot);
  if (!state.ok()) return;
  absl::StatusOr<dispatcher::DispatcherState> again =
      dispatcher::DispatcherState::FromSnapshot(state->ToSnapshot());
  if (!again.ok()) {
    std::fprintf(stderr, "a restored state's own snapshot does not restore: %s\n",
                 std::string(again.status().message()).c_str());
    std::abort();
  }
  static const std::vector<proto::Update>* history = new std::vector<proto::Update>(fuzz::SeedHistory());
  for (const proto::Update& update : *history) (void)state->Apply(update);
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return sluice::fuzz::WriteSeedsIfAsked(sluice::WriteSeeds);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (size_t{1} << 20)) return 0;
  if (data[0] % 2 == 0) {
    sluice::Restore(data + 1, size - 1);
    return 0;
  }
  const std::string dir = sluice::fuzz::ScratchDir() + "/work";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  sluice::fuzz::WriteScratchFile("work/snapshot-0000000001.pb",
                                 std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  sluice::fuzz::Recover(dir);
  return 0;
}
