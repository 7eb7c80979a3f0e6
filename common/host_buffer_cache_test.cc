#include "common/host_buffer_cache.h"

#include <catch2/catch.hpp>
#include <cstdint>

#include "sluice/tensor.h"

namespace sluice {
namespace {

TEST_CASE("HostBufferCache hands a freed buffer back for the next of its size", "[common]") {
  HostBufferCache cache(/*max_cached_bytes=*/3 << 20);
  void* first = cache.Allocate(2 << 20);
  REQUIRE(first != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(first) % kBufferAlignment == 0);
  cache.Free(first, 2 << 20);
  CHECK(cache.cached_bytes() == (2 << 20));
  // Another size does not take it; the same size does.
  void* other = cache.Allocate(1 << 20);
  CHECK(other != first);
  CHECK(cache.Allocate(2 << 20) == first);
  CHECK(cache.cached_bytes() == 0);
  // Past the cap, freed buffers go back to the C library.
  cache.Free(first, 2 << 20);
  cache.Free(other, 1 << 20);
  CHECK(cache.cached_bytes() == (3 << 20));
  void* third = cache.Allocate(2 << 20);
  void* fourth = cache.Allocate(2 << 20);
  CHECK(third == first);
  CHECK(fourth != first);
  cache.Free(fourth, 2 << 20);
  cache.Free(third, 2 << 20);
  CHECK(cache.cached_bytes() == (3 << 20));
  // A lower cap gives back what it no longer covers; Trim gives back all.
  cache.SetMaxCachedBytes(1 << 20);
  CHECK(cache.cached_bytes() == (1 << 20));
  cache.Trim();
  CHECK(cache.cached_bytes() == 0);
  cache.Free(cache.Allocate(2 << 20), 2 << 20);
  CHECK(cache.cached_bytes() == 0);  // the cap is 1 MiB now
}

TEST_CASE("Large tensors reuse the memory of freed ones of the same size", "[common]") {
  const void* data = nullptr;
  {
    Tensor batch = Tensor::Uninitialized(DType::kFloat32, {64, 3, 224, 224});
    data = batch.raw_data();
  }
  Tensor again = Tensor::Uninitialized(DType::kFloat32, {64, 3, 224, 224});
  CHECK(again.raw_data() == data);
  Tensor zeroed(DType::kFloat32, {64, 3, 224, 224});  // zeroed even when recycled
  CHECK(zeroed.data<float>()[12345] == 0.0f);
}

}  // namespace
}  // namespace sluice
