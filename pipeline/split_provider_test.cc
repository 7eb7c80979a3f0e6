#include "pipeline/split_provider.h"

#include <catch2/catch.hpp>

#include "client/dataset_internal.h"
#include "client/include/sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

std::vector<Split> Drain(SplitProvider& provider) {
  std::vector<Split> splits;
  while (true) {
    Split split;
    bool end = false;
    REQUIRE(provider.GetNext(&split, &end).ok());
    if (end) return splits;
    splits.push_back(split);
  }
}

// Hands out a fixed list of splits, as the dispatcher would.
class FixedSplits : public SplitProvider {
 public:
  explicit FixedSplits(std::vector<Split> splits) : splits_(std::move(splits)) {}
  absl::Status GetNext(Split* split, bool* end) override {
    *end = next_ >= splits_.size();
    if (!*end) *split = splits_[next_++];
    return absl::OkStatus();
  }
  absl::Status Reset() override {
    next_ = 0;
    return absl::OkStatus();
  }
  std::string Save() const override { return std::to_string(next_); }
  absl::Status Restore(const std::string& state) override {
    next_ = std::stoul(state);
    return absl::OkStatus();
  }

 private:
  std::vector<Split> splits_;
  size_t next_ = 0;
};

TEST_CASE("IndexSplitProvider cuts positions into ranges", "[splits]") {
  IndexSplitProvider provider(10, 3);
  CHECK(Drain(provider) == std::vector<Split>{{0, 3}, {3, 6}, {6, 9}, {9, 10}});
  REQUIRE(provider.Reset().ok());
  CHECK(Drain(provider).size() == 4);
  IndexSplitProvider empty(0, 3);
  CHECK(Drain(empty).empty());
}

TEST_CASE("IndexSplitProvider saves and restores its position", "[splits]") {
  IndexSplitProvider provider(10, 3);
  Split split;
  bool end = false;
  REQUIRE(provider.GetNext(&split, &end).ok());
  const std::string state = provider.Save();
  CHECK(state == "1:0");
  IndexSplitProvider restored(10, 3);
  REQUIRE(restored.Restore(state).ok());
  CHECK(Drain(restored) == std::vector<Split>{{3, 6}, {6, 9}, {9, 10}});
  CHECK(restored.Restore("garbage").message() == "malformed split provider state 'garbage'");
}

TEST_CASE("A shuffled provider is seeded per epoch and restores mid-epoch", "[splits]") {
  IndexSplitProvider a(8, 1, 42);
  IndexSplitProvider b(8, 1, 42);
  std::vector<Split> first = Drain(a);
  CHECK(first == Drain(b));
  std::vector<int64_t> begins;
  for (const Split& s : first) begins.push_back(s.begin);
  std::vector<int64_t> sorted = begins;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(begins != sorted);  // seed 42 does not leave 8 files in order
  REQUIRE(a.Reset().ok());
  std::vector<Split> second = Drain(a);
  CHECK(second != first);

  IndexSplitProvider c(8, 1, 42);
  REQUIRE(c.Reset().ok());
  Split split;
  bool end = false;
  REQUIRE(c.GetNext(&split, &end).ok());
  IndexSplitProvider d(8, 1, 42);
  REQUIRE(d.Restore(c.Save()).ok());
  std::vector<Split> rest = Drain(d);
  CHECK(rest == std::vector<Split>(second.begin() + 1, second.end()));
}

TEST_CASE("RepeatSplitProvider replays its input and stops on an empty one", "[splits]") {
  RepeatSplitProvider twice(std::make_unique<IndexSplitProvider>(4, 2), 2);
  CHECK(Drain(twice) == std::vector<Split>{{0, 2}, {2, 4}, {0, 2}, {2, 4}});
  RepeatSplitProvider forever_empty(std::make_unique<IndexSplitProvider>(0, 2), -1);
  CHECK(Drain(forever_empty).empty());

  RepeatSplitProvider saved(std::make_unique<IndexSplitProvider>(4, 2), 2);
  Split split;
  bool end = false;
  for (int i = 0; i < 3; ++i) REQUIRE(saved.GetNext(&split, &end).ok());
  RepeatSplitProvider restored(std::make_unique<IndexSplitProvider>(4, 2), 2);
  REQUIRE(restored.Restore(saved.Save()).ok());
  CHECK(Drain(restored) == std::vector<Split>{{2, 4}});
}

