#include "pipeline/builder.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "client/dataset_internal.h"
#include "client/include/sluice/dataset.h"
#include "pipeline/yaml_loader.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

TEST_CASE("NewStep fills tf.data's defaults and rejects unknown ops", "[builder]") {
  CHECK(NewStep("range")->range().step() == 1);
  CHECK(NewStep("repeat")->repeat().count() == -1);
  CHECK(NewStep("shuffle")->shuffle().reshuffle_each_iteration());
  CHECK(NewStep("map")->map().deterministic());
  CHECK(NewStep("interleave")->interleave().cycle_length() == 4);
  absl::StatusOr<proto::Step> bad = NewStep("shufle");
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "unknown op 'shufle'; did you mean 'shuffle'?");
}

TEST_CASE("Fingerprints are stable and tell definitions apart", "[builder]") {
  const std::string fingerprint = Dataset::Range(10).Map("square").Batch(4).Fingerprint();
  CHECK(fingerprint.size() == 32);
  CHECK(fingerprint == Dataset::Range(10).Map("square").Batch(4).Fingerprint());
  CHECK(fingerprint != Dataset::Range(10).Map("square").Batch(5).Fingerprint());
  CHECK(Dataset::Range(5).Map("add", {{"value", 1}}).Fingerprint() !=
        Dataset::Range(5).Map("add", {{"value", 2}}).Fingerprint());
  // Function-argument maps serialize in key order, whatever the insertion order.
  proto::DatasetDef a = internal::DefinitionOf(Dataset::Range(3));
  proto::DatasetDef b = a;
  auto* fa = a.add_steps()->mutable_map()->mutable_fn();
  auto* fb = b.add_steps()->mutable_map()->mutable_fn();
  (*fa->mutable_args())["x"].set_i(1);
  (*fa->mutable_args())["y"].set_i(2);
  (*fb->mutable_args())["y"].set_i(2);
  (*fb->mutable_args())["x"].set_i(1);
  CHECK(DatasetFingerprint(a) == DatasetFingerprint(b));
}

TEST_CASE("The fingerprint of a known definition never changes", "[builder]") {
  // Pinned: the dispatcher deduplicates by this value across versions and
  // machines, so a change here breaks running clusters.
  CHECK(Dataset::Range(10).Map("square").Batch(4).Fingerprint() == "6a57c69754ab320503d20ea2087b20cf");
}

TEST_CASE("Builder and YAML give the same definition", "[builder]") {
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(
      "pipeline:\n"
      "  - range: 10\n"
      "  - map: {fn: add, value: 1, num_parallel_calls: 2}\n"
      "  - shuffle: {buffer_size: 4, seed: 7}\n"
      "  - batch: 3\n",
      "test.yaml");
  REQUIRE(loaded.ok());
  Dataset built =
      Dataset::Range(10).Map("add", {{"value", 1}}, {.num_parallel_calls = 2}).Shuffle(4, 7).Batch(3);
  CHECK(DatasetFingerprint(loaded->def) == built.Fingerprint());
}

