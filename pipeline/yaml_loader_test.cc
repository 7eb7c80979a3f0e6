// Tests of the YAML pipeline loader (pipeline/yaml_loader.cc): the accepted
// forms, and error messages with their "file:line:column: " positions
// (1-based, computed from the YAML text in each test).
#include "pipeline/yaml_loader.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::WriteFile;

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;
using testing::RunYaml;

using Lines = std::vector<std::string>;

constexpr char kIssueExample[] =
    "pipeline:\n"
    "  - range: 10                 # shorthand for {start: 0, stop: 10, step: 1}\n"
    "  - map: {fn: square}\n"
    "  - batch: {batch_size: 4}\n";

constexpr char kShuffleExample[] =
    "pipeline:\n"
    "  - from_tensor_slices: [1, 2, 3, 4]\n"
    "  - repeat: 2\n"
    "  - shuffle: {buffer_size: 8, seed: 42}\n";

// The status of loading `text` (as "test.yaml"), which must fail.
absl::Status LoadError(const std::string& text) {
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text, "test.yaml");
  REQUIRE_FALSE(loaded.ok());
  return loaded.status();
}

// Checks that loading fails with InvalidArgument and exactly `message`.
void CheckLoadError(const std::string& text, const std::string& message) {
  INFO(text);
  const absl::Status status = LoadError(text);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), Equals(message));
}

LoadedPipeline Load(const std::string& text) {
  INFO(text);
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text, "test.yaml");
  if (!loaded.ok()) FAIL(loaded.status().message());
  return *std::move(loaded);
}

Lines Run(const std::string& text) {
  INFO(text);
  absl::StatusOr<Lines> lines = RunYaml(text);
  if (!lines.ok()) FAIL(lines.status().message());
  return *std::move(lines);
}

// ---------------------------------------------------------------------------
// The examples of the issue.

TEST_CASE("yaml: the range/map/batch example", "[yaml]") {
  CHECK(Run(kIssueExample) == Lines{"[0, 1, 4, 9]", "[16, 25, 36, 49]", "[64, 81]"});

  const LoadedPipeline loaded = Load(kIssueExample);
  REQUIRE(loaded.def.steps_size() == 3);
  CHECK(loaded.def.steps(0).range().start() == 0);
  CHECK(loaded.def.steps(0).range().stop() == 10);
  CHECK(loaded.def.steps(0).range().step() == 1);
  CHECK(loaded.def.steps(1).map().fn().name() == "square");
  CHECK(loaded.def.steps(2).batch().batch_size() == 4);
  CHECK(loaded.step_locations == std::vector<std::string>{"test.yaml:2:5", "test.yaml:3:5", "test.yaml:4:5"});
}

TEST_CASE("yaml: the seeded shuffle example gives the same order on every load", "[yaml]") {
  const Lines first = Run(kShuffleExample);
  const Lines second = Run(kShuffleExample);
  CHECK(first == second);
  Lines sorted = first;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == Lines{"1", "1", "2", "2", "3", "3", "4", "4"});
  // The shuffle draws through a platform-independent generator, so the
  // order itself is fixed by the seed.
  CHECK(first == Lines{"2", "3", "2", "4", "3", "1", "1", "4"});

  const LoadedPipeline loaded = Load(kShuffleExample);
  REQUIRE(loaded.def.steps_size() == 3);
  CHECK(loaded.def.steps(1).repeat().count() == 2);
  CHECK(loaded.def.steps(2).shuffle().buffer_size() == 8);
  CHECK(loaded.def.steps(2).shuffle().has_seed());
  CHECK(loaded.def.steps(2).shuffle().seed() == 42);
  CHECK(loaded.def.steps(2).shuffle().reshuffle_each_iteration());
}