TEST_CASE("MakeSplitProvider follows the source and its repeats", "[splits]") {
  SplitOptions options;
  options.elements_per_split = 4;
  auto provider =
      MakeSplitProvider(internal::DefinitionOf(Dataset::Range(10).Map("square").Repeat(2)), options);
  REQUIRE(provider.ok());
  CHECK(Drain(**provider) == std::vector<Split>{{0, 4}, {4, 8}, {8, 10}, {0, 4}, {4, 8}, {8, 10}});

  auto zip = MakeSplitProvider(internal::DefinitionOf(Dataset::Zip({Dataset::Range(3), Dataset::Range(3)})));
  CHECK(zip.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(zip.status().message()),
             Catch::StartsWith("a pipeline whose source is 'zip' cannot be split for distributed_epoch"));
  auto tensors =
      MakeSplitProvider(internal::DefinitionOf(Dataset::FromTensors({Tensor::Scalar<int64_t>(1)})));
  CHECK(tensors.status().code() == absl::StatusCode::kFailedPrecondition);

  auto files = MakeSplitProvider(internal::DefinitionOf(Dataset::TFRecord({"a", "b", "c"})));
  REQUIRE(files.ok());
  CHECK(Drain(**files) == std::vector<Split>{{0, 1}, {1, 2}, {2, 3}});
}

