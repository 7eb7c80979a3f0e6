#include "sluice/tensor.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "common/large_buffer_allocator.h"
#include "common/strings.h"
#include "sluice/element.h"

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
  CHECK(tail.data<int64_t>()[3] == 5);
  CHECK(tail.SharesBufferWith(batch));
  // A slice of a slice still points into the first buffer.
  Tensor inner = tail.SubTensor(1);
  CHECK(inner.data<int64_t>()[0] == 4);
  CHECK(inner.SharesBufferWith(batch));
  CHECK(reinterpret_cast<uintptr_t>(batch.raw_data()) % kBufferAlignment == 0);
}

TEST_CASE("Tensor buffers outlive the tensor they came from", "[tensor]") {
  Tensor row;
  {
    Tensor batch = *Tensor::FromVector<std::string>({"a", "bb", "ccc", "dddd"}, {2, 2});
    row = batch.SubTensor(1);
  }
  CHECK(row.values<std::string>()[0] == "ccc");
  CHECK(row.values<std::string>()[1] == "dddd");
  CHECK(row.buffer().use_count() == 1);
}

TEST_CASE("Tensor zero-fills, copies deeply and compares by value", "[tensor]") {
  Tensor zeros(DType::kFloat32, {2, 3});
  for (float v : zeros.values<float>()) CHECK(v == 0.0f);
  CHECK(zeros.num_elements() == 6);
  CHECK(zeros.ByteSize() == 24);
  Tensor a = *Tensor::FromVector<int32_t>({1, 2, 3}, {3});
  Tensor b = a.DeepCopy();
  CHECK_FALSE(b.SharesBufferWith(a));
  CHECK(a == b);
  b.mutable_data<int32_t>()[0] = 9;
  CHECK_FALSE(a == b);
  CHECK_FALSE(a == *Tensor::FromVector<int64_t>({1, 2, 3}, {3}));
  CHECK(Tensor(DType::kInt64, {0, 4}).num_elements() == 0);
}

TEST_CASE("Tensor::FromVector rejects a shape of the wrong size", "[tensor]") {
  absl::StatusOr<Tensor> t = Tensor::FromVector<int64_t>({1, 2, 3}, {2, 2});
  REQUIRE(t.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(t.status().message() == "shape [2, 2] needs 4 values, got 3");
}

TEST_CASE("Reshaped keeps the buffer and checks the element count", "[tensor]") {
  Tensor t = *Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 6}, {6});
  Tensor r = *t.Reshaped({2, 3});
  CHECK(r.shape() == Shape{2, 3});
  CHECK(r.SharesBufferWith(t));
  CHECK(t.Reshaped({4}).status().message() == "cannot reshape [6] to [4]");
}

TEST_CASE("CastTensor converts with C++ rules and 16-bit floats round", "[tensor]") {
  Tensor f = *Tensor::FromVector<float>({1.9f, -1.9f, 65504.0f, 0.1f}, {4});
  Tensor i = *CastTensor(f, DType::kInt64);
  CHECK(i.values<int64_t>()[0] == 1);
  CHECK(i.values<int64_t>()[1] == -1);
  Tensor h = *CastTensor(f, DType::kFloat16);
  CHECK(static_cast<float>(h.values<Float16>()[2]) == 65504.0f);
  CHECK(h.values<Float16>()[3].bits == 0x2e66);  // 0.1 rounds to 0.0999755859375
  Tensor bf = *CastTensor(f, DType::kBFloat16);
  CHECK(bf.values<BFloat16>()[0].bits == 0x3ff3);  // 1.9 -> 1.8984375
  CHECK(CastTensor(Tensor::StringScalar("x"), DType::kInt64).status().message() ==
        "cannot cast string to int64");
}

TEST_CASE("Float16 handles subnormals, overflow and NaN", "[tensor]") {
  CHECK(Float16(65520.0f).bits == 0x7c00);       // rounds up to infinity
  CHECK(Float16(5.9604645e-8f).bits == 0x0001);  // smallest subnormal
  CHECK(Float16::ToFloat(0x0001) == 5.9604644775390625e-8f);
  CHECK(Float16(-2.0f).bits == 0xc000);
  CHECK(std::isnan(Float16::ToFloat(Float16(std::nanf("")).bits)));
  CHECK(Float16::ToFloat(0x3c00) == 1.0f);
}

