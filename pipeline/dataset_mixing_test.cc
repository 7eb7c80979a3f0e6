// Tests of sample_from_datasets and choose_from_datasets
// (dataset_mixing.cc): the weights' proportions, seeds, what happens when an
// input ends, tf.data's documented example, errors, and restoring mid-stream.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "pipeline/yaml_loader.h"
#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;
using testing::IntsOf;
using testing::JsonOf;
using testing::MustBuild;
using testing::Yaml;
using Ints = std::vector<int64_t>;
using Lines = std::vector<std::string>;

Dataset Forever(int64_t value) { return Dataset::FromTensors({Tensor::Scalar<int64_t>(value)}).Repeat(); }

Ints Read(Iterator& it, int64_t count) {
  Ints out;
  while (static_cast<int64_t>(out.size()) < count) {
    absl::StatusOr<std::optional<Element>> next = it.GetNextAsOptional();
    INFO(next.status().ToString());
    REQUIRE(next.ok());
    if (!next->has_value()) break;
    out.push_back((*next)->components[0].data<int64_t>()[0]);
  }
  return out;
}

// ------------------------------------------------------- sample_from_datasets

TEST_CASE("sample_from_datasets: weights 0.75 and 0.25 over 10,000 draws", "[ops][sample_from_datasets]") {
  const Ints drawn =
      IntsOf(Dataset::SampleFromDatasets({Forever(0), Forever(1)}, {0.75, 0.25}, 42).Take(10000));
  REQUIRE(drawn.size() == 10000);
  const int64_t zeros = std::count(drawn.begin(), drawn.end(), 0);
  CHECK(zeros + std::count(drawn.begin(), drawn.end(), 1) == 10000);
  // Binomial: mean 7500, standard deviation sqrt(10000 * 0.75 * 0.25) = 43.3.
  INFO("zeros: " << zeros);
  CHECK(std::abs(zeros - 7500) <= 3 * std::sqrt(10000 * 0.75 * 0.25));
  // Weights are normalised: 3 and 1 are 0.75 and 0.25.
  CHECK(IntsOf(Dataset::SampleFromDatasets({Forever(0), Forever(1)}, {3, 1}, 42).Take(10000)) == drawn);
}

TEST_CASE("sample_from_datasets: equal seeds draw equally, other seeds otherwise",
          "[ops][sample_from_datasets]") {
  const auto draws = [](std::optional<int64_t> seed) {
    return IntsOf(Dataset::SampleFromDatasets({Forever(0), Forever(1), Forever(2)}, {}, seed).Take(200));
  };
  CHECK(draws(7) == draws(7));
  CHECK(draws(7) != draws(8));
  // Without weights, each input is as likely: all three appear.
  const Ints seven = draws(7);
  for (int64_t v : {0, 1, 2}) CHECK(std::count(seven.begin(), seven.end(), v) > 40);
  // The same from YAML, which gives the same definition.
  const Lines yaml = Yaml(
      "pipeline:\n"
      "  - sample_from_datasets:\n"
      "      datasets: [[{from_tensors: 0}, repeat], [{from_tensors: 1}, repeat], [{from_tensors: 2}, "
      "repeat]]\n"
      "      seed: 7\n"
      "  - take: 200\n");
  Lines expected;
  for (int64_t v : seven) expected.push_back(std::to_string(v));
  CHECK(yaml == expected);
}