TEST_CASE("yaml: YAML and the C++ builder give the same fingerprint", "[yaml]") {
  const LoadedPipeline loaded = Load(kIssueExample);
  const std::string fingerprint = DatasetFingerprint(loaded.def);
  CHECK(fingerprint == Dataset::Range(10).Map("square").Batch(4).Fingerprint());
  CHECK(fingerprint.size() == 32);
  CHECK(fingerprint.find_first_not_of("0123456789abcdef") == std::string::npos);
  // Any change to the definition changes it.
  CHECK(fingerprint != Dataset::Range(10).Map("square").Batch(5).Fingerprint());
  CHECK(fingerprint != Dataset::Range(10).Batch(4).Fingerprint());

  const LoadedPipeline shuffled = Load(kShuffleExample);
  CHECK(DatasetFingerprint(shuffled.def) ==
        Dataset::FromTensorSlices({Tensor::FromVector<int64_t>({1, 2, 3, 4})})
            .Repeat(2)
            .Shuffle(8, 42)
            .Fingerprint());
  CHECK(DatasetFingerprint(Load("pipeline:\n  - range: {start: 0, stop: 10, step: 1}\n  - map: square\n"
                                "  - batch: 4\n")
                               .def) == fingerprint);
}

// ---------------------------------------------------------------------------
// Errors, each with its position.

TEST_CASE("yaml: an unknown op names the closest one", "[yaml]") {
  CheckLoadError("pipeline:\n  - range: 10\n  - bach: 4\n",
                 "test.yaml:3:5: unknown op 'bach'; did you mean 'batch'?");
  CheckLoadError("pipeline:\n  - rnage: 10\n", "test.yaml:2:5: unknown op 'rnage'; did you mean 'range'?");
  CheckLoadError("pipeline:\n  - range: 10\n  - unbach\n",
                 "test.yaml:3:5: unknown op 'unbach'; did you mean 'unbatch'?");
  CheckLoadError("pipeline:\n  - range: 10\n  - frobnicate: 4\n", "test.yaml:3:5: unknown op 'frobnicate'");
}

TEST_CASE("yaml: an unknown argument names the closest one", "[yaml]") {
  // "  - batch: {" puts the key at column 13.
  CheckLoadError("pipeline:\n  - range: 10\n  - batch: {batch_sise: 4}\n",
                 "test.yaml:3:13: unknown argument 'batch_sise' for op 'batch'; did you mean 'batch_size'?");
  CheckLoadError("pipeline:\n  - range:\n      start: 1\n      stpo: 4\n",
                 "test.yaml:4:7: unknown argument 'stpo' for op 'range'; did you mean 'stop'?");
  // An element function's argument.
  CheckLoadError("pipeline:\n  - range: 10\n  - map: {fn: add, valeu: 1}\n",
                 "test.yaml:3:20: map: unknown argument 'valeu' for function 'add'; did you mean 'value'? "
                 "(valid: component, value)");
}

TEST_CASE("yaml: an unknown function names the closest one", "[yaml]") {
  CheckLoadError("pipeline:\n  - range: 10\n  - map: {fn: sqaure}\n",
                 "test.yaml:3:15: map: unknown function 'sqaure'; did you mean 'square'?");
  CheckLoadError("pipeline:\n  - range: 10\n  - filter: {fn: lesser, value: 3}\n",
                 "test.yaml:3:18: filter: unknown function 'lesser'; did you mean 'less'?");
  CheckLoadError("pipeline:\n  - range: 10\n  - filter: {fn: [less]}\n",
                 "test.yaml:3:18: filter: 'fn' must be a function name");
  CheckLoadError("pipeline:\n  - range: 10\n  - map: [square]\n",
                 "test.yaml:3:10: map: expected {fn: NAME, ...} or a function name");
}

TEST_CASE("yaml: an unknown dtype names the closest one", "[yaml]") {
  CheckLoadError(
      "pipeline:\n  - range: 10\n  - map: {fn: cast, dtype: flaot32}\n",
      "test.yaml:3:21: map: cast: argument 'dtype': unknown dtype 'flaot32'; did you mean 'float32'?");
  CheckLoadError("pipeline:\n  - from_tensor_slices: {values: [1, 2], dtype: flaot32}\n",
                 "test.yaml:2:49: from_tensor_slices: unknown dtype 'flaot32'; did you mean 'float32'?");
}

