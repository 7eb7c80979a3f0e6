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

TEST_CASE("CheckSavable names the step that prevents a save, before anything is read", "[client]") {
  // No dispatcher listens here: the check reads the definition alone.
  const std::string service = "grpc://127.0.0.1:1";
  auto epoch = [&](bool exactly_once) {
    return ServiceOptions{.service = service,
                          .processing_mode = ProcessingMode::kDistributedEpoch,
                          .exactly_once = exactly_once};
  };
  CHECK(Dataset::Range(10).Shuffle(4).Batch(2).CheckSavable().ok());  // local: every op saves
  CHECK(Dataset::Range(10).Map("square").Batch(2).ReadFromService(epoch(true)).Batch(3).CheckSavable().ok());
  const Dataset lm = Dataset::JsonLines({"a.jsonl", "b.jsonl"}, {"text"})
                         .Tokenize("m.model", 0, false, true)
                         .PackSequences(16, "best_fit");
  CHECK(lm.ReadFromService(epoch(true)).Batch(8).CheckSavable().ok());

  auto refusal = [](const Dataset& dataset) { return std::string(dataset.CheckSavable().message()); };
  CHECK(refusal(Dataset::Range(10).ReadFromService(epoch(false))) ==
        "step 2 (distribute): saving a distributed_epoch read needs exactly_once: true, which tags each "
        "element with its split and position so that a restore knows what was delivered");
  CHECK(absl::IsFailedPrecondition(Dataset::Range(10).ReadFromService(epoch(false)).CheckSavable()));
  CHECK(refusal(lm.Batch(8).ReadFromService(epoch(true))) ==
        "step 5 (distribute): exactly_once runs the worker side once per split, so that every element comes "
        "from one split and is the same on every run; it takes a splittable source, then map, filter, "
        "tokenize, pack_sequences, prefetch and at most one batch or padded_batch (docs/pipeline.md): step 4 "
        "is a batch after pack_sequences, whose rows per split vary, so that every split would end in a "
        "short batch: batch after distribute");
  CHECK_THAT(refusal(Dataset::Range(10).Shuffle(4).ReadFromService(epoch(true))),
             Catch::Matchers::EndsWith("step 2 is shuffle, whose output depends on more than one split "
                                       "(shuffle the source with a seed instead)"));
  ServiceOptions parallel{.service = service};
  CHECK(Dataset::Range(10).Shuffle(4, 7).ReadFromService(parallel).CheckSavable().ok());
  CHECK(refusal(Dataset::Range(10).Shuffle(4).ReadFromService(parallel)) ==
        "step 3 (distribute): a parallel_epochs read restores only when its workers' pipeline gives the "
        "same elements in the same order on every run, so that each worker can pass over what was "
        "delivered; step 2 is a shuffle without a seed (seed it or make it deterministic: true, or "
        "use distributed_epoch with exactly_once: true)");
  ServiceOptions coordinated{.service = service, .job_name = "j", .num_consumers = 2, .consumer_index = 1};
  CHECK(refusal(Dataset::Range(10).Repeat().ReadFromService(coordinated)) ==
        "step 3 (distribute): a coordinated read (num_consumers) cannot be saved or restored yet");
  ServiceOptions sharded{.service = service, .sharding_policy = ShardingPolicy::kData};
  CHECK_THAT(refusal(Dataset::Range(10).ReadFromService(sharded)),
             Catch::Matchers::StartsWith("step 2 (distribute): a statically sharded read cannot be saved"));
}

}  // namespace
}  // namespace sluice
