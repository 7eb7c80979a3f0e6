#include "worker/shared_memory_heap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/large_buffer_allocator.h"
#include "common/thread_pool.h"
#include "sluice/tensor.h"

namespace sluice::worker {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST_CASE("SharedBufferHeap: each buffer is a memfd, found by any address inside it, recycled by size",
          "[worker][shared_memory]") {
  SharedBufferHeap heap(64 * kMiB);
  char* data = static_cast<char*>(heap.Allocate(kMiB + 1));
  REQUIRE(data != nullptr);
  std::optional<SharedBufferHeap::Lendable> whole = heap.Find(data, kMiB + 1);
  REQUIRE(whole.has_value());
  CHECK(whole->size == static_cast<int64_t>(kMiB + 4096));  // whole pages
  CHECK(whole->offset == 0);
  struct stat info {};
  REQUIRE(fstat(whole->fd, &info) == 0);
  CHECK(info.st_size == whole->size);

  std::optional<SharedBufferHeap::Lendable> inside = heap.Find(data + 4096, 8192);
  REQUIRE(inside.has_value());
  CHECK(inside->id == whole->id);
  CHECK(inside->offset == 4096);
  CHECK(heap.Find(data + 4096, kMiB).has_value());            // to the buffer's last byte
  CHECK_FALSE(heap.Find(data + 4096, kMiB + 1).has_value());  // past it
  int local = 0;
  CHECK_FALSE(heap.Find(&local, sizeof local).has_value());

  heap.Free(data, kMiB + 1);
  CHECK_FALSE(heap.Find(data, 1).has_value());  // cached, not lendable
  CHECK(heap.cached_bytes() == kMiB + 4096);
  CHECK(heap.Allocate(kMiB + 100) == data);  // the same whole pages come back
  CHECK(heap.Find(data, 1)->id == whole->id);
  CHECK(heap.allocated_buffers() == 1);
  heap.Free(data, kMiB + 1);
}

TEST_CASE("SharedBufferHeap: past its cache bound a freed buffer goes, and a new one has a new id",
          "[worker][shared_memory]") {
  SharedBufferHeap heap(0);
  void* first = heap.Allocate(2 * kMiB);
  REQUIRE(first != nullptr);
  const uint64_t first_id = heap.Find(first, 1)->id;
  heap.Free(first, 2 * kMiB);
  CHECK(heap.cached_bytes() == 0);
  void* second = heap.Allocate(2 * kMiB);
  REQUIRE(second != nullptr);
  CHECK(heap.Find(second, 1)->id > first_id);
  heap.Free(second, 2 * kMiB);
}

TEST_CASE("SharedBufferHeap: a heap caches at most kMaxCachedBuffers, and none once its pipeline ended",
          "[worker][shared_memory]") {
  SharedBufferHeap heap(64 * kMiB);
  const int64_t before = SharedBufferHeap::process_buffer_count();
  std::vector<void*> buffers;
  for (int i = 0; i < 20; ++i) buffers.push_back(heap.Allocate(kMiB + static_cast<size_t>(i) * 4096));
  CHECK(SharedBufferHeap::process_buffer_count() == before + 20);
  for (int i = 0; i < 20; ++i) heap.Free(buffers[i], kMiB + static_cast<size_t>(i) * 4096);
  CHECK(SharedBufferHeap::process_buffer_count() == before + 16);
  CHECK(heap.allocated_buffers() == 0);
  void* again = heap.Allocate(kMiB);
  REQUIRE(again == buffers[0]);
  heap.StopCaching();
  CHECK(heap.cached_bytes() == 0);
  CHECK(SharedBufferHeap::process_buffer_count() == before + 1);
  heap.Free(again, kMiB);
  CHECK(SharedBufferHeap::process_buffer_count() == before);
}

TEST_CASE("SharedBufferHeap: only the heap's own mapping writes, others map it privately or read it",
          "[worker][shared_memory]") {
  SharedBufferHeap heap(64 * kMiB);
  auto* data = static_cast<unsigned char*>(heap.Allocate(kMiB));
  REQUIRE(data != nullptr);
  std::memset(data, 7, kMiB);
  const SharedBufferHeap::Lendable lendable = *heap.Find(data, kMiB);
  const int seals = fcntl(lendable.fd, F_GET_SEALS);
  CHECK((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL)) ==
        (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL));
  errno = 0;
  CHECK(mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, lendable.fd, 0) == MAP_FAILED);
  CHECK(errno == EPERM);

  void* copy = mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE, lendable.fd, 0);
  REQUIRE(copy != MAP_FAILED);
  CHECK(static_cast<unsigned char*>(copy)[100] == 7);
  static_cast<unsigned char*>(copy)[100] = 9;  // a page of its own
  CHECK(data[100] == 7);
  data[8192] = 8;  // the heap still writes, and readers see it (another page)
  CHECK(static_cast<unsigned char*>(copy)[8192] == 8);
  munmap(copy, kMiB);
  heap.Free(data, kMiB);
}

TEST_CASE("LargeBufferAllocatorScope: a task's tensors, and those its thread pools make, come from its heap",
          "[worker][shared_memory]") {
  auto heap = std::make_shared<SharedBufferHeap>(64 * kMiB);
  std::optional<Tensor> in_scope;
  std::optional<Tensor> in_pool;
  std::optional<Tensor> small;
  {
    LargeBufferAllocatorScope scope(heap);
    in_scope.emplace(DType::kFloat32, Shape{262144});  // 1 MiB
    small.emplace(DType::kFloat32, Shape{1024});
    ThreadPool pool(1);
    pool.Schedule([&in_pool] { in_pool.emplace(DType::kInt64, Shape{131072, 2}); });
  }  // the pool joins its thread here
  const Tensor outside(DType::kFloat32, Shape{262144});
  CHECK(heap->Find(in_scope->raw_data(), in_scope->ByteSize()).has_value());
  REQUIRE(in_pool.has_value());
  CHECK(heap->Find(in_pool->raw_data(), in_pool->ByteSize()).has_value());
  CHECK_FALSE(heap->Find(small->raw_data(), small->ByteSize()).has_value());
  CHECK_FALSE(heap->Find(outside.raw_data(), outside.ByteSize()).has_value());
  CHECK(ScopedLargeBufferAllocator() == nullptr);

  // A buffer keeps its heap: the task may end before its last batch is read.
  SharedBufferHeap* raw = heap.get();
  heap.reset();
  in_scope->mutable_data<float>()[5] = 2.5f;
  CHECK(in_scope->data<float>()[5] == 2.5f);
  CHECK(raw->allocated_buffers() == 2);
  in_scope.reset();
  in_pool.reset();  // the heap goes with its last buffer
}

}  // namespace
}  // namespace sluice::worker
