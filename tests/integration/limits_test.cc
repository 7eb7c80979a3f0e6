// Integration tests of the bounds on what one request may make a daemon
// allocate (issue 18): each is InvalidArgument or ResourceExhausted naming
// the field and the limit, and the daemons serve on.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "dispatcher/request_checks.h"
#include "pipeline/definition_limits.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/test_cluster.h"
#include "worker/request_checks.h"

namespace sluice {
namespace {

proto::DatasetDef RangeThen(const std::function<void(proto::Step*)>& fill) {
  proto::DatasetDef def;
  auto* range = def.add_steps()->mutable_range();
  range->set_stop(10);
  range->set_step(1);
  fill(def.add_steps());
  return def;
}

grpc::Status Register(proto::DispatcherService::Stub& stub, const proto::DatasetDef& def) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  proto::GetOrRegisterDatasetRequest request;
  *request.mutable_version() = CurrentVersion();
  *request.mutable_dataset() = def;
  proto::GetOrRegisterDatasetResponse response;
  return stub.GetOrRegisterDataset(&context, request, &response);
}

TEST_CASE("limits: a pipeline past a bound is refused naming the step, field and limit",
          "[service][limits]") {
  testing::TestCluster cluster({.num_workers = 1});
  auto dispatcher = proto::DispatcherService::NewStub(MakeChannel(cluster.DispatcherAddress()));
  struct Case {
    proto::DatasetDef def;
    grpc::StatusCode code;
    std::string message;
  };
  proto::DatasetDef deep;
  deep.add_steps()->mutable_range()->set_stop(1);
  for (int i = 0; i < kMaxDefinitionSteps; ++i) deep.add_steps()->mutable_prefetch()->set_buffer_size(1);
  std::vector<Case> cases = {
      {RangeThen([](proto::Step* s) { s->mutable_batch()->set_batch_size(kMaxBatchSize + 1); }),
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("GetOrRegisterDataset: step 2 (batch): batch_size ", kMaxBatchSize + 1,
                    " is past the limit of ", kMaxBatchSize)},
      {RangeThen([](proto::Step* s) { s->mutable_shuffle()->set_buffer_size(int64_t{1} << 40); }),
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("GetOrRegisterDataset: step 2 (shuffle): buffer_size 1099511627776 is past the limit of ",
                    kMaxBufferSize)},
      {RangeThen([](proto::Step* s) { s->mutable_prefetch()->set_buffer_size(kMaxBufferSize + 1); }),
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("GetOrRegisterDataset: step 2 (prefetch): buffer_size ", kMaxBufferSize + 1,
                    " is past the limit of ", kMaxBufferSize)},
      {RangeThen([](proto::Step* s) {
         auto* interleave = s->mutable_interleave();
         interleave->mutable_pipeline()->add_steps()->mutable_range()->set_stop(3);
         interleave->set_cycle_length(int64_t{1} << 30);
       }),
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat(
           "GetOrRegisterDataset: step 2 (interleave): cycle_length 1073741824 is past the limit of ",
           kMaxCycleLength)},
      {RangeThen([](proto::Step* s) {
         auto* interleave = s->mutable_interleave();
         interleave->set_cycle_length(1);
         auto* inner = interleave->mutable_pipeline();
         inner->add_steps()->mutable_range()->set_stop(3);
         inner->add_steps()->mutable_batch()->set_batch_size(int64_t{1} << 40);
       }),
       grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat(
           "GetOrRegisterDataset: step 2 (interleave): step 2 (batch): batch_size 1099511627776 is past "
           "the limit of ",
           kMaxBatchSize)},
      {deep, grpc::StatusCode::INVALID_ARGUMENT,
       absl::StrCat("GetOrRegisterDataset: the pipeline has more than ", kMaxDefinitionSteps,
                    " steps (sub-pipelines included)")},
  };
  {
    // Past the size bound: a from_tensors of 65 MiB of bytes.
    proto::DatasetDef big;
    auto* values = big.add_steps()->mutable_from_tensors()->add_components();
    values->set_dtype(proto::DT_STRING);
    values->add_string_values(std::string(kMaxDefinitionBytes + 1024, 'x'));
    cases.push_back({big, grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("GetOrRegisterDataset: the pipeline definition is ", big.ByteSizeLong(),
                                  " bytes, past the limit of ", kMaxDefinitionBytes,
                                  " (read large data from files, not from_tensors)")});
  }
  for (const Case& c : cases) {
    const grpc::Status status = Register(*dispatcher, c.def);
    CHECK(status.error_code() == c.code);
    CHECK(status.error_message() == c.message);
  }
  // At the bounds, pipelines register.
  CHECK(Register(*dispatcher, RangeThen([](proto::Step* s) {
          s->mutable_batch()->set_batch_size(kMaxBatchSize);
        })).ok());
}

TEST_CASE("limits: GetSplits and GetElements ask for a bounded number", "[service][limits]") {
  testing::TestCluster cluster({.num_workers = 1});
  auto dispatcher = proto::DispatcherService::NewStub(MakeChannel(cluster.DispatcherAddress()));
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    proto::GetSplitsRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_iteration_id(1);
    request.set_task_id(1);
    request.set_max_splits(1 << 30);
    proto::GetSplitsResponse response;
    const grpc::Status status = dispatcher->GetSplits(&context, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message() == absl::StrCat("GetSplits: max_splits must be in [0, ",
                                                 dispatcher::kMaxSplitsPerRequest, "], got 1073741824"));
  }
  const std::string worker_port =
      testing::WaitForFile(cluster.dir().File("worker0.port"), std::chrono::seconds(10));
  auto worker =
      proto::WorkerService::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", std::stoi(worker_port))));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  proto::GetElementsRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_task_id(1);
  request.set_max_elements(1 << 30);
  proto::GetElementsResponse response;
  const grpc::Status status = worker->GetElements(&context, request, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == absl::StrCat("GetElements: max_elements must be in [0, ",
                                               worker::kMaxElementsPerRequest,
                                               "] (0 asks for one), got 1073741824"));
}

}  // namespace
}  // namespace sluice