TEST_CASE("sample_from_datasets: an input that ends", "[ops][sample_from_datasets]") {
  const Dataset short_input = Dataset::Range(0, 3);
  const Dataset long_input = Dataset::Range(100, 1100);
  // stop_on_empty_dataset false (tf.data's default): the other goes on
  // alone, so every element of both comes out, each input in its order.
  const Ints all = IntsOf(Dataset::SampleFromDatasets({short_input, long_input}, {0.5, 0.5}, 3));
  REQUIRE(all.size() == 1003);
  Ints firsts;
  Ints seconds;
  for (int64_t v : all) (v < 100 ? firsts : seconds).push_back(v);
  CHECK(firsts == Ints{0, 1, 2});
  CHECK(seconds.front() == 100);
  CHECK(seconds.back() == 1099);
  CHECK(std::is_sorted(seconds.begin(), seconds.end()));
  // stop_on_empty_dataset: the result ends at the first pick of the ended
  // input, long before the other's end.
  const Ints stopped = IntsOf(Dataset::SampleFromDatasets({short_input, long_input}, {0.5, 0.5}, 3, true));
  CHECK(std::count_if(stopped.begin(), stopped.end(), [](int64_t v) { return v < 100; }) == 3);
  CHECK(stopped.size() < 50);
  CHECK(Ints(stopped.begin(), stopped.end()) == Ints(all.begin(), all.begin() + stopped.size()));
  // An input of weight 0 is never read, as in tf.data: the result is the
  // other one's, and it ends with it.
  CHECK(IntsOf(Dataset::SampleFromDatasets({short_input, Forever(9)}, {1, 0}, 3)) == Ints{0, 1, 2});
  CHECK(MustBuild(Dataset::SampleFromDatasets({Forever(1), Forever(2)}, {1, 1}))->Cardinality() ==
        kInfiniteCardinality);
  CHECK(MustBuild(Dataset::SampleFromDatasets({short_input, Forever(2)}, {1, 1}))->Cardinality() ==
        kUnknownCardinality);
}

TEST_CASE("sample_from_datasets: restoring mid-stream gives the same continuation",
          "[ops][sample_from_datasets]") {
  // Unseeded: each build draws its own seed, so the checkpoint must carry it.
  for (const std::optional<int64_t> seed : {std::optional<int64_t>(5), std::optional<int64_t>()}) {
    INFO("seeded: " << seed.has_value());
    const Dataset mixed = Dataset::SampleFromDatasets(
        {Dataset::Range(0, 40), Dataset::Range(100, 400).Shuffle(7, 1)}, {0.75, 0.25}, seed);
    absl::StatusOr<Iterator> first = mixed.MakeIterator();
    REQUIRE(first.ok());
    const Ints before = Read(*first, 25);
    absl::StatusOr<std::string> state = first->Save();
    REQUIRE(state.ok());
    const Ints went_on = Read(*first, 1000);
    absl::StatusOr<Iterator> restored = mixed.MakeIterator(*state);
    INFO(restored.status().ToString());
    REQUIRE(restored.ok());
    CHECK(Read(*restored, 1000) == went_on);
    CHECK(before.size() + went_on.size() == 340);
  }
}

TEST_CASE("sample_from_datasets: argument errors", "[ops][sample_from_datasets]") {
  const Dataset a = Dataset::Range(3);
  CHECK(BuildError(Dataset::SampleFromDatasets({a, a}, {1, 2, 3})).message() ==
        "step 1 (sample_from_datasets): 'weights' has 3 values for 2 datasets");
  CHECK(BuildError(Dataset::SampleFromDatasets({a, a}, {1, -1})).message() ==
        "step 1 (sample_from_datasets): weight 2 is -1; weights must be finite and >= 0");
  CHECK(BuildError(Dataset::SampleFromDatasets({a, a}, {0, 0})).message() ==
        "step 1 (sample_from_datasets): the weights sum to 0");
  CHECK(BuildError(Dataset::SampleFromDatasets({})).message() ==
        "step 1 (sample_from_datasets): 'datasets' is empty; it needs at least one pipeline");
  CHECK(BuildError(Dataset::SampleFromDatasets({a, Dataset::FromTensors({Tensor::StringScalar("x")})}))
            .message() ==
        "step 1 (sample_from_datasets): dataset 2: incompatible element specs "
        "TensorSpec(shape=[], dtype=int64) and TensorSpec(shape=[], dtype=string) (components must match in "
        "number, names and dtype)");
  CHECK(BuildError(Dataset::SampleFromDatasets({a, Dataset::Range(0, 1, 0)})).message() ==
        "step 1 (sample_from_datasets): dataset 2: step 1 (range): step must not be 0");
  absl::StatusOr<Lines> bad_weight = testing::RunYaml(
      "pipeline:\n  - sample_from_datasets: {datasets: [[range: 2], [range: 3]], weights: [1, x]}\n");
  REQUIRE_FALSE(bad_weight.ok());
  CHECK(bad_weight.status().message() ==
        "test.yaml:2:77: sample_from_datasets: argument 'weights' must be a number, got 'x'");
}

