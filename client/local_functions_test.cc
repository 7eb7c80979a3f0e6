#include "client/local_functions.h"

#include <catch2/catch.hpp>

#include "client/read/definition_checks.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

absl::StatusOr<Element> TimesTen(const Element& element) {
  return Element::Of(Tensor::Scalar<int64_t>(element.components[0].data<int64_t>()[0] * 10));
}

TEST_CASE("MapLocal and FilterLocal run a callable of this process in a local pipeline", "[client]") {
  Dataset ds = Dataset::Range(6)
                   .FilterLocal([](const Element& e) -> absl::StatusOr<bool> {
                     return e.components[0].data<int64_t>()[0] % 2 == 1;
                   })
                   .MapLocal(TimesTen)
                   .Map("add", {{"value", 1}});
  // Without a declared output_spec the spec is unknown (no components);
  // the elements are what the callable returns.
  absl::StatusOr<std::vector<Element>> undeclared = ds.Collect();
  REQUIRE(undeclared.ok());
  CHECK(testing::Int64Values(*undeclared) == std::vector<int64_t>{11, 31, 51});
  CHECK(ds.Spec()->components.empty());

  ElementSpec scalar_int64{.components = {TensorSpec{PartialShape{}, DType::kInt64}}};
  absl::StatusOr<std::vector<Element>> out = Dataset::Range(6)
                                                 .FilterLocal([](const Element& e) -> absl::StatusOr<bool> {
                                                   return e.components[0].data<int64_t>()[0] % 2 == 1;
                                                 })
                                                 .MapLocal(TimesTen, scalar_int64, {.num_parallel_calls = 3})
                                                 .Map("add", {{"value", 1}})
                                                 .Collect();
  REQUIRE(out.ok());
  CHECK(testing::Int64Values(*out) == std::vector<int64_t>{11, 31, 51});
  CHECK(Dataset::Range(3).MapLocal(TimesTen).Batch(2).Spec()->components.empty());
  CHECK(testing::Int64Values(*Dataset::Range(3).MapLocal(TimesTen).Collect()) ==
        std::vector<int64_t>{0, 10, 20});
}

TEST_CASE("A local function's error and a broken output_spec end the read with their message", "[client]") {
  absl::StatusOr<std::vector<Element>> failed =
      Dataset::Range(3)
          .MapLocal([](const Element&) -> absl::StatusOr<Element> { return absl::DataLossError("bad row"); })
          .Collect();
  CHECK(failed.status().code() == absl::StatusCode::kDataLoss);
  CHECK(failed.status().message() == "bad row");

  ElementSpec two_floats{.components = {TensorSpec{PartialShape{}, DType::kFloat32},
                                        TensorSpec{PartialShape{}, DType::kFloat32}}};
  absl::StatusOr<std::vector<Element>> broken = Dataset::Range(3).MapLocal(TimesTen, two_floats).Collect();
  CHECK(broken.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(broken.status().message()),
             Catch::EndsWith("returned TensorSpec(shape=[], dtype=int64), not its declared output_spec "
                             "(TensorSpec(shape=[], dtype=float32), TensorSpec(shape=[], dtype=float32))"));
}

absl::StatusOr<Element> SmallImage(const Element& element) {
  Tensor image(DType::kUInt8, {1, 2, 3});
  for (int i = 0; i < 6; ++i) image.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(i * 50);
  return Element({std::move(image), element.components[0]}, MakeNames({"image", "label"}));
}

