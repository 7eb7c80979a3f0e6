#include "common/tensor.h"

#include <catch2/catch.hpp>

namespace sluice {
namespace {

TEST_CASE("Tensor slices share their buffer", "[tensor]") {
  Tensor batch = *Tensor::FromVector<int64_t>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor row = batch.SubTensor(1);
  CHECK(row.shape() == Shape{2});
  CHECK(row.values<int64_t>()[0] == 2);
  CHECK(row.values<int64_t>()[1] == 3);
  CHECK(row.SharesBufferWith(batch));
  Tensor tail = batch.Slice(1, 3);
  CHECK(tail.shape() == Shape{2, 2});
  CHECK(tail.data<int64_t>()[0] == 2);
  CHECK(tail.SharesBufferWith(batch));
  CHECK(reinterpret_cast<uintptr_t>(batch.raw_data()) % kBufferAlignment == 0);
}

}  // namespace
}  // namespace sluice
