// The public Iterator over a plain Dataset, ServiceOptions as a distribute
// step, and serialized definitions.
#include "sluice/iterator.h"

#include <catch2/catch.hpp>
#include <optional>
#include <vector>

#include "client/dataset_internal.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;

std::vector<int64_t> Values(const std::vector<Element>& elements) { return testing::Int64Values(elements); }

TEST_CASE("Iterator: a range-for over range(5).map(square) gives 0 1 4 9 16", "[client][iterator]") {
  absl::StatusOr<Iterator> iterator = Dataset::Range(5).Map("square").MakeIterator();
  REQUIRE(iterator.ok());
  std::vector<Element> seen;
  for (const Element& element : *iterator) seen.push_back(element);
  CHECK(iterator->status().ok());
  CHECK(Values(seen) == std::vector<int64_t>{0, 1, 4, 9, 16});
  REQUIRE(iterator->element_spec().components.size() == 1);
  CHECK(iterator->element_spec().components[0] == TensorSpec{PartialShape::Known({}), DType::kInt64});
}

TEST_CASE("Iterator: GetNext is OutOfRange at the end, GetNextAsOptional empty", "[client][iterator]") {
  absl::StatusOr<Iterator> iterator = Dataset::Range(2).MakeIterator();
  REQUIRE(iterator.ok());
  absl::StatusOr<Element> first = iterator->GetNext();
  REQUIRE(first.ok());
  CHECK(ElementToJson(*first) == "0");
  absl::StatusOr<std::optional<Element>> second = iterator->GetNextAsOptional();
  REQUIRE(second.ok());
  REQUIRE(second->has_value());
  CHECK(ElementToJson(**second) == "1");
  CHECK(absl::IsOutOfRange(iterator->GetNext().status()));
  absl::StatusOr<std::optional<Element>> after = iterator->GetNextAsOptional();
  REQUIRE(after.ok());
  CHECK_FALSE(after->has_value());
}

TEST_CASE("Iterator: an error ends a range-for loop and status() names it", "[client][iterator]") {
  // The second file is missing: its error comes after the first file's
  // lines.
  testing::TempDir dir;
  const std::string good = dir.File("good.txt");
  testing::WriteFile(good, "a\nb\n");
  const std::string missing = dir.File("missing.txt");
  absl::StatusOr<Iterator> iterator = Dataset::TextLine({good, missing}).MakeIterator();
  REQUIRE(iterator.ok());
  std::vector<std::string> lines;
  for (const Element& element : *iterator) lines.push_back(ElementToJson(element));
  CHECK(lines == std::vector<std::string>{"\"a\"", "\"b\""});
  CHECK(absl::IsNotFound(iterator->status()));
  CHECK_THAT(std::string(iterator->status().message()), Contains(missing));
  // The iteration stays ended with that error.
  CHECK(iterator->GetNext().status() == iterator->status());
}

TEST_CASE("Iterator: a pipeline that cannot be built fails MakeIterator with the step",
          "[client][iterator]") {
  absl::StatusOr<Iterator> iterator = Dataset::Range(3).Batch(0).MakeIterator();
  CHECK(absl::IsInvalidArgument(iterator.status()));
  CHECK_THAT(std::string(iterator.status().message()), Contains("step 2 (batch)"));
}

TEST_CASE("ServiceOptions become the distribute step, field by field", "[client][iterator]") {
  ServiceOptions defaults{.service = "grpc://127.0.0.1:1"};
  const proto::DistributeOp plain = internal::DistributeOpFromOptions(defaults);
  CHECK(plain.service() == "grpc://127.0.0.1:1");
  CHECK(plain.processing_mode() == "parallel_epochs");
  CHECK(plain.sharding_policy().empty());  // the mode's own policy
  CHECK(plain.compression().empty());
  CHECK_FALSE(plain.exactly_once());
  CHECK(plain.num_consumers() == 0);

  const ServiceOptions all{.service = "grpc://h:2",
                           .processing_mode = ProcessingMode::kDistributedEpoch,
                           .job_name = "train",
                           .sharding_policy = ShardingPolicy::kFileOrData,
                           .exactly_once = true,
                           .num_consumers = 3,
                           .consumer_index = 2,
                           .compression = ServiceOptions::Compression::kZstd,
                           .max_outstanding_requests = 7,
                           .timeout_ms = 1500,
                           .allow_partial = true};
  const proto::DistributeOp op = internal::DistributeOpFromOptions(all);
  CHECK(op.service() == "grpc://h:2");
  CHECK(op.processing_mode() == "distributed_epoch");
  CHECK(op.job_name() == "train");
  CHECK(op.sharding_policy() == "FILE_OR_DATA");
  CHECK(op.exactly_once());
  CHECK(op.num_consumers() == 3);
  CHECK(op.consumer_index() == 2);
  CHECK(op.compression() == "zstd");
  CHECK(op.max_outstanding_requests() == 7);
  CHECK(op.timeout_ms() == 1500);
  CHECK(op.allow_partial());
  CHECK_FALSE(op.has_cross_trainer_cache());
  ServiceOptions sweep{.service = "grpc://h:2", .job_name = "sweep"};
  sweep.cross_trainer_cache = ServiceOptions::CrossTrainerCache{.trainer_id = "lr-0.1", .max_bytes = 4096};
  const proto::DistributeOp shared = internal::DistributeOpFromOptions(sweep);
  CHECK(shared.cross_trainer_cache().trainer_id() == "lr-0.1");
  CHECK(shared.cross_trainer_cache().max_bytes() == 4096);

  const std::vector<std::pair<ShardingPolicy, std::string>> policies = {{ShardingPolicy::kOff, "OFF"},
                                                                        {ShardingPolicy::kDynamic, "DYNAMIC"},
                                                                        {ShardingPolicy::kFile, "FILE"},
                                                                        {ShardingPolicy::kData, "DATA"},
                                                                        {ShardingPolicy::kHint, "HINT"}};
  for (const auto& [policy, name] : policies) {
    CHECK(internal::DistributeOpFromOptions({.sharding_policy = policy}).sharding_policy() == name);
  }
  CHECK(internal::DistributeOpFromOptions({.compression = ServiceOptions::Compression::kSnappy})
            .compression() == "snappy");

  // ReadFromService appends exactly that step.
  const Dataset remote = Dataset::Range(4).ReadFromService(all).Take(2);
  const proto::DatasetDef& def = internal::DefinitionOf(remote);
  REQUIRE(def.steps_size() == 3);
  CHECK(def.steps(1).distribute().SerializeAsString() == op.SerializeAsString());
}

