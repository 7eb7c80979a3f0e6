#include "sluice/dataset.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

TEST_CASE("The fluent builder runs the issue's example", "[client]") {
  absl::StatusOr<std::vector<Element>> batches = Dataset::Range(10).Map("square").Batch(4).Collect();
  REQUIRE(batches.ok());
  REQUIRE(batches->size() == 3);
  CHECK(ElementToJson((*batches)[0]) == "[0, 1, 4, 9]");
  CHECK(ElementToJson((*batches)[1]) == "[16, 25, 36, 49]");
  CHECK(ElementToJson((*batches)[2]) == "[64, 81]");
}

TEST_CASE("Builder datasets are values: each call returns a new one", "[client]") {
  Dataset base = Dataset::Range(6);
  Dataset evens = base.Filter("equal", {{"value", 0}}).Take(1);
  CHECK(internal::DefinitionOf(base).steps_size() == 1);
  CHECK(internal::DefinitionOf(evens).steps_size() == 3);
  CHECK(testing::Int64Values(*base.Collect()) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(testing::Int64Values(*Dataset::Range(6).Map("mod", {{"value", 3}}).Collect()) ==
        std::vector<int64_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("Builder errors surface at Build with the step", "[client]") {
  absl::StatusOr<std::vector<Element>> result = Dataset::Range(4).Map("squares").Collect();
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(result.status().message() == "step 2 (map): unknown function 'squares'; did you mean 'square'?");
  CHECK(Dataset::Range(4).Repeat().Collect().status().message() ==
        "cannot collect an infinite dataset without a limit");
  CHECK(Dataset::Range(4).Repeat().Collect(6)->size() == 6);
}

TEST_CASE("Named slices, zip and enumerate compose", "[client]") {
  Dataset named = Dataset::FromTensorSlices(
      {Tensor::FromVector<int64_t>({1, 2}), Tensor::FromVector<std::string>({"a", "b"})}, {"id", "tag"});
  std::vector<std::string> lines = *testing::JsonLines(**internal::BuildPipeline(named));
  CHECK(lines == std::vector<std::string>{"{\"id\": 1, \"tag\": \"a\"}", "{\"id\": 2, \"tag\": \"b\"}"});
  Dataset zipped = Dataset::Zip({Dataset::Range(3), Dataset::Range(10, 20, 5)}).Enumerate(100);
  CHECK(*testing::JsonLines(**internal::BuildPipeline(zipped)) ==
        std::vector<std::string>{"[100, 0, 10]", "[101, 1, 15]"});
}

TEST_CASE("distribute's sharding and coordinated-read options are checked before any RPC", "[client]") {
  // Nothing listens on port 1: each error comes before the dispatcher is asked.
  auto error = [](proto::DistributeOp op) {
    op.set_service("grpc://127.0.0.1:1");
    absl::Status status = internal::BuildPipeline(internal::ReadFromService(Dataset::Range(3), op)).status();
    CHECK(absl::IsInvalidArgument(status));
    return std::string(status.message());
  };
  proto::DistributeOp unknown;
  unknown.set_sharding_policy("ROUND_ROBIN");
  CHECK(error(unknown) ==
        "step 2 (distribute): unknown sharding_policy 'ROUND_ROBIN' (valid: OFF, DYNAMIC, FILE, DATA, "
        "FILE_OR_DATA, HINT)");
  proto::DistributeOp mismatch;
  mismatch.set_sharding_policy("data");
  mismatch.set_processing_mode("distributed_epoch");
  CHECK(error(mismatch) ==
        "step 2 (distribute): sharding_policy data does not go with processing_mode distributed_epoch "
        "(DYNAMIC is distributed_epoch; the other policies run like parallel_epochs)");
  proto::DistributeOp consumer;
  consumer.set_num_consumers(3);
  consumer.set_consumer_index(3);
  CHECK(error(consumer) == "step 2 (distribute): consumer_index 3 is out of range for num_consumers 3");
  for (int64_t connections : {-1, 17}) {
    proto::DistributeOp op;
    op.set_connections_per_worker(connections);
    CHECK(error(op) ==
          absl::StrCat("step 2 (distribute): connections_per_worker must be 0 to 16, got ", connections));
  }
}

}  // namespace
}  // namespace sluice