TEST_CASE("MakeSplitProvider refuses concatenate, whose pipeline every worker would read whole", "[splits]") {
  auto concatenated = MakeSplitProvider(
      internal::DefinitionOf(Dataset::Range(9).Map("square").Concatenate(Dataset::Range(3))));
  CHECK(concatenated.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(concatenated.status().message() ==
        "the pipeline cannot be split for distributed_epoch: step 3 (concatenate) would read its whole "
        "pipeline "
        "on every worker");
}

TEST_CASE("MakeSplitProvider splits a pipeline with flat_map, as one with interleave", "[splits]") {
  // flat_map maps each element of a split on the worker that reads it.
  SplitOptions options;
  options.elements_per_split = 4;
  auto flat =
      MakeSplitProvider(internal::DefinitionOf(Dataset::Range(6).FlatMap(Dataset::Range(2))), options);
  REQUIRE(flat.ok());
  CHECK(Drain(**flat) == std::vector<Split>{{0, 4}, {4, 6}});
}

TEST_CASE("MakeSplitProvider refuses the mixing ops, sources of sub-pipelines as zip", "[splits]") {
  auto sampled = MakeSplitProvider(
      internal::DefinitionOf(Dataset::SampleFromDatasets({Dataset::Range(3), Dataset::Range(3)}, {}, 1)));
  CHECK(sampled.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(sampled.status().message()),
             Catch::StartsWith("a pipeline whose source is 'sample_from_datasets' cannot be split"));
  auto chosen = MakeSplitProvider(
      internal::DefinitionOf(Dataset::ChooseFromDatasets({Dataset::Range(3)}, Dataset::Range(1))));
  CHECK_THAT(std::string(chosen.status().message()),
             Catch::StartsWith("a pipeline whose source is 'choose_from_datasets' cannot be split"));
}

TEST_CASE("MakeSplitProvider refuses unique, which would drop each worker's repeats alone", "[splits]") {
  auto unique = MakeSplitProvider(internal::DefinitionOf(Dataset::Range(9).Unique()));
  CHECK(unique.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(unique.status().message() ==
        "the pipeline cannot be split for distributed_epoch: step 2 (unique) would drop repeats only within "
        "each "
        "worker's elements");
}

TEST_CASE("MakeSplitProvider splits a pipeline with window, as one with batch", "[splits]") {
  SplitOptions options;
  options.elements_per_split = 4;
  auto windows = MakeSplitProvider(internal::DefinitionOf(Dataset::Range(6).Window(2, 1)), options);
  REQUIRE(windows.ok());
  CHECK(Drain(**windows) == std::vector<Split>{{0, 4}, {4, 6}});
}

TEST_CASE("MakeSplitProvider refuses scan, whose state each worker would start again", "[splits]") {
  auto scanned = MakeSplitProvider(
      internal::DefinitionOf(Dataset::Range(9).Scan("accumulate", {Tensor::Scalar<int64_t>(0)})));
  CHECK(scanned.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(scanned.status().message() ==
        "the pipeline cannot be split for distributed_epoch: step 2 (scan) would start its state again on "
        "every "
        "worker");
}

TEST_CASE("A pipeline fed splits from outside reads only those positions", "[splits]") {
  DatasetPtr dataset = *internal::BuildPipeline(Dataset::Range(100, 120, 1).Map("add", {{"value", 1}}));
  FixedSplits splits({{15, 18}, {2, 4}});
  IteratorContext context;
  context.split_provider = &splits;
  absl::StatusOr<std::vector<Element>> elements = CollectElements(*dataset, context);
  REQUIRE(elements.ok());
  CHECK(testing::Int64Values(*elements) == std::vector<int64_t>{116, 117, 118, 103, 104});

  FixedSplits out_of_range({{18, 25}});
  context.split_provider = &out_of_range;
  absl::StatusOr<std::vector<Element>> bad = CollectElements(*dataset, context);
  CHECK(bad.status().message() == "split [18, 25) is out of range for a source of 20 positions");
}

TEST_CASE("Splits of a shared provider cover a repeated epoch exactly once", "[splits]") {
  // Two readers of one provider (as two workers of one job) see every
  // element of both epochs exactly once between them.
  proto::DatasetDef def = internal::DefinitionOf(
      Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({0, 1, 2, 3, 4, 5, 6})}).Repeat(2));
  SplitOptions options;
  options.elements_per_split = 2;
  std::unique_ptr<SplitProvider> provider = *MakeSplitProvider(def, options);
  DatasetPtr dataset = *BuildDataset(def);
  IteratorContext context;
  context.split_provider = provider.get();
  auto first = *dataset->MakeIterator(context);
  auto second = *dataset->MakeIterator(context);
  std::vector<int64_t> seen;
  bool first_done = false;
  bool second_done = false;
  while (!first_done || !second_done) {
    for (auto* it : {&first, &second}) {
      bool& done = it == &first ? first_done : second_done;
      if (done) continue;
      Element e;
      REQUIRE((*it)->GetNext(&e, &done).ok());
      if (!done) seen.push_back(e.components[0].data<int64_t>()[0]);
    }
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6});
}

// Run arithmetic (ExtendSplitRun, SplitRunPart) is tested in split_run_test.cc.
TEST_CASE("A source reads a run's positions like one split's, batched too", "[splits]") {
  DatasetPtr dataset = *internal::BuildPipeline(Dataset::Range(100).Batch(8));
  FixedSplits one_run({Split{20, 46, 5, 3, 10}});
  IteratorContext context;
  context.split_provider = &one_run;
  absl::StatusOr<std::vector<Element>> batches = CollectElements(*dataset, context);
  REQUIRE(batches.ok());
  REQUIRE(batches->size() == 4);
  CHECK((*batches)[0].components[0].dim(0) == 8);
  CHECK((*batches)[0].components[0].data<int64_t>()[0] == 20);
  CHECK((*batches)[3].components[0].dim(0) == 2);
  CHECK((*batches)[3].components[0].data<int64_t>()[1] == 45);
}

}  // namespace
}  // namespace sluice