TEST_CASE("yaml: an argument of the wrong type", "[yaml]") {
  CheckLoadError("pipeline:\n  - range: 10\n  - batch: {batch_size: abc}\n",
                 "test.yaml:3:25: batch: argument 'batch_size' must be an integer, got 'abc'");
  CheckLoadError("pipeline:\n  - range: 10\n  - take: many\n",
                 "test.yaml:3:11: take: argument 'count' must be an integer, got 'many'");
  CheckLoadError("pipeline:\n  - range: 10\n  - batch: {batch_size: 2, drop_remainder: maybe}\n",
                 "test.yaml:3:44: batch: argument 'drop_remainder' must be true or false, got 'maybe'");
  CheckLoadError("pipeline:\n  - range: 10\n  - batch: {batch_size: [1, 2]}\n",
                 "test.yaml:3:25: batch: argument 'batch_size' must be a single value");
  CheckLoadError("pipeline:\n  - range: 10\n  - unbatch: 3\n",
                 "test.yaml:3:14: 'unbatch' takes a map of arguments");
}

TEST_CASE("yaml: a step that is not a one-key map", "[yaml]") {
  const std::string message =
      "a step must be a map with one key, the op name (as in '- batch: {batch_size: 4}')";
  CheckLoadError("pipeline:\n  - range: 10\n  - {batch: 4, take: 2}\n", "test.yaml:3:5: " + message);
  CheckLoadError("pipeline:\n  - range: 10\n  - batch: 4\n    take: 2\n", "test.yaml:3:5: " + message);
  CheckLoadError("pipeline:\n  - range: 10\n  - [batch, 4]\n", "test.yaml:3:5: " + message);
}

TEST_CASE("yaml: the top level: unknown keys and wrong shapes", "[yaml]") {
  CheckLoadError(
      "pipline:\n  - range: 3\n",
      "test.yaml:1:1: unknown top-level key 'pipline'; did you mean 'pipeline'? (valid: pipeline, plugins)");
  CheckLoadError("pipeline:\n  - range: 3\nseed: 4\n",
                 "test.yaml:3:1: unknown top-level key 'seed' (valid: pipeline, plugins)");
  CheckLoadError("just words\n", "test.yaml:1:1: expected a map with a 'pipeline' list");
  CheckLoadError("pipeline: {range: 3}\n", "test.yaml:1:11: expected a list of steps");
  CheckLoadError("pipeline: []\n", "test.yaml:1:11: the pipeline has no steps");
}

TEST_CASE("yaml: invalid YAML syntax", "[yaml]") {
  // An unclosed flow map: yaml-cpp reports it where the document ends.
  CheckLoadError("pipeline:\n  - range: 10\n  - map: {fn: square\n",
                 "test.yaml:4:1: invalid YAML: end of map flow not found");
  CheckLoadError("pipeline:\n  - range: [1, 2\n",
                 "test.yaml:3:1: invalid YAML: end of sequence flow not found");
  // "key: value: more" is an illegal map value at the second ':'.
  CheckLoadError("pipeline:\n  - range: 10: 3\n", "test.yaml:2:14: invalid YAML: illegal map value");
}

TEST_CASE("yaml: ragged from_tensor_slices", "[yaml]") {
  // The second row starts at column 34.
  CheckLoadError("pipeline:\n  - from_tensor_slices: [[1, 2], [3]]\n",
                 "test.yaml:2:34: from_tensor_slices: nested lists are ragged");
  CheckLoadError("pipeline:\n  - from_tensor_slices: [[1, 2], 3]\n",
                 "test.yaml:2:34: from_tensor_slices: nested lists are ragged");
  CheckLoadError("pipeline:\n  - from_tensor_slices: {x: [1, 2], y: [[3], 4]}\n",
                 "test.yaml:2:46: from_tensor_slices: component 'y': nested lists are ragged");
  CheckLoadError("pipeline:\n  - from_tensor_slices: [1, abc]\n",
                 "test.yaml:2:29: from_tensor_slices: mixes value kinds ('abc' does not match the others)");
}

TEST_CASE("yaml: build-time value errors carry the step's position", "[yaml]") {
  const std::string text = "pipeline:\n  - range: 10\n  - batch: {batch_size: 0}\n";
  const absl::Status status = LoadError(text);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith("test.yaml:3:5: step 2 (batch): "));
  CHECK_THAT(std::string(status.message()), EndsWith("batch_size must be > 0, got 0"));

  CheckLoadError("pipeline:\n  - batch: 4\n  - range: 10\n",
                 "test.yaml:2:5: step 1 (batch): the first step must be a source");
  CheckLoadError("pipeline:\n  - range: 10\n  - range: 10\n",
                 "test.yaml:3:5: step 2 (range): a source can only be the first step");

  const absl::Status shuffle = LoadError("pipeline:\n  - range: 10\n  - take: 3\n  - shuffle: 0\n");
  CHECK(shuffle.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(shuffle.message()), StartsWith("test.yaml:4:5: step 3 (shuffle): "));
  CHECK_THAT(std::string(shuffle.message()), EndsWith("buffer_size must be > 0, got 0"));

  const absl::Status spec =
      LoadError("pipeline:\n  - from_tensor_slices: [a, b]\n  - map: {fn: add, value: 1}\n");
  CHECK(spec.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(spec.message()), StartsWith("test.yaml:3:5: step 2 (map): "));
  CHECK_THAT(std::string(spec.message()), EndsWith("add: needs a numeric component, got string"));
}