TEST_CASE("sample_from_datasets: weights from a file, read again at each restore",
          "[ops][sample_from_datasets][checkpoint]") {
  testing::TempDir dir;
  const std::string weights = dir.File("weights.txt");
  testing::WriteFile(weights, "3, 1\n");
  const std::vector<Dataset> inputs = {Forever(0), Forever(1)};
  const Dataset from_file = Dataset::SampleFromDatasetsWithWeightsFile(inputs, weights, 42);
  // The file's 3 and 1 draw as the weights 3 and 1 do.
  const Ints inline_drawn = IntsOf(Dataset::SampleFromDatasets(inputs, {3, 1}, 42).Take(2000));
  CHECK(IntsOf(from_file.Take(2000)) == inline_drawn);

  absl::StatusOr<Iterator> first = from_file.MakeIterator();
  REQUIRE(first.ok());
  const Ints before = Read(*first, 100);
  CHECK(before == Ints(inline_drawn.begin(), inline_drawn.begin() + 100));
  absl::StatusOr<std::string> state = first->Save();
  REQUIRE(state.ok());
  // The file unchanged: the continuation of an uninterrupted read.
  absl::StatusOr<Iterator> same = from_file.MakeIterator(*state);
  REQUIRE(same.ok());
  CHECK(Read(*same, 500) == Ints(inline_drawn.begin() + 100, inline_drawn.begin() + 600));
  // Changed between save and restore: the restored read goes on from the
  // saved position with the new mixture, without replaying anything.
  testing::WriteFile(weights, "0 1");
  absl::StatusOr<Iterator> changed = from_file.MakeIterator(*state);
  REQUIRE(changed.ok());
  CHECK(Read(*changed, 300) == Ints(300, 1));
  testing::WriteFile(weights, "1\n0\n");
  absl::StatusOr<Iterator> back = from_file.MakeIterator(*state);
  REQUIRE(back.ok());
  CHECK(Read(*back, 300) == Ints(300, 0));
  // When the inputs still open all have weight 0, the result ends.
  CHECK(IntsOf(Dataset::SampleFromDatasetsWithWeightsFile({Dataset::Range(3), Forever(9)}, weights, 1)) ==
        Ints{0, 1, 2});

  testing::WriteFile(weights, "1 2 3");
  CHECK(BuildError(from_file).message() ==
        "step 1 (sample_from_datasets): weights_file '" + weights + "' has 3 values for 2 datasets");
  CHECK(from_file.MakeIterator(*state).status().message() ==
        "step 1 (sample_from_datasets): weights_file '" + weights + "' has 3 values for 2 datasets");
  testing::WriteFile(weights, "1 heavy");
  CHECK(BuildError(from_file).message() ==
        "step 1 (sample_from_datasets): weights_file '" + weights +
            "': value 2 is not a number (a weights file holds numbers separated by spaces, commas or new "
            "lines)");
  testing::WriteFile(weights, "0 0");
  CHECK(BuildError(from_file).message() ==
        "step 1 (sample_from_datasets): weights_file '" + weights + "': the weights sum to 0");
  testing::WriteFile(weights, "1 -2");
  CHECK(BuildError(from_file).message() == "step 1 (sample_from_datasets): weights_file '" + weights +
                                               "': weight 2 is -2; weights must be finite and >= 0");
  const std::string missing = dir.File("missing.txt");
  CHECK(BuildError(Dataset::SampleFromDatasetsWithWeightsFile(inputs, missing)).code() ==
        absl::StatusCode::kNotFound);
  absl::StatusOr<Lines> both = testing::RunYaml(
      "pipeline:\n  - sample_from_datasets: {datasets: [[range: 2], [range: 3]], weights: [1, 1], "
      "weights_file: w.txt}\n");
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message() ==
        "test.yaml:2:5: step 1 (sample_from_datasets): give 'weights' or 'weights_file', not both");
}