TEST_CASE("Build errors name the step and its YAML position", "[builder]") {
  proto::DatasetDef def = internal::DefinitionOf(Dataset::Range(4).Batch(0));
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(def);
  CHECK(dataset.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(dataset.status().message() == "step 2 (batch): batch_size must be > 0, got 0");
  std::vector<std::string> locations = {"p.yaml:2:5", "p.yaml:3:5"};
  BuildOptions options;
  options.step_locations = &locations;
  CHECK(BuildDataset(def, options).status().message() ==
        "p.yaml:3:5: step 2 (batch): batch_size must be > 0, got 0");
  CHECK(BuildDataset(proto::DatasetDef()).status().message() == "the pipeline has no steps");
  proto::DatasetDef source_later = internal::DefinitionOf(Dataset::Range(3));
  *source_later.add_steps() = internal::DefinitionOf(Dataset::Range(2)).steps(0);
  CHECK(BuildDataset(source_later).status().message() ==
        "step 2 (range): a source can only be the first step");
  proto::DatasetDef transform_first;
  *transform_first.add_steps() = *NewStep("batch");
  CHECK(BuildDataset(transform_first).status().message() ==
        "step 1 (batch): the first step must be a source");
}

TEST_CASE("Element specs and cardinalities follow tf.data", "[builder]") {
  auto spec_of = [](const Dataset& d) { return (*internal::BuildPipeline(d))->element_spec().DebugString(); };
  auto cardinality_of = [](const Dataset& d) { return (*internal::BuildPipeline(d))->Cardinality(); };
  CHECK(spec_of(Dataset::Range(10).Batch(4)) == "TensorSpec(shape=[?], dtype=int64)");
  CHECK(spec_of(Dataset::Range(10).Batch(4, {.drop_remainder = true})) ==
        "TensorSpec(shape=[4], dtype=int64)");
  CHECK(spec_of(Dataset::Range(10).Batch(4).Unbatch()) == "TensorSpec(shape=[], dtype=int64)");
  CHECK(spec_of(Dataset::Range(3).Map("cast", {{"dtype", "float32"}})) ==
        "TensorSpec(shape=[], dtype=float32)");
  CHECK(cardinality_of(Dataset::Range(10).Batch(4)) == 3);
  CHECK(cardinality_of(Dataset::Range(10).Batch(4, {.drop_remainder = true})) == 2);
  CHECK(cardinality_of(Dataset::Range(10).Repeat()) == kInfiniteCardinality);
  CHECK(cardinality_of(Dataset::Range(10).Repeat().Take(7)) == 7);
  CHECK(cardinality_of(Dataset::Range(10).Filter("less", {{"value", 3}})) == kUnknownCardinality);
  CHECK(cardinality_of(Dataset::Range(10).Repeat(0)) == 0);
  CHECK(cardinality_of(Dataset::Range(10).Skip(4)) == 6);
  CHECK(cardinality_of(Dataset::Range(10).Shard(3, 0)) == 4);
  CHECK(cardinality_of(Dataset::Range(10).Shard(3, 2)) == 3);
  CHECK(CardinalityString(kInfiniteCardinality) == "infinite");
  CHECK(CardinalityString(kUnknownCardinality) == "unknown");
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST_CASE("Elementwise maps run after the batch, with the same output", "[builder]") {
  Dataset pipeline = Dataset::Range(10).Map("add", {{"value", 1}}).Batch(4);
  DatasetPtr built = *internal::BuildPipeline(pipeline);
  CHECK(built->DebugName() == "map(add)");  // batch -> map(add)
  CHECK(built->element_spec().DebugString() == "TensorSpec(shape=[?], dtype=int64)");
  CHECK(*testing::JsonLines(*built) == std::vector<std::string>{"[1, 2, 3, 4]", "[5, 6, 7, 8]", "[9, 10]"});
  CHECK((*internal::BuildPipeline(
             Dataset::Range(10).Map("add", {{"value", 1}}).Batch(4, {.drop_remainder = true})))
            ->Cardinality() == 2);
}

TEST_CASE("Maps that drop components stay before the batch", "[builder]") {
  // Component 1 is ragged (1, 2 and 3 bytes): batching it would fail, but
  // select drops it first.
  Dataset ragged = Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a", "bb", "ccc"})})
                       .Map("decode_raw", {{"dtype", "uint8"}})
                       .Enumerate();
  DatasetPtr selected = *internal::BuildPipeline(ragged.Map("select", {{"components", 0}}).Batch(3));
  CHECK(selected->DebugName() == "batch");
  CHECK(*testing::JsonLines(*selected) == std::vector<std::string>{"[0, 1, 2]"});
  DatasetPtr compared =
      *internal::BuildPipeline(ragged.Map("less", {{"value", 2}, {"component", 0}}).Batch(3));
  CHECK(*testing::JsonLines(*compared) == std::vector<std::string>{"[true, true, false]"});
  // decode_raw itself is per element: batching strings of unequal length first would fail.
  DatasetPtr decoded =
      *internal::BuildPipeline(Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a", "b", "cc"})})
                                   .Map("decode_raw", {{"dtype", "uint8"}})
                                   .Batch(2));
  CHECK(decoded->DebugName() == "batch");
  CHECK(*testing::JsonLines(*decoded) == std::vector<std::string>{"[[97], [98]]", "[[99, 99]]"});
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST_CASE("Consecutive maps with the same parallelism run as one", "[builder]") {
  const Dataset two_maps = Dataset::Range(6)
                               .Map("add", {{"value", 1}}, {.num_parallel_calls = 2})
                               .Map("multiply", {{"value", 10}}, {.num_parallel_calls = 2});
  DatasetPtr fused = *internal::BuildPipeline(two_maps);
  CHECK(fused->DebugName() == "map(add, multiply)");
  CHECK(*testing::JsonLines(*fused) == std::vector<std::string>{"10", "20", "30", "40", "50", "60"});
  // Different parallelism: two maps, the same values.
  DatasetPtr apart =
      *internal::BuildPipeline(Dataset::Range(6)
                                   .Map("add", {{"value", 1}}, {.num_parallel_calls = 2})
                                   .Map("multiply", {{"value", 10}}, {.num_parallel_calls = 3}));
  CHECK(apart->DebugName() == "map(multiply)");
  CHECK(*testing::JsonLines(*apart) == *testing::JsonLines(*fused));
  // The last map moves behind the batch instead: add is fused with nothing.
  DatasetPtr batched = *internal::BuildPipeline(two_maps.Batch(4));
  CHECK(batched->DebugName() == "map(multiply)");
  CHECK(*testing::JsonLines(*batched) == std::vector<std::string>{"[10, 20, 30, 40]", "[50, 60]"});
  // A fused map whose second function cannot apply reports that step.
  absl::StatusOr<DatasetPtr> bad = internal::BuildPipeline(
      Dataset::Range(3).Map("add", {{"value", 1}}).Map("decode_raw", {{"dtype", "uint8"}}));
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StartsWith(bad.status().message(), "step 3 (map): "));
}

}  // namespace
}  // namespace sluice