// builder.h documents "step 3 (batch): batch_size must be > 0, got 0": the
// op name once, in the parentheses. The op's own message repeats it
// ("step 2 (batch): batch_size ...").
TEST_CASE("yaml: build-time errors name the op once", "[yaml]") {
  CheckLoadError("pipeline:\n  - range: 10\n  - batch: {batch_size: 0}\n",
                 "test.yaml:3:5: step 2 (batch): batch_size must be > 0, got 0");
}

// ParseFunctionOp resets a node to args["fn"], and yaml-cpp's
// Node::reset throws InvalidNode for a missing key, so the loader's own
// message never shows; the exception's mark is unset, hence "0:0".
TEST_CASE("yaml: map without fn names the step", "[yaml]") {
  CheckLoadError("pipeline:\n  - range: 10\n  - map: {value: 3}\n",
                 "test.yaml:3:10: map: missing 'fn', the element function to apply");
}

// Loader::Load checks `!steps.IsDefined()`, but a default-constructed
// YAML::Node is a defined Null node, so a file without `pipeline` falls
// through to ParseSteps, whose error has no position.
TEST_CASE("yaml: a file without 'pipeline' says so", "[yaml]") {
  CheckLoadError("plugins: []\n", "test.yaml:1:1: missing 'pipeline': the list of steps");
}

TEST_CASE("yaml: validate: false leaves value checks to the build", "[yaml]") {
  YamlLoadOptions options;
  options.validate = false;
  absl::StatusOr<LoadedPipeline> loaded =
      ParsePipelineYaml("pipeline:\n  - range: 10\n  - batch: {batch_size: 0}\n", "test.yaml", ".", options);
  REQUIRE(loaded.ok());
  BuildOptions build;
  build.step_locations = &loaded->step_locations;
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(loaded->def, build);
  REQUIRE_FALSE(dataset.ok());
  CHECK(dataset.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(dataset.status().message()), StartsWith("test.yaml:3:5: step 2 (batch): "));
}

// ---------------------------------------------------------------------------
// Accepted forms.

TEST_CASE("yaml: shorthand forms", "[yaml]") {
  const std::string text =
      "pipeline:\n"
      "  - range: 10\n"
      "  - take: 3\n"
      "  - repeat: 2\n"
      "  - shuffle: 8\n"
      "  - batch: 4\n"
      "  - unbatch\n";
  const LoadedPipeline loaded = Load(text);
  REQUIRE(loaded.def.steps_size() == 6);
  CHECK(loaded.def.steps(0).range().stop() == 10);
  CHECK(loaded.def.steps(0).range().step() == 1);
  CHECK(loaded.def.steps(1).take().count() == 3);
  CHECK(loaded.def.steps(2).repeat().count() == 2);
  CHECK(loaded.def.steps(3).shuffle().buffer_size() == 8);
  CHECK_FALSE(loaded.def.steps(3).shuffle().has_seed());
  CHECK(loaded.def.steps(4).batch().batch_size() == 4);
  CHECK(loaded.def.steps(5).has_unbatch());
  CHECK(DatasetFingerprint(loaded.def) ==
        Dataset::Range(10).Take(3).Repeat(2).Shuffle(8).Batch(4).Unbatch().Fingerprint());

  Lines lines = Run(text);
  std::sort(lines.begin(), lines.end());
  CHECK(lines == Lines{"0", "0", "1", "1", "2", "2"});

  // Without the shuffle the order is fixed.
  CHECK(Run("pipeline:\n  - range: 10\n  - take: 3\n  - repeat: 2\n  - batch: 4\n") ==
        Lines{"[0, 1, 2, 0]", "[1, 2]"});
  CHECK(Run("pipeline:\n  - range: 10\n  - take: 3\n  - repeat: 2\n  - batch: 4\n  - unbatch\n") ==
        Lines{"0", "1", "2", "0", "1", "2"});
  CHECK(Run("pipeline:\n  - range: 10\n  - skip: 7\n") == Lines{"7", "8", "9"});
  CHECK(Run("- range: 3\n- map: square\n") == Lines{"0", "1", "4"});
  CHECK(Run("pipeline:\n  - range: {start: 10, stop: 0, step: -4}\n") == Lines{"10", "6", "2"});
}