TEST_CASE("sample_from_datasets and choose_from_datasets: YAML gives the SDK's definitions",
          "[ops][sample_from_datasets][choose_from_datasets][yaml]") {
  const auto fingerprint = testing::YamlFingerprint;
  const std::vector<Dataset> two = {Dataset::Range(3), Dataset::Range(10, 13)};
  CHECK(fingerprint(
            "pipeline:\n  - sample_from_datasets: {datasets: [[range: 3], [{range: {start: 10, stop: 13}}]], "
            "weights: [0.75, 0.25], seed: 4}\n") ==
        Dataset::SampleFromDatasets(two, {0.75, 0.25}, 4).Fingerprint());
  // The shorthand: the datasets alone, tf.data's defaults for the rest.
  CHECK(
      fingerprint("pipeline:\n  - sample_from_datasets: [[range: 3], [{range: {start: 10, stop: 13}}]]\n") ==
      Dataset::SampleFromDatasets(two).Fingerprint());
  // choose_from_datasets stops on an empty dataset unless told otherwise.
  CHECK(fingerprint(
            "pipeline:\n  - choose_from_datasets: {datasets: [[range: 3], [{range: {start: 10, stop: 13}}]], "
            "choice_pipeline: [range: 2]}\n") ==
        Dataset::ChooseFromDatasets(two, Dataset::Range(2)).Fingerprint());
  CHECK(fingerprint(
            "pipeline:\n  - choose_from_datasets: {datasets: [[range: 3], [{range: {start: 10, stop: 13}}]], "
            "choice_pipeline: [range: 2], stop_on_empty_dataset: false}\n") ==
        Dataset::ChooseFromDatasets(two, Dataset::Range(2), false).Fingerprint());
  absl::StatusOr<LoadedPipeline> typo = ParsePipelineYaml(
      "pipeline:\n  - choose_from_datasets: {datasets: [[range: 3]], choice: [range: 2]}\n", "test.yaml");
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.status().message() == "test.yaml:2:52: unknown argument 'choice' for op 'choose_from_datasets'");
  absl::StatusOr<LoadedPipeline> no_choice =
      ParsePipelineYaml("pipeline:\n  - choose_from_datasets: {datasets: [[range: 3]]}\n", "test.yaml");
  REQUIRE_FALSE(no_choice.ok());
  CHECK(no_choice.status().message() ==
        "test.yaml:2:5: step 1 (choose_from_datasets): choice_pipeline has no steps");
}

// ------------------------------------------------------- choose_from_datasets

TEST_CASE("choose_from_datasets: tf.data's example", "[ops][choose_from_datasets]") {
  // tf.data's documentation: foo, bar, baz forever, and the choices
  // range(3).repeat(3).
  const auto forever = [](const char* word) {
    return Dataset::FromTensors({Tensor::StringScalar(word)}).Repeat();
  };
  const Lines expected = {"\"foo\"", "\"bar\"", "\"baz\"", "\"foo\"", "\"bar\"",
                          "\"baz\"", "\"foo\"", "\"bar\"", "\"baz\""};
  CHECK(JsonOf(Dataset::ChooseFromDatasets({forever("foo"), forever("bar"), forever("baz")},
                                           Dataset::Range(3).Repeat(3))) == expected);
  CHECK(Yaml("pipeline:\n"
             "  - choose_from_datasets:\n"
             "      datasets:\n"
             "        - [{from_tensors: foo}, repeat]\n"
             "        - [{from_tensors: bar}, repeat]\n"
             "        - [{from_tensors: baz}, repeat]\n"
             "      choice_pipeline: [{range: 3}, {repeat: 3}]\n") == expected);
}

