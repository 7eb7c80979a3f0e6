// Tests of the `parse_example` element function (parse_example.cc).
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/record_io.h"
#include "sluice/proto/example.pb.h"
#include "tests/testing/function_test_util.h"

// In sluice::testing, beside the helpers of function_test_util.h.
namespace sluice::testing {
namespace {

using Catch::Matchers::Equals;

std::string Serialize(const proto::example::Example& example) {
  std::string bytes;
  REQUIRE(example.SerializeToString(&bytes));
  return bytes;
}

proto::example::Example SampleExample() {
  proto::example::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  features["label"].mutable_int64_list()->add_value(7);
  features["pair"].mutable_int64_list()->add_value(3);
  features["pair"].mutable_int64_list()->add_value(-4);
  features["scores"].mutable_float_list()->add_value(0.5f);
  features["scores"].mutable_float_list()->add_value(1.25f);
  features["scores"].mutable_float_list()->add_value(-2.0f);
  features["name"].mutable_bytes_list()->add_value("cat");
  return example;
}

FunctionArg Shape1(int64_t d) { return FunctionArg(std::vector<FunctionArg>{FunctionArg(d)}); }

FunctionArgMap FeatureArgs(FunctionArgMap features) {
  return {{"features", FunctionArg(std::move(features))}};
}

FunctionArg WithDefault(const std::string& dtype, FunctionArg shape, FunctionArg value) {
  return FunctionArg(
      FunctionArgMap{{"dtype", dtype}, {"shape", std::move(shape)}, {"default", std::move(value)}});
}

// A scalar feature (no shape) with a default.
FunctionArg ScalarWithDefault(const std::string& dtype, FunctionArg value) {
  return FunctionArg(FunctionArgMap{{"dtype", dtype}, {"default", std::move(value)}});
}

TEST_CASE("functions: parse_example reads int64, float32 and string features", "[functions]") {
  const FunctionArgMap args = FeatureArgs({
      {"label", FunctionArg(FunctionArgMap{{"dtype", "int64"}})},
      {"pair", FunctionArg(FunctionArgMap{{"dtype", "int64"}, {"shape", Shape1(2)}})},
      {"scores", FunctionArg(FunctionArgMap{{"dtype", "float32"}, {"shape", Shape1(-1)}})},
      {"name", FunctionArg(FunctionArgMap{{"dtype", "string"}})},
  });
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("parse_example", args);
  REQUIRE(fn.ok());
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(Str("")));
  REQUIRE(spec.ok());
  // Components are ordered by feature name.
  CHECK(spec->DebugString() ==
        "{label: TensorSpec(shape=[], dtype=int64), name: TensorSpec(shape=[], dtype=string), "
        "pair: TensorSpec(shape=[2], dtype=int64), scores: TensorSpec(shape=[?], dtype=float32)}");
  CHECK(ApplyOk("parse_example", args, Str(Serialize(SampleExample()))) ==
        "{\"label\": 7, \"name\": \"cat\", \"pair\": [3, -4], \"scores\": [0.5, 1.25, -2]}");