TEST_CASE("yaml: typed literals", "[yaml]") {
  absl::StatusOr<DatasetPtr> dataset =
      testing::DatasetFromYaml("pipeline:\n  - from_tensor_slices: {values: [1, 2], dtype: int32}\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().DebugString() == "TensorSpec(shape=[], dtype=int32)");
  CHECK(*testing::JsonLines(**dataset) == Lines{"1", "2"});

  CHECK(Run("pipeline:\n  - from_tensors: {values: [[1, 2], [3, 4]], dtype: float64}\n") ==
        Lines{"[[1, 2], [3, 4]]"});
  CHECK(Run("pipeline:\n  - from_tensor_slices: {values: [0.1, 2], dtype: float64}\n") == Lines{"0.1", "2"});
  CHECK(Run("pipeline:\n  - from_tensor_slices: {values: [9223372036854775807, -1], dtype: int64}\n") ==
        Lines{"9223372036854775807", "-1"});
  CHECK(Run("pipeline:\n  - from_tensor_slices: {values: [1.5, -2.5], dtype: int64}\n") == Lines{"1", "-2"});

  dataset = testing::DatasetFromYaml("pipeline:\n  - from_tensors: {values: 7, dtype: uint8}\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().DebugString() == "TensorSpec(shape=[], dtype=uint8)");

  CheckLoadError("pipeline:\n  - from_tensor_slices: {values: [a, b], dtype: int32}\n",
                 "test.yaml:2:34: from_tensor_slices: int32 tensors need numeric values");
  CheckLoadError("pipeline:\n  - from_tensor_slices: {values: [1, 2], dtype: string}\n",
                 "test.yaml:2:34: from_tensor_slices: string tensors need string values");
}

TEST_CASE("yaml: inferred literal dtypes", "[yaml]") {
  absl::StatusOr<DatasetPtr> dataset =
      testing::DatasetFromYaml("pipeline:\n  - from_tensor_slices: [1, 2.5]\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().DebugString() == "TensorSpec(shape=[], dtype=float32)");
  CHECK(*testing::JsonLines(**dataset) == Lines{"1", "2.5"});

  dataset = testing::DatasetFromYaml("pipeline:\n  - from_tensor_slices: [[1, 2], [3, 4]]\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().DebugString() == "TensorSpec(shape=[2], dtype=int64)");
  CHECK(*testing::JsonLines(**dataset) == Lines{"[1, 2]", "[3, 4]"});

  CHECK(Run("pipeline:\n  - from_tensor_slices: [true, false]\n") == Lines{"true", "false"});
  CHECK(Run("pipeline:\n  - from_tensor_slices: [cat, dog]\n") == Lines{"\"cat\"", "\"dog\""});
  CHECK(Run("pipeline:\n  - from_tensors: 5\n") == Lines{"5"});
}

TEST_CASE("yaml: quoted strings stay strings", "[yaml]") {
  absl::StatusOr<DatasetPtr> dataset =
      testing::DatasetFromYaml("pipeline:\n  - from_tensor_slices: [\"1\", '2', \"true\", x]\n");
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().DebugString() == "TensorSpec(shape=[], dtype=string)");
  CHECK(*testing::JsonLines(**dataset) == Lines{"\"1\"", "\"2\"", "\"true\"", "\"x\""});

  // Also as function arguments: "3" compares with strings, not numbers.
  CHECK(Run("pipeline:\n  - from_tensor_slices: [\"10\", \"3\", \"30\"]\n  - filter: {fn: equal, value: "
            "\"3\"}\n") == Lines{"\"3\""});
  const absl::Status status = LoadError("pipeline:\n  - range: 5\n  - filter: {fn: equal, value: \"3\"}\n");
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(status.message()), StartsWith("test.yaml:3:5: step 2 (filter): "));
  CHECK_THAT(std::string(status.message()),
             EndsWith("equal: cannot compare a int64 component with a string"));
}

TEST_CASE("yaml: named from_tensor_slices", "[yaml]") {
  const std::string text = "pipeline:\n  - from_tensor_slices: {x: [1, 2], y: [3, 4]}\n";
  CHECK(Run(text) == Lines{"{\"x\": 1, \"y\": 3}", "{\"x\": 2, \"y\": 4}"});
  const LoadedPipeline loaded = Load(text);
  REQUIRE(loaded.def.steps(0).from_tensor_slices().names_size() == 2);
  CHECK(loaded.def.steps(0).from_tensor_slices().names(0) == "x");
  CHECK(loaded.def.steps(0).from_tensor_slices().names(1) == "y");
  // Names follow the YAML order, not alphabetical order.
  CHECK(Run("pipeline:\n  - from_tensor_slices: {b: [1], a: [\"s\"]}\n") ==
        Lines{"{\"b\": 1, \"a\": \"s\"}"});
  // Typed literals inside named ones.
  CHECK(Run("pipeline:\n  - from_tensor_slices: {x: {values: [1, 2], dtype: float32}, y: [3, 4]}\n"
            "  - map: {fn: multiply, value: 0.5, component: x}\n") ==
        Lines{"{\"x\": 0.5, \"y\": 3}", "{\"x\": 1, \"y\": 4}"});
  const absl::Status rows = LoadError("pipeline:\n  - from_tensor_slices: {x: [1, 2], y: [3]}\n");
  CHECK(rows.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(rows.message()), StartsWith("test.yaml:2:5: step 1 (from_tensor_slices): "));
  CHECK_THAT(std::string(rows.message()), EndsWith("components have different first dimensions, 2 and 1"));
  const absl::Status scalar = LoadError("pipeline:\n  - from_tensor_slices: 5\n");
  CHECK(scalar.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(scalar.message()), StartsWith("test.yaml:2:5: step 1 (from_tensor_slices): "));
  CHECK_THAT(std::string(scalar.message()),
             EndsWith("component 0 is a scalar; it needs a dimension to slice"));
}

TEST_CASE("yaml: tuple form", "[yaml]") {
  CHECK(Run("pipeline:\n  - from_tensor_slices: {tuple: [[1, 2], [a, b]]}\n") ==
        Lines{"[1, \"a\"]", "[2, \"b\"]"});
  CHECK(Run("pipeline:\n  - from_tensors: {tuple: [1, [2, 3]]}\n") == Lines{"[1, [2, 3]]"});
  CheckLoadError("pipeline:\n  - from_tensors: {tuple: 5}\n",
                 "test.yaml:2:27: from_tensors: 'tuple' must be a list of tensors");
}

TEST_CASE("yaml: zip with sub-pipelines", "[yaml]") {
  const std::string text =
      "pipeline:\n  - zip: {datasets: [[{range: 3}], [{range: 5}, {map: {fn: square}}]]}\n";
  CHECK(Run(text) == Lines{"[0, 0]", "[1, 1]", "[2, 4]"});
  const LoadedPipeline loaded = Load(text);
  REQUIRE(loaded.def.steps(0).zip().datasets_size() == 2);
  CHECK(loaded.def.steps(0).zip().datasets(0).steps_size() == 1);
  CHECK(loaded.def.steps(0).zip().datasets(1).steps_size() == 2);
  CHECK(DatasetFingerprint(loaded.def) ==
        Dataset::Zip({Dataset::Range(3), Dataset::Range(5).Map("square")}).Fingerprint());
  // Shorthand, and sub-pipelines as {pipeline: [...]} maps.
  CHECK(Run("pipeline:\n  - zip: [[{range: 2}], {pipeline: [{range: 4}, {skip: 2}]}]\n") ==
        Lines{"[0, 2]", "[1, 3]"});
  CHECK(Run("pipeline:\n  - zip: [[{from_tensor_slices: {a: [1, 2]}}], [{from_tensor_slices: {b: [3, "
            "4]}}]]\n") == Lines{"{\"a\": 1, \"b\": 3}", "{\"a\": 2, \"b\": 4}"});
}

TEST_CASE("yaml: interleave sub-pipeline definition", "[yaml]") {
  const std::string text =
      "pipeline:\n"
      "  - from_tensor_slices: [a.txt, b.txt]\n"
      "  - interleave: {pipeline: [text_line, {map: {fn: equal, value: b2}}], cycle_length: 2, block_length: "
      "3}\n";
  const LoadedPipeline loaded = Load(text);
  REQUIRE(loaded.def.steps_size() == 2);
  const proto::InterleaveOp& op = loaded.def.steps(1).interleave();
  CHECK(op.cycle_length() == 2);
  CHECK(op.block_length() == 3);
  CHECK(op.deterministic());
  REQUIRE(op.pipeline().steps_size() == 2);
  CHECK(op.pipeline().steps(0).has_text_line());
  CHECK(op.pipeline().steps(0).text_line().files_size() == 0);
  CHECK(op.pipeline().steps(1).map().fn().name() == "equal");
  CHECK(op.pipeline().steps(1).map().fn().args().at("value").s() == "b2");
  // The sub-pipeline's spec is the interleave's.
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(loaded.def);
  REQUIRE(dataset.ok());
  CHECK((*dataset)->element_spec().DebugString() == "TensorSpec(shape=[], dtype=bool)");

  // Defaults, and the shorthand: the sub-pipeline alone.
  const LoadedPipeline shorthand =
      Load("pipeline:\n  - from_tensor_slices: [a.txt, b.txt]\n  - interleave: [text_line]\n");
  CHECK(shorthand.def.steps(1).interleave().cycle_length() == 4);
  CHECK(shorthand.def.steps(1).interleave().block_length() == 1);
  CHECK(DatasetFingerprint(shorthand.def) ==
        Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a.txt", "b.txt"})})
            .Interleave(Dataset::TextLine({}))
            .Fingerprint());

  // Errors inside the sub-pipeline carry their own positions.
  CheckLoadError("pipeline:\n  - range: 3\n  - interleave: {pipeline: [{rnage: 2}]}\n",
                 "test.yaml:3:30: unknown op 'rnage'; did you mean 'range'?");
  const absl::Status no_files = LoadError("pipeline:\n  - range: 3\n  - interleave: [text_line]\n");
  CHECK(no_files.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(no_files.message()), StartsWith("test.yaml:3:5: step 2 (interleave): "));
  CHECK_THAT(std::string(no_files.message()),
             EndsWith("the interleaved element has no string component to read files from"));
}

// Interleave builds each sub-pipeline in InterleaveDataset's OpenNext
// (pipeline/parallel_ops.cc) and keeps only the iterator: the DatasetPtr
// `sub` is freed on return while the iterator still points at it, so
// reading the sub-pipeline is a use after free (crashes, bad_alloc or
// "cannot open ''").
TEST_CASE("yaml: interleave sub-pipeline", "[yaml]") {
  testing::TempDir dir;
  WriteFile(dir.File("a.txt"), "a1\na2\n");
  WriteFile(dir.File("b.txt"), "b1\nb2\n");
  const std::string files = absl::StrCat("[", dir.File("a.txt"), ", ", dir.File("b.txt"), "]");
  CHECK(Run(absl::StrCat("pipeline:\n  - from_tensor_slices: ", files,
                         "\n  - interleave: {pipeline: [text_line], cycle_length: 2}\n")) ==
        Lines{"\"a1\"", "\"b1\"", "\"a2\"", "\"b2\""});
  CHECK(Run(absl::StrCat(
            "pipeline:\n  - from_tensor_slices: ", files,
            "\n  - interleave: {pipeline: [text_line, {map: {fn: equal, value: b2}}], cycle_length: 2, "
            "block_length: 2}\n")) == Lines{"false", "false", "false", "true"});
  CHECK(Run(absl::StrCat("pipeline:\n  - from_tensor_slices: ", files,
                         "\n  - interleave: {pipeline: [text_line], cycle_length: 1}\n")) ==
        Lines{"\"a1\"", "\"a2\"", "\"b1\"", "\"b2\""});
  // Shorthand: the sub-pipeline alone.
  CHECK(Run(absl::StrCat("pipeline:\n  - from_tensor_slices: ", files, "\n  - interleave: [text_line]\n")) ==
        Lines{"\"a1\"", "\"b1\"", "\"a2\"", "\"b2\""});
  // A sub-pipeline that ignores its input.
  CHECK(Run("pipeline:\n  - range: 3\n  - interleave: {pipeline: [{range: 2}], cycle_length: 2}\n") ==
        Lines{"0", "0", "1", "1", "0", "1"});
}

TEST_CASE("yaml: map and filter forms", "[yaml]") {
  CHECK(Run("pipeline:\n  - range: 6\n  - filter: {fn: greater, value: 3}\n") == Lines{"4", "5"});
  CHECK(Run("pipeline:\n  - range: 4\n  - map: negate\n") == Lines{"0", "-1", "-2", "-3"});
  const std::string parallel =
      "pipeline:\n  - range: 6\n  - map: {fn: add, value: 10, num_parallel_calls: 2}\n";
  CHECK(Run(parallel) == Lines{"10", "11", "12", "13", "14", "15"});
  const LoadedPipeline loaded = Load(parallel);
  CHECK(loaded.def.steps(1).map().num_parallel_calls() == 2);
  CHECK(loaded.def.steps(1).map().deterministic());
  REQUIRE(loaded.def.steps(1).map().fn().args().size() == 1);
  CHECK(loaded.def.steps(1).map().fn().args().at("value").i() == 10);
  CHECK(DatasetFingerprint(loaded.def) ==
        Dataset::Range(6).Map("add", {{"value", 10}}, MapOptions{2, true}).Fingerprint());
}

TEST_CASE("yaml: LoadPipelineFile", "[yaml]") {
  testing::TempDir dir;
  const std::string missing = dir.File("missing.yaml");
  absl::StatusOr<LoadedPipeline> loaded = LoadPipelineFile(missing);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(loaded.status().message()), Equals("cannot read pipeline file '" + missing + "'"));

  const std::string good = dir.File("good.yaml");
  WriteFile(good, kIssueExample);
  loaded = LoadPipelineFile(good);
  REQUIRE(loaded.ok());
  CHECK(DatasetFingerprint(loaded->def) == Dataset::Range(10).Map("square").Batch(4).Fingerprint());
  CHECK(loaded->step_locations == std::vector<std::string>{good + ":2:5", good + ":3:5", good + ":4:5"});

  // Messages name the file.
  const std::string bad = dir.File("bad.yaml");
  WriteFile(bad, "pipeline:\n  - range: 10\n  - bach: 4\n");
  loaded = LoadPipelineFile(bad);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(loaded.status().message()),
             Equals(bad + ":3:5: unknown op 'bach'; did you mean 'batch'?"));
}

