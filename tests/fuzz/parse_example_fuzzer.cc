// parse_example (pipeline/functions/parse_example.cc) on any bytes: the
// features of a tf.train.Example, or an error naming the feature, never a
// crash. One function with fixed, variable-length and defaulted features
// of each kind, applied to the bytes as a scalar and as a batch of two.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "pipeline/function.h"
#include "pipeline/yaml_loader.h"
#include "sluice/proto/example.pb.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice {
namespace {

constexpr char kPipeline[] = R"(pipeline:
  - range: 1
  - map:
      fn: parse_example
      features:
        label: {dtype: int64}
        pair: {dtype: int64, shape: [2]}
        scores: {dtype: float32, shape: [-1]}
        name: {dtype: string, default: "none"}
        grid: {dtype: float32, shape: [2, 2], default: 0.5}
        tokens: {dtype: string, shape: [-1]}
)";

std::unique_ptr<ElementFunction> MakeFunction() {
  YamlLoadOptions options;
  options.validate = false;
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(kPipeline, "parse_example_fuzzer", ".", options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    std::abort();
  }
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn =
      FunctionRegistry::Global().Create(loaded->def.steps(1).map().fn());
  if (!fn.ok()) {
    std::fprintf(stderr, "%s\n", std::string(fn.status().message()).c_str());
    std::abort();
  }
  return *std::move(fn);
}

void WriteSeeds(const std::string& dir) {
  proto::example::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  features["label"].mutable_int64_list()->add_value(7);
  features["pair"].mutable_int64_list()->add_value(3);
  features["pair"].mutable_int64_list()->add_value(-4);
  features["scores"].mutable_float_list()->add_value(0.5f);
  features["scores"].mutable_float_list()->add_value(-2.0f);
  features["tokens"].mutable_bytes_list()->add_value("cat");
  fuzz::WriteSeed(dir, "partial", example.SerializeAsString());
  features["name"].mutable_bytes_list()->add_value("dog");
  for (int i = 0; i < 4; ++i) features["grid"].mutable_float_list()->add_value(static_cast<float>(i));
  fuzz::WriteSeed(dir, "full", example.SerializeAsString());
  features["pair"].mutable_int64_list()->add_value(5);
  fuzz::WriteSeed(dir, "wrong-length", example.SerializeAsString());
  features["label"].mutable_float_list()->add_value(1.0f);
  fuzz::WriteSeed(dir, "wrong-kind", example.SerializeAsString());
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return sluice::fuzz::WriteSeedsIfAsked(sluice::WriteSeeds);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<sluice::ElementFunction> fn = sluice::MakeFunction();
  const std::string bytes = sluice::fuzz::Bytes(data, size);
  (void)fn->Call(sluice::Element::Of(sluice::Tensor::StringScalar(bytes)));
  (void)fn->Call(sluice::Element::Of(sluice::Tensor::FromVector<std::string>({bytes, bytes})));
  return 0;
}