  // Variable length gives each element its own count.
  proto::example::Example shorter = SampleExample();
  (*shorter.mutable_features()->mutable_feature())["scores"].mutable_float_list()->clear_value();
  (*shorter.mutable_features()->mutable_feature())["scores"].mutable_float_list()->add_value(9.0f);
  CHECK(ApplyOk("parse_example", args, Str(Serialize(shorter))) ==
        "{\"label\": 7, \"name\": \"cat\", \"pair\": [3, -4], \"scores\": [9]}");
}

TEST_CASE("functions: parse_example with a 2-D fixed shape", "[functions]") {
  proto::example::Example example;
  auto* values = (*example.mutable_features()->mutable_feature())["m"].mutable_int64_list();
  for (int64_t v : {1, 2, 3, 4, 5, 6}) values->add_value(v);
  const FunctionArgMap args =
      FeatureArgs({{"m", FunctionArg(FunctionArgMap{
                             {"dtype", "int64"}, {"shape", FunctionArg(std::vector<FunctionArg>{2, 3})}})}});
  CHECK(ApplyOk("parse_example", args, Str(Serialize(example))) == "{\"m\": [[1, 2, 3], [4, 5, 6]]}");
}

TEST_CASE("functions: parse_example defaults for missing features", "[functions]") {
  const FunctionArgMap args = FeatureArgs({
      {"label", FunctionArg(FunctionArgMap{{"dtype", "int64"}})},
      {"weight", ScalarWithDefault("float32", 1)},
      {"mask", WithDefault("int64", Shape1(2), -1)},
      {"tag", ScalarWithDefault("string", "none")},
      {"ratio", WithDefault("float32", Shape1(1), 0.5)},
  });
  CHECK(ApplyOk("parse_example", args, Str(Serialize(SampleExample()))) ==
        "{\"label\": 7, \"mask\": [-1, -1], \"ratio\": [0.5], \"tag\": \"none\", \"weight\": 1}");

  // A present feature wins over its default.
  proto::example::Example example = SampleExample();
  (*example.mutable_features()->mutable_feature())["tag"].mutable_bytes_list()->add_value("dog");
  CHECK(ApplyOk("parse_example", args, Str(Serialize(example))) ==
        "{\"label\": 7, \"mask\": [-1, -1], \"ratio\": [0.5], \"tag\": \"dog\", \"weight\": 1}");
}

TEST_CASE("functions: parse_example errors on the data", "[functions]") {
  const FunctionArgMap args = FeatureArgs({{"missing", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}});
  absl::StatusOr<std::string> result = Apply("parse_example", args, Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'missing' is missing and has no default"));

  result = Apply(
      "parse_example",
      FeatureArgs({{"scores", FunctionArg(FunctionArgMap{{"dtype", "float32"}, {"shape", Shape1(2)}})}}),
      Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'scores' has 3 values but shape [2] needs 2"));

  result = Apply("parse_example", FeatureArgs({{"pair", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}}),
                 Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'pair' has 2 values but shape [] needs 1"));

  result = Apply("parse_example", FeatureArgs({{"label", FunctionArg(FunctionArgMap{{"dtype", "float32"}})}}),
                 Str(Serialize(SampleExample())));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: feature 'label' is not stored as float32"));

  // Bytes that are not a serialized Example (a truncated length-delimited
  // field) are data loss.
  result = Apply("parse_example", FeatureArgs({{"label", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}}),
                 Str(std::string("\x0a\x05"
                                 "ab",
                                 4)));
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(result.status().message()),
             Equals("parse_example: the record is not a valid tf.train.Example"));
}

TEST_CASE("functions: parse_example argument errors", "[functions]") {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = Make("parse_example");
  REQUIRE_FALSE(fn.ok());
  CHECK(fn.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: argument 'features' must map feature names to {dtype, shape}"));

  fn = Make("parse_example", FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "int32"}})}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x' must be int64, float32 or string, as in tf.train.Example"));

  fn = Make("parse_example",
            FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "int64"}, {"shap", Shape1(2)}})}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x' has unknown key 'shap' (valid: dtype, shape, default)"));

  fn = Make("parse_example", FeatureArgs({{"x", WithDefault("int64", Shape1(-1), 0)}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x': a default needs a fully known shape"));

  fn = Make("parse_example", FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "flaot32"}})}}));
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()),
             Equals("parse_example: feature 'x': unknown dtype 'flaot32'; did you mean 'float32'?"));

  fn = Make("parse_example", FeatureArgs({{"x", FunctionArg(FunctionArgMap{{"dtype", "int64"}})}}));
  REQUIRE(fn.ok());
  absl::StatusOr<ElementSpec> spec = (*fn)->OutputSpec(ElementSpec::Of(Vec<int64_t>({1})));
  REQUIRE_FALSE(spec.ok());
  CHECK_THAT(std::string(spec.status().message()),
             Equals("parse_example: needs elements of one scalar string (a serialized Example), got "
                    "TensorSpec(shape=[1], dtype=int64)"));
}