TEST_CASE("A declared output_spec lets the steps after a function of unknown output find its components",
          "[client]") {
  const FunctionArgMap normalize{{"mean", FunctionArg(std::vector<FunctionArg>{0.0, 0.0, 0.0})},
                                 {"std", FunctionArg(std::vector<FunctionArg>{50.0, 50.0, 50.0})}};
  // Undeclared: normalize sees no components, and the error says what to do.
  absl::StatusOr<std::vector<Element>> undeclared =
      Dataset::Range(2).MapLocal(SmallImage).Map("normalize", normalize).Collect();
  REQUIRE(undeclared.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(
      undeclared.status().message() ==
      "step 3 (map): normalize: the element has 0 components and none named 'image'; say which with "
      "component: INDEX or component: NAME; the components of step 2's output (map a function of this "
      "process) are known only when it runs, so the steps after it see none: declare them with output_spec, "
      "for example output_spec: {image: \"float32[?,?,3]\", label: int64} (docs/pipeline.md, \"Python "
      "functions on the workers\")");
  // Declared (the advice followed): names in sorted order, values normalized.
  absl::StatusOr<ElementSpec> declared = ParseOutputSpec(
      FunctionArg(std::map<std::string, FunctionArg>{{"label", "int64"}, {"image", "uint8[?,?,3]"}}));
  REQUIRE(declared.ok());
  const Dataset images = Dataset::Range(2).MapLocal(SmallImage, *declared).Map("normalize", normalize);
  absl::StatusOr<std::vector<Element>> normalized = images.Collect();
  REQUIRE(normalized.ok());
  REQUIRE(normalized->size() == 2);
  CHECK(*(*normalized)[1].names == std::vector<std::string>{"image", "label"});
  const Tensor& image = (*normalized)[1].components[0];
  CHECK(image.dtype() == DType::kFloat32);
  // normalize scales uint8 to [0, 1] first: (i * 50 / 255 - 0) / 50.
  for (int i = 0; i < 6; ++i) CHECK(image.data<float>()[i] == Approx(i / 255.0));
  CHECK((*normalized)[1].components[1].data<int64_t>()[0] == 1);
  CHECK(images.Spec()->names == std::vector<std::string>{"image", "label"});
  // Any function declares its output with the argument; a broken
  // declaration is the function's error, and a bad one is refused.
  CHECK(Dataset::Range(2).Map("add", {{"value", 1}, {"output_spec", "int64"}}).Spec()->components ==
        std::vector<TensorSpec>{{PartialShape::Known({}), DType::kInt64}});
  absl::StatusOr<std::vector<Element>> wrong =
      Dataset::Range(2).Map("add", {{"value", 1}, {"output_spec", "float32"}}).Collect();
  CHECK(wrong.status().message() ==
        "add returned TensorSpec(shape=[], dtype=int64), not its declared output_spec TensorSpec(shape=[], "
        "dtype=float32)");
  CHECK_THAT(std::string(ParseOutputSpec(FunctionArg("int64[x]")).status().message()),
             Catch::StartsWith("output_spec: 'int64[x]' is not a type"));
}

TEST_CASE("A local function before ReadFromService is refused, naming the step", "[client]") {
  Dataset local_first = Dataset::Range(4).MapLocal(TimesTen).ReadFromService(
      {.service = "grpc://127.0.0.1:1", .processing_mode = ProcessingMode::kParallelEpochs});
  absl::Status check = local_first.CheckRunsOnService();
  CHECK(check.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(check.message()),
             Catch::StartsWith("step 2 runs a function of this process (local:"));
  CHECK_THAT(std::string(check.message()), Catch::Contains("move the step after `distribute`"));
  // Building fails the same way before anything is sent.
  absl::StatusOr<Iterator> iterator = local_first.MakeIterator();
  CHECK(iterator.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(iterator.status().message()),
             Catch::Contains("which the data service's workers cannot run"));
  // Inside a zip too.
  CHECK(!Dataset::Zip({Dataset::Range(2), Dataset::Range(2).MapLocal(TimesTen)}).CheckRunsOnService().ok());
  CHECK(Dataset::Range(4).Map("square").CheckRunsOnService().ok());
  CHECK_FALSE(local_first.ReadsNamedJob());
  CHECK(Dataset::Range(4)
            .ReadFromService({.service = "grpc://127.0.0.1:1",
                              .processing_mode = ProcessingMode::kDistributedEpoch,
                              .job_name = "shared"})
            .ReadsNamedJob());
  CHECK(reader::IsLocalFunctionName("local:3"));
  CHECK_FALSE(reader::IsLocalFunctionName("square"));
}

}  // namespace
}  // namespace sluice