TEST_CASE("A serialized definition reads back as the same pipeline", "[client][iterator]") {
  const Dataset original =
      Dataset::Range(6).Filter("greater_equal", {{"value", 2}}).Batch(3, {.drop_remainder = true});
  absl::StatusOr<Dataset> copy = Dataset::Deserialize(original.Serialize());
  REQUIRE(copy.ok());
  CHECK(copy->Fingerprint() == original.Fingerprint());
  absl::StatusOr<std::vector<Element>> batches = copy->Collect();
  REQUIRE(batches.ok());
  REQUIRE(batches->size() == 1);
  CHECK(ElementToJson((*batches)[0]) == "[2, 3, 4]");

  absl::StatusOr<Dataset> garbage = Dataset::Deserialize("\xff\xff\xff");
  CHECK(absl::IsInvalidArgument(garbage.status()));
  CHECK(garbage.status().message() == "these 3 bytes are not a serialized dataset definition");
}

TEST_CASE("A YAML pipeline file is a Dataset whose errors name the file and line", "[client][iterator]") {
  const std::string squares_path = std::string(SLUICE_SOURCE_DIR) + "/config/pipelines/squares.yaml";
  absl::StatusOr<Dataset> squares = Dataset::FromYamlFile(squares_path);
  REQUIRE(squares.ok());
  absl::StatusOr<std::vector<Element>> batches = squares->Collect();
  REQUIRE(batches.ok());
  REQUIRE(batches->size() == 3);
  CHECK(ElementToJson((*batches)[2]) == "[64, 81]");
  CHECK(squares->Fingerprint() == Dataset::Range(10).Map("square").Batch(4).Fingerprint());

  testing::TempDir dir;
  const std::string path = dir.File("p.yaml");
  testing::WriteFile(path, "pipeline:\n  - range: 3\n  - batch: {batch_size: 0}\n");
  absl::StatusOr<Dataset> bad = Dataset::FromYamlFile(path);
  REQUIRE(bad.ok());  // built, and so checked, when read
  absl::Status status = bad->MakeIterator().status();
  CHECK(absl::IsInvalidArgument(status));
  CHECK_THAT(std::string(status.message()), Catch::Matchers::StartsWith(path + ":3:5: step 2 (batch): "));
  // A step added in code has no place in the file.
  absl::Status added = Dataset::FromYamlFile(path)->Take(1).Batch(0).MakeIterator().status();
  CHECK_THAT(std::string(added.message()), Catch::Matchers::StartsWith(path + ":3:5: step 2 (batch): "));
  absl::Status appended = Dataset::FromYamlFile(squares_path)->Batch(0).MakeIterator().status();
  CHECK_THAT(std::string(appended.message()), Catch::Matchers::StartsWith("step 4 (batch): "));

  absl::StatusOr<Dataset> missing = Dataset::FromYamlFile(dir.File("none.yaml"));
  CHECK_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Contains(dir.File("none.yaml")));
}

TEST_CASE("Spec and Cardinality build the pipeline and report it", "[client][iterator]") {
  absl::StatusOr<ElementSpec> spec = Dataset::Range(3).Batch(2).Spec();
  REQUIRE(spec.ok());
  REQUIRE(spec->components.size() == 1);
  CHECK(spec->components[0] == TensorSpec{PartialShape{{kUnknownDim}, false}, DType::kInt64});
  CHECK(*Dataset::Range(10).Batch(4).Cardinality() == 3);
  CHECK(*Dataset::Range(10).Batch(4, {.drop_remainder = true}).Cardinality() == 2);
  CHECK(*Dataset::Range(3).Repeat().Cardinality() == kInfiniteCardinality);
  CHECK(*Dataset::Range(3).Filter("greater_equal", {{"value", 1}}).Cardinality() == kUnknownCardinality);
  CHECK(absl::IsInvalidArgument(Dataset::Range(3).Batch(-1).Cardinality().status()));
}

}  // namespace
}  // namespace sluice
