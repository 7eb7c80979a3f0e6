#include "cli/summary.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

namespace sluice::cli {
namespace {

TEST_CASE("cli: --summary prints big components as dtype, shape and mean", "[cli]") {
  Tensor images = Tensor::Uninitialized(DType::kFloat32, {2, 3, 4, 4});  // 96 values
  for (int64_t i = 0; i < images.num_elements(); ++i) images.mutable_data<float>()[i] = i % 2 ? 1.0f : 0.0f;
  Tensor labels = *Tensor::FromVector<int64_t>({3, 0}, {2});
  Tensor paths = *Tensor::FromVector<std::string>({"a.jpg", std::string(40, 'x')}, {2});
  Element batch({images, labels, paths}, std::make_shared<const std::vector<std::string>>(
                                             std::vector<std::string>{"image", "label", "path"}));
  CHECK(ElementSummary(batch) ==
        R"({"image": "float32[2, 3, 4, 4] mean 0.5", "label": [3, 0], "path": ["a.jpg", ")" +
            std::string(40, 'x') + R"("]})");
  Element one({Tensor::StringScalar(std::string(100, 'j')), Tensor::Scalar<uint8_t>(7)});
  CHECK(ElementSummary(one) == R"(["<100 bytes>", 7])");
  Tensor many = Tensor::Uninitialized(DType::kString, {65});
  CHECK(ElementSummary(Element::Of(many)) == R"(["string[65]"])");
}

}  // namespace
}  // namespace sluice::cli
