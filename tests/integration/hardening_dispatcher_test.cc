// Integration tests of the dispatcher's side of hardening: a worker
// restarted mid-epoch in parallel_epochs does not read its epoch again
// (the read reports what was cut short), and a failed iteration reaches
// every reader with the worker's words instead of moving to the next
// worker.
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::CountOf;
using testing::TestCluster;

TEST_CASE(
    "hardening dispatcher: a worker restarted mid-epoch in parallel_epochs is not given the epoch again",
    "[service][hardening][dispatcher]") {
  TestCluster cluster({.num_workers = 2, .worker_args = {"--buffer-elements", "8"}});
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("parallel_epochs");
  op.set_max_outstanding_requests(8);
  constexpr int64_t kElements = 100000;
  absl::StatusOr<DatasetPtr> built =
      internal::BuildPipeline(internal::ReadFromService(Dataset::Range(kElements), op));
  REQUIRE(built.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  REQUIRE(iterator.ok());
  std::map<int64_t, int> counts;
  int64_t total = 0;
  absl::Status status;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    Element element;
    bool end = false;
    status = (*iterator)->GetNext(&element, &end);
    if (!status.ok() || end) break;
    ++counts[element.components.at(0).data<int64_t>()[0]];
    if (++total == 1000) cluster.RestartWorker(1);
  }
  INFO(status.ToString());
  REQUIRE(absl::IsDataLoss(status));
  CHECK_THAT(std::string(status.message()), Contains(", worker restarted) after "));
  // Each value at most twice (once per worker): the restarted worker did
  // not start its epoch over, which made values repeat three times.
  int most = 0;
  for (const auto& [value, count] : counts) most = std::max(most, count);
  CHECK(most <= 2);
  CHECK(total < 2 * kElements);
  CHECK(total >= kElements);
}

TEST_CASE("hardening dispatcher: a pipeline that fails on a worker fails the iteration for every reader",
          "[service][hardening][dispatcher]") {
  TestCluster cluster({.num_workers = 2});
  // A file that does not exist: the pipeline fails on whichever worker
  // runs it, and the iteration fails with that worker's words rather than
  // moving to the next worker.
  const std::string missing = cluster.dir().File("no_such_file.tfrecord");
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  op.set_job_name("failing");
  Dataset dataset = internal::ReadFromService(Dataset::TFRecord({missing}), op);
  for (int reader = 0; reader < 2; ++reader) {
    absl::StatusOr<std::vector<Element>> read = dataset.Collect();
    INFO(read.status().ToString());
    REQUIRE_FALSE(read.ok());
    CHECK_THAT(std::string(read.status().message()), Contains(missing));
  }
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dispatcher().log_path()),
             Contains("iteration 1 failed: task "));
  CHECK(cluster.RegisteredWorkers() == 2);
}

// A worker that dies soon after taking its task (a pipeline that segfaults
// or is OOM-killed, here kill -9) and is restarted by its supervisor: the
// dispatcher used to hand the iteration on to the next incarnation
// forever. After kCrashLoopLosses (4) such losses in a row the iteration
// fails, naming each loss.
TEST_CASE(
    "hardening dispatcher: a worker killed soon after taking its task, 4 times in a row, fails the iteration",
    "[service][hardening][dispatcher]") {
  TestCluster cluster({.num_workers = 2});
  proto::DistributeOp op;
  op.set_service(cluster.ServiceUrl());
  op.set_processing_mode("distributed_epoch");
  absl::StatusOr<DatasetPtr> built =
      internal::BuildPipeline(internal::ReadFromService(Dataset::Range(int64_t{1} << 40), op));
  REQUIRE(built.ok());
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  REQUIRE(iterator.ok());
  Element element;
  bool end = false;
  REQUIRE((*iterator)->GetNext(&element, &end).ok());
  // Each restart comes within a second of the last: the task the worker
  // had (its first, then the one each incarnation gets) is lost young.
  for (int crash = 0; crash < 4; ++crash) {
    cluster.KillWorker(0);
    cluster.RestartWorker(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  absl::Status status;
  int64_t read = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (status.ok() && !end && std::chrono::steady_clock::now() < give_up) {
    status = (*iterator)->GetNext(&element, &end);
    ++read;
  }
  INFO(status.ToString() << " after " << read << " more elements");
  CHECK(absl::IsInternal(status));
  CHECK_FALSE(end);
  const std::string message(status.message());
  CHECK_THAT(message,
             Contains("iteration 1 lost its tasks 4 times in a row, each within 10000 ms of starting, so "
                      "its pipeline most likely crashes the workers (see their logs): task "));
  // The four tasks worker 0 had, each named with its worker and why.
  const std::string worker0 = absl::StrCat("127.0.0.1:", cluster.WorkerPort(0));
  CHECK(CountOf(message, absl::StrCat(" on ", worker0, " (worker restarted) after ")) == 4);
  CHECK_THAT(testing::ReadFileOrEmpty(cluster.dispatcher().log_path()), Contains("iteration 1 failed: "));
  // The workers live on, and a new read is served.
  absl::StatusOr<std::vector<Element>> again = internal::ReadFromService(Dataset::Range(10), op).Collect();
  REQUIRE(again.ok());
  CHECK(again->size() == 10);
}

// The dispatcher's side of what protobuf cannot parse: InvalidArgument
// saying why, where gRPC answered INTERNAL with an empty message.
TEST_CASE("hardening dispatcher: a request protobuf cannot parse is refused saying why",
          "[service][hardening][dispatcher]") {
  TestCluster cluster({.num_workers = 1});
  auto dispatcher = proto::DispatcherService::NewStub(MakeChannel(cluster.DispatcherAddress()));
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(10); };
  Dataset nested = Dataset::Range(2);
  for (int i = 0; i < 40; ++i) nested = Dataset::Zip({nested, Dataset::Range(2)});
  proto::GetOrRegisterDatasetRequest deep;
  *deep.mutable_version() = CurrentVersion();
  *deep.mutable_dataset() = internal::DefinitionOf(nested);
  proto::GetOrRegisterDatasetResponse registered;
  grpc::ClientContext deep_context;
  deep_context.set_deadline(deadline());
  grpc::Status status = dispatcher->GetOrRegisterDataset(&deep_context, deep, &registered);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() ==
        "GetOrRegisterDataset: the request nests messages deeper than protobuf's limit of 100 (zip or "
        "interleave pipelines inside each other add three levels each): nest fewer pipelines");
  proto::WorkerHeartbeatRequest not_utf8;
  *not_utf8.mutable_version() = CurrentVersion();
  not_utf8.set_worker_address("127.0.0.1:\xff");
  proto::WorkerHeartbeatResponse beat;
  grpc::ClientContext beat_context;
  beat_context.set_deadline(deadline());
  status = dispatcher->WorkerHeartbeat(&beat_context, not_utf8, &beat);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() ==
        "WorkerHeartbeat: the request does not parse as a sluice.proto.WorkerHeartbeatRequest (malformed "
        "bytes, "
        "a string field that is not UTF-8, or nesting past 10000 levels)");
  // Nothing of either was taken in, and a read is served whole.
  CHECK(cluster.RegisteredWorkers() == 1);
  absl::StatusOr<std::vector<Element>> read =
      Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl()}).Collect();
  REQUIRE(read.ok());
  CHECK(read->size() == 5);
}

}  // namespace
}  // namespace sluice
