#include "cli/summary.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice::cli {
namespace {

TEST_CASE("cli: --summary prints big components as dtype, shape, first values and mean", "[cli]") {
  Tensor images = Tensor::Uninitialized(DType::kFloat32, {2, 3, 4, 4});  // 96 values
  for (int64_t i = 0; i < images.num_elements(); ++i) images.mutable_data<float>()[i] = i % 2 ? 1.0f : 0.0f;
  Tensor labels = *Tensor::FromVector<int64_t>({3, 0}, {2});
  Tensor paths = *Tensor::FromVector<std::string>({"a.jpg", std::string(40, 'x')}, {2});
  Element batch({images, labels, paths}, std::make_shared<const std::vector<std::string>>(
                                             std::vector<std::string>{"image", "label", "path"}));
  CHECK(ElementSummary(batch) ==
        R"({"image": "float32[2, 3, 4, 4] 0, 1, 0, ... mean 0.5", "label": [3, 0], "path": ["a.jpg", ")" +
            std::string(40, 'x') + R"("]})");
  Element one({Tensor::StringScalar(std::string(100, 'j')), Tensor::Scalar<uint8_t>(7)});
  CHECK(ElementSummary(one) == R"(["<100 bytes>", 7])");
  // A batch of 65 paths is one short line, not 65 paths.
  Tensor many = Tensor::Uninitialized(DType::kString, {65});
  for (int64_t i = 0; i < 65; ++i) many.mutable_data<std::string>()[i] = absl::StrCat("p", i);
  CHECK(ElementSummary(Element::Of(many)) == R"(["string[65] p0, p1, p2, ..."])");
  Tensor long_paths = Tensor::Uninitialized(DType::kString, {5});
  for (int64_t i = 0; i < 5; ++i)
    long_paths.mutable_data<std::string>()[i] = std::string(40, static_cast<char>('a' + i));
  CHECK(ElementSummary(Element::Of(long_paths)) == absl::StrCat(R"(["string[5] )", std::string(32, 'a'),
                                                                "..., ", std::string(32, 'b'), "..., ",
                                                                std::string(32, 'c'), R"(..., ..."])"));
  Tensor labels64 = *Tensor::FromVector<int64_t>({7, 8, 9, 10, 11}, {5});
  CHECK(ElementSummary(Element::Of(labels64)) == R"(["int64[5] 7, 8, 9, ... mean 9"])");
}

}  // namespace
}  // namespace sluice::cli
