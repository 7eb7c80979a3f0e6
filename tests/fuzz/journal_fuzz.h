// What journal_replay_fuzzer and snapshot_replay_fuzzer share: a typical
// history of dispatcher updates for seeds, the journal and snapshot files
// Sluice's own Journal writes for it, and updates read from fuzz input as
// length-prefixed protos.
#ifndef SLUICE_TESTS_FUZZ_JOURNAL_FUZZ_H_
#define SLUICE_TESTS_FUZZ_JOURNAL_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "dispatcher/dispatcher_state.h"
#include "dispatcher/journal.h"
#include "google/protobuf/io/coded_stream.h"
#include "pipeline/builder.h"
#include "sluice/proto/journal.pb.h"

namespace sluice::fuzz {

// Two datasets, two workers, a parallel_epochs job with two iterations and
// a distributed_epoch job that leases and completes splits, clients that
// come and go, a finished task and a removed worker.
inline std::vector<proto::Update> SeedHistory() {
  std::vector<proto::Update> updates;
  auto add = [&] { return &updates.emplace_back(); };
  for (int64_t n : {10, 20}) {
    proto::DatasetDef def;
    def.add_steps()->mutable_range()->set_stop(n);
    auto* u = add()->mutable_register_dataset();
    u->set_dataset_id(std::to_string(1000 + n));
    u->set_fingerprint(DatasetFingerprint(def));
    *u->mutable_dataset() = def;
  }
  add()->mutable_register_worker()->set_address("w1:1");
  add()->mutable_register_worker()->set_address("w2:2");
  int64_t job = 0;
  for (proto::ProcessingMode mode : {proto::PARALLEL_EPOCHS, proto::DISTRIBUTED_EPOCH}) {
    auto* u = add()->mutable_create_job();
    u->set_job_id(++job);
    u->mutable_params()->set_dataset_id(job == 1 ? "1010" : "1020");
    u->mutable_params()->set_processing_mode(mode);
    u->mutable_params()->set_job_name("job" + std::to_string(job));
    auto* it = add()->mutable_create_iteration();
    it->set_iteration_id(job);
    it->set_job_id(job);
    for (int64_t task : {2 * job - 1, 2 * job}) {
      auto* t = add()->mutable_create_task();
      t->set_task_id(task);
      t->set_iteration_id(job);
      t->set_worker_address(task % 2 == 1 ? "w1:1" : "w2:2");
    }
    auto* a = add()->mutable_acquire_iteration_client();
    a->set_iteration_client_id(job);
    a->set_iteration_id(job);
  }
  auto* lease = add()->mutable_lease_splits();
  lease->set_task_id(3);
  lease->set_request_id(1);
  for (int64_t seq : {1, 2}) {
    proto::SplitLease* split = lease->add_splits();
    split->set_seq(seq);
    split->set_begin(5 * (seq - 1));
    split->set_end(5 * seq);
  }
  lease->set_cursor("cursor1");
  auto* complete = add()->mutable_complete_splits();
  complete->set_iteration_id(2);
  complete->add_seqs(1);
  add()->mutable_finish_task()->set_task_id(1);
  add()->mutable_release_iteration_client()->set_iteration_client_id(1);
  add()->mutable_create_iteration()->set_iteration_id(3);
  updates.back().mutable_create_iteration()->set_job_id(1);
  updates.back().mutable_create_iteration()->set_repetition(1);
  add()->mutable_remove_worker()->set_address("w2:2");
  return updates;
}

// Updates as fuzz input: each a varint length and that many bytes.
inline std::string EncodeUpdates(const std::vector<proto::Update>& updates) {
  std::string out;
  for (const proto::Update& update : updates) {
    const std::string bytes = update.SerializeAsString();
    uint64_t n = bytes.size();
    while (n >= 0x80) {
      out.push_back(static_cast<char>((n & 0x7f) | 0x80));
      n >>= 7;
    }
    out.push_back(static_cast<char>(n));
    out += bytes;
  }
  return out;
}

// The updates in `data` up to the first that does not parse (at most 256).
inline std::vector<proto::Update> DecodeUpdates(const uint8_t* data, size_t size) {
  std::vector<proto::Update> updates;
  google::protobuf::io::CodedInputStream in(data, static_cast<int>(size));
  uint32_t length = 0;
  while (updates.size() < 256 && in.ReadVarint32(&length)) {
    std::string bytes;
    if (!in.ReadString(&bytes, static_cast<int>(length))) break;
    if (!updates.emplace_back().ParseFromString(bytes)) {
      updates.pop_back();
      break;
    }
  }
  return updates;
}

// The files a Journal leaves in a fresh folder after appending `updates`
// (and, with `snapshot`, writing the state after them), by name.
inline std::map<std::string, std::string> JournalFiles(const std::string& dir,
                                                       const std::vector<proto::Update>& updates,
                                                       bool snapshot) {
  std::filesystem::remove_all(dir);
  {
    dispatcher::Journal::Recovered recovered;
    absl::StatusOr<dispatcher::Journal> journal = dispatcher::Journal::Open(dir, &recovered);
    if (!journal.ok()) std::exit(1);
    dispatcher::DispatcherState state;
    for (const proto::Update& update : updates) {
      absl::Status status = state.Apply(update);
      if (status.ok()) status = journal->Append(update);
      if (!status.ok()) {
        std::fprintf(stderr, "%s: %s\n", update.ShortDebugString().c_str(), status.ToString().c_str());
        std::exit(1);
      }
    }
    if (snapshot && !journal->WriteSnapshot(state.ToSnapshot()).ok()) std::exit(1);
  }
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    files[entry.path().filename().string()] = bytes.str();
  }
  std::filesystem::remove_all(dir);
  return files;
}

// Replays what Journal::Open reads from `dir`, as dispatcher_core.cc does;
// errors are the expected outcome of most inputs.
inline void Recover(const std::string& dir) {
  dispatcher::Journal::Recovered recovered;
  absl::StatusOr<dispatcher::Journal> journal = dispatcher::Journal::Open(dir, &recovered);
  if (!journal.ok()) return;
  dispatcher::DispatcherState state;
  if (recovered.snapshot.has_value()) {
    absl::StatusOr<dispatcher::DispatcherState> restored =
        dispatcher::DispatcherState::FromSnapshot(*recovered.snapshot);
    if (!restored.ok()) return;
    state = *std::move(restored);
  }
  for (const auto& record : recovered.updates) {
    if (!state.Apply(record.update).ok()) return;
  }
}

}  // namespace sluice::fuzz

#endif  // SLUICE_TESTS_FUZZ_JOURNAL_FUZZ_H_