// The loader parses uint64 literals "at full width", but a value past
// INT64_MAX fails SimpleAtoi into int64, is taken for a float and goes
// through double: 2^63 + 1 becomes 2^63, and 2^64 - 1 is out of range.
TEST_CASE("yaml: uint64 literals past INT64_MAX keep every digit", "[yaml]") {
  CHECK(Run("pipeline:\n  - from_tensor_slices: {values: [9223372036854775809, 18446744073709551615], "
            "dtype: uint64}\n") == Lines{"9223372036854775809", "18446744073709551615"});
}

TEST_CASE("yaml: an empty document", "[yaml]") {
  CheckLoadError("", "test.yaml: expected a map with a 'pipeline' list");
}

TEST_CASE("yaml: a pipeline nested past the parser's limit says so, not 'bad file'", "[yaml][hardening]") {
  std::string zips = "{range: 2}";
  for (int i = 0; i < 300; ++i) zips = "{zip: [[" + zips + "], [{range: 2}]]}";
  const absl::Status status = LoadError("pipeline:\n  - " + zips + "\n");
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message() ==
        "test.yaml:3:1: the YAML nests 500 levels deep, its parser's limit: nest fewer pipelines");
  // 60 levels of zip, the issue's, read locally.
  zips = "{range: 2}";
  for (int i = 0; i < 60; ++i) zips = "{zip: [[" + zips + "], [{range: 2}]]}";
  absl::StatusOr<std::vector<std::string>> lines = testing::RunYaml("pipeline:\n  - " + zips + "\n");
  REQUIRE(lines.ok());
  CHECK(lines->size() == 2);
}

}  // namespace
}  // namespace sluice