TEST_CASE("choose_from_datasets: an input that ends", "[ops][choose_from_datasets]") {
  const std::vector<Dataset> inputs = {Dataset::Range(2), Dataset::Range(10, 20)};
  const Dataset choices = Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({0, 0, 0, 1, 0, 1})});
  // tf.data's default stops at the first choice of an ended input.
  CHECK(IntsOf(Dataset::ChooseFromDatasets(inputs, choices)) == Ints{0, 1});
  // Otherwise such a choice is skipped.
  CHECK(IntsOf(Dataset::ChooseFromDatasets(inputs, choices, false)) == Ints{0, 1, 10, 11});
  CHECK(MustBuild(Dataset::ChooseFromDatasets(inputs, choices))->Cardinality() == kUnknownCardinality);
  CHECK(MustBuild(Dataset::ChooseFromDatasets({Forever(1)}, Dataset::Range(1).Repeat()))->Cardinality() ==
        kInfiniteCardinality);
}

TEST_CASE("choose_from_datasets: an index out of range names it", "[ops][choose_from_datasets]") {
  const Dataset chosen =
      Dataset::ChooseFromDatasets({Forever(0), Forever(1), Forever(2)},
                                  Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({2, 3, 0, -1})}));
  DatasetPtr built = MustBuild(chosen);
  std::unique_ptr<IteratorBase> it = testing::MustIterate(built);
  Element element;
  bool end = false;
  REQUIRE(it->GetNext(&element, &end).ok());
  CHECK(element.components[0].data<int64_t>()[0] == 2);
  absl::Status three = it->GetNext(&element, &end);
  CHECK(three.code() == absl::StatusCode::kInvalidArgument);
  CHECK(three.message() ==
        "choose_from_datasets: the choice pipeline yielded 3, out of range for 3 datasets (valid: 0 to 2)");
  // The error belongs to that call; the next choice goes on.
  REQUIRE(it->GetNext(&element, &end).ok());
  CHECK(element.components[0].data<int64_t>()[0] == 0);
  CHECK(it->GetNext(&element, &end).message() ==
        "choose_from_datasets: the choice pipeline yielded -1, out of range for 3 datasets (valid: 0 to 2)");
}

TEST_CASE("choose_from_datasets: argument errors", "[ops][choose_from_datasets]") {
  CHECK(BuildError(Dataset::ChooseFromDatasets({Forever(0)}, Dataset::Range(3).Batch(2))).message() ==
        "step 1 (choose_from_datasets): choice_pipeline must yield int64 scalars; its elements are "
        "TensorSpec(shape=[?], dtype=int64)");
  CHECK(BuildError(Dataset::ChooseFromDatasets({Forever(0)}, Dataset::Range(0, 3, 0))).message() ==
        "step 1 (choose_from_datasets): choice_pipeline: step 1 (range): step must not be 0");
  CHECK(BuildError(Dataset::ChooseFromDatasets(
                       {Forever(0), Dataset::FromTensors({Tensor::StringScalar("x")})}, Dataset::Range(2)))
            .message() ==
        "step 1 (choose_from_datasets): dataset 2: incompatible element specs TensorSpec(shape=[], "
        "dtype=int64) and "
        "TensorSpec(shape=[], dtype=string) (components must match in number, names and dtype)");
  // Ranks that differ are compatible, as in tf.data: the shape becomes unknown.
  CHECK(MustBuild(Dataset::ChooseFromDatasets({Forever(0), Dataset::Range(3).Batch(2)}, Dataset::Range(2)))
            ->element_spec()
            .DebugString() == "TensorSpec(shape=<unknown>, dtype=int64)");
}

}  // namespace
}  // namespace sluice