TEST_CASE("functions: parse_example over a TFRecord file in a YAML pipeline", "[functions]") {
  testing::TempDir dir;
  const std::string path = dir.File("examples.tfrecord");
  {
    absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer = TFRecordWriter::Create(path);
    REQUIRE(writer.ok());
    for (int64_t i = 0; i < 3; ++i) {
      proto::example::Example example;
      auto& features = *example.mutable_features()->mutable_feature();
      features["id"].mutable_int64_list()->add_value(i);
      for (int64_t k = 0; k < i; ++k)
        features["tokens"].mutable_bytes_list()->add_value(absl::StrCat("t", k));
      if (i == 0) features["tokens"].mutable_bytes_list();
      REQUIRE((*writer)->Write(Serialize(example)).ok());
    }
    REQUIRE((*writer)->Close().ok());
  }
  absl::StatusOr<std::vector<std::string>> lines =
      testing::RunYaml(absl::StrCat("pipeline:\n"
                                    "  - tfrecord: ",
                                    path,
                                    "\n"
                                    "  - map: {fn: parse_example, features: {id: {dtype: int64}, tokens: "
                                    "{dtype: string, shape: [-1]}}}\n"));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"{\"id\": 0, \"tokens\": []}", "{\"id\": 1, \"tokens\": [\"t0\"]}",
                                           "{\"id\": 2, \"tokens\": [\"t0\", \"t1\"]}"});
}

// An empty list argument is lost on the way into AttrValue: the YAML
// loader's ToAttr (pipeline/yaml_loader.cc) and FunctionArg's list
// constructor (client/dataset.cc) only call mutable_list() inside the loop
// over the items, so `[]` becomes an unset value. tf's usual scalar feature,
// shape [], then fails with "shape must be a list of sizes".
TEST_CASE("functions: parse_example accepts shape [] for a scalar feature (YAML)", "[functions]") {
  proto::example::Example example;
  (*example.mutable_features()->mutable_feature())["id"].mutable_int64_list()->add_value(5);
  testing::TempDir dir;
  const std::string path = dir.File("one.tfrecord");
  {
    absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer = TFRecordWriter::Create(path);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->Write(Serialize(example)).ok());
  }
  absl::StatusOr<std::vector<std::string>> lines = testing::RunYaml(absl::StrCat(
      "pipeline:\n"
      "  - tfrecord: ",
      path,
      "\n"
      "  - map: {fn: parse_example, features: {id: {dtype: int64, shape: []}, w: {dtype: float32, shape: [], "
      "default: 1}}}\n"));
  if (!lines.ok()) FAIL(lines.status().message());
  CHECK(*lines == std::vector<std::string>{"{\"id\": 5, \"w\": 1}"});
}

TEST_CASE("functions: an empty FunctionArg list is a list", "[functions]") {
  CHECK(internal::DatasetAccess::Proto(FunctionArg(std::vector<FunctionArg>{})).value_case() ==
        proto::AttrValue::kList);
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn =
      Make("select", {{"components", std::vector<FunctionArg>{}}});
  REQUIRE_FALSE(fn.ok());
  CHECK_THAT(std::string(fn.status().message()), Equals("select: 'components' is empty"));
  CHECK(ApplyOk("parse_example",
                FeatureArgs({{"label",
                              FunctionArg(FunctionArgMap{
                                  {"dtype", "int64"}, {"shape", FunctionArg(std::vector<FunctionArg>{})}})}}),
                Str(Serialize(SampleExample()))) == "{\"label\": 7}");
}

}  // namespace
}  // namespace sluice::testing