TEST_CASE("DType names parse back, and unknown names suggest one", "[tensor]") {
  for (DType d :
       {DType::kBool, DType::kInt8, DType::kUInt64, DType::kFloat16, DType::kBFloat16, DType::kString}) {
    CHECK(*ParseDType(DTypeName(d)) == d);
  }
  CHECK(*ParseDType("float") == DType::kFloat32);
  CHECK(*ParseDType("double") == DType::kFloat64);
  absl::StatusOr<DType> bad = ParseDType("flaot32");
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "unknown dtype 'flaot32'; did you mean 'float32'?");
  CHECK(ParseDType("tensor").status().message() == "unknown dtype 'tensor'");
}

TEST_CASE("Element specs print and merge partial shapes", "[tensor]") {
  PartialShape a{{4, 3}};
  PartialShape b{{2, 3}};
  CHECK(a.MostSpecificCommon(b).DebugString() == "[?, 3]");
  CHECK(a.MostSpecificCommon(PartialShape{{3}}).unknown_rank);
  CHECK(PartialShape{{kUnknownDim, 3}}.IsCompatibleWith({7, 3}));
  CHECK_FALSE(PartialShape{{kUnknownDim, 3}}.IsCompatibleWith({7, 4}));
  ElementSpec spec;
  spec.components = {{PartialShape{{kUnknownDim}}, DType::kInt64}, {PartialShape{{}}, DType::kString}};
  CHECK(spec.DebugString() == "(TensorSpec(shape=[?], dtype=int64), TensorSpec(shape=[], dtype=string))");
  spec.names = {"ids", "text"};
  CHECK(spec.DebugString() ==
        "{ids: TensorSpec(shape=[?], dtype=int64), text: TensorSpec(shape=[], dtype=string)}");
}

TEST_CASE("EditDistance and UTF-8 validation", "[tensor]") {
  CHECK(EditDistance("kitten", "sitting") == 3);
  CHECK(EditDistance("", "abc") == 3);
  CHECK(DidYouMean("btach", {"batch", "shuffle"}) == "; did you mean 'batch'?");
  CHECK(DidYouMean("zzzzzz", {"batch", "shuffle"}).empty());
  CHECK(IsValidUtf8("plain ascii"));
  CHECK(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK_FALSE(IsValidUtf8("\xff"));
  CHECK_FALSE(IsValidUtf8("\xc3"));          // truncated
  CHECK_FALSE(IsValidUtf8("\xc0\xaf"));      // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xed\xa0\x80"));  // surrogate
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Hands out malloc'd memory and counts, as the pinned buffer cache would.
class CountingAllocator : public LargeBufferAllocator {
 public:
  size_t min_bytes() const override { return 1024; }
  void* Allocate(size_t bytes) override {
    ++allocations;
    last_bytes = bytes;
    return std::malloc(bytes);
  }
  void Free(void* data, size_t bytes) override {
    ++frees;
    freed_bytes = bytes;
    std::free(data);
  }
  int allocations = 0;
  int frees = 0;
  size_t last_bytes = 0;
  size_t freed_bytes = 0;
};

TEST_CASE("Large numeric buffers come from the installed allocator, and go back to it", "[tensor]") {
  CountingAllocator allocator;
  SetLargeBufferAllocator(&allocator);
  {
    Tensor small(DType::kInt64, {127});  // 1016 bytes: below min_bytes
    Tensor zeroed(DType::kInt64, {128});
    Tensor strings(DType::kString, {1024});  // strings never
    CHECK(allocator.allocations == 1);
    CHECK(allocator.last_bytes == 1024);
    CHECK(zeroed.values<int64_t>()[127] == 0);
    Tensor row = zeroed.Slice(3, 4);
    zeroed = Tensor();
    CHECK(allocator.frees == 0);  // the slice still holds the buffer
  }
  CHECK(allocator.frees == 1);
  CHECK(allocator.freed_bytes == 1024);
  SetLargeBufferAllocator(nullptr);
  Tensor after(DType::kInt64, {4096});
  CHECK(allocator.allocations == 1);
}

TEST_CASE("A shape past int64 allocates nothing and throws length_error", "[tensor][hardening]") {
  const int64_t huge = int64_t{1} << 62;
  CHECK(NumElements({2, huge}) == -1);
  CHECK(NumElements({huge, huge}) == -1);
  CHECK(NumElements({2, huge / 2}) == huge);
  CHECK_THROWS_WITH(Tensor(DType::kInt64, {huge, huge}), "a tensor whose element count overflows int64");
  CHECK_THROWS_WITH(Tensor(DType::kInt64, {huge}), "a tensor of 4611686018427387904 elements of int64");
}

}  // namespace
}  // namespace sluice
