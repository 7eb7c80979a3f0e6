#include "client/read/shared_memory_lent_tensors.h"

#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "worker/shared_memory_heap.h"

namespace sluice::reader {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// A worker's end and a reader's end of a session's socket, and a heap
// buffer of 2 MiB whose int32 value i is i.
struct Fixture {
  Fixture() {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0);
    worker = UniqueFd(fds[0]);
    lent = std::make_shared<LentTensors>(UniqueFd(fds[1]), /*session=*/1, std::string(16, 's'),
                                         /*timeout_ms=*/200);
    data = static_cast<int32_t*>(heap.Allocate(2 * kMiB));
    REQUIRE(data != nullptr);
    for (int32_t i = 0; i < static_cast<int32_t>(2 * kMiB / 4); ++i) data[i] = i;
  }
  ~Fixture() { heap.Free(data, 2 * kMiB); }

  // Sends the buffer under `lease`, as the worker does before its response.
  void Send(uint64_t lease) {
    const worker::SharedBufferHeap::Lendable where = *heap.Find(data, 2 * kMiB);
    REQUIRE(SendLentBuffer(worker.get(), lease, where.size, where.fd).ok());
  }

  worker::SharedBufferHeap heap{64 * kMiB};
  int32_t* data = nullptr;
  UniqueFd worker;
  std::shared_ptr<LentTensors> lent;
};

// A response of one element (a label, then an empty int32 tensor where the
// lent one goes) lending `shape` at byte `offset` under `lease`.
ElementsResponse Response(uint64_t lease, int64_t offset, Shape shape) {
  ElementsResponse response;
  Tensor label(DType::kInt64, Shape{});
  label.mutable_data<int64_t>()[0] = 42;
  response.elements.emplace_back(std::vector<Tensor>{label, Tensor(DType::kInt32, Shape{0})});
  proto::LentTensor& t = response.lent_tensors.emplace_back();
  t.set_element(0);
  t.set_component(1);
  t.set_offset(offset);
  for (int64_t d : shape) t.add_shape(d);
  t.set_lease(lease);
  return response;
}

TEST_CASE(
    "LentTensors: a lent tensor is a view of the worker's buffer, and its lease comes back when it goes",
    "[client][shared_memory]") {
  Fixture f;
  f.Send(7);
  f.Send(8);  // another response's, arriving first: kept for it
  ElementsResponse response = Response(8, 4096, {256, 1024});
  REQUIRE(f.lent->Place(&response, "w:1").ok());
  const Tensor& tensor = response.elements[0].components[1];
  REQUIRE(tensor.shape() == Shape{256, 1024});
  CHECK(tensor.data<int32_t>()[0] == 1024);  // byte 4096 is value 1024
  CHECK(tensor.data<int32_t>()[262143] == 1024 + 262143);
  CHECK(response.elements[0].components[0].data<int64_t>()[0] == 42);
  CHECK(response.lent_tensors.empty());
  CHECK(f.lent->held() == 1);

  // A reader that writes into its tensor changes only its own copy.
  Tensor writable = response.elements[0].components[1];
  writable.mutable_data<int32_t>()[0] = -1;
  CHECK(writable.data<int32_t>()[0] == -1);
  CHECK(f.data[1024] == 1024);

  ElementsResponse second = Response(7, 0, {2});
  REQUIRE(f.lent->Place(&second, "w:1").ok());
  CHECK(second.elements[0].components[1].data<int32_t>()[1] == 1);
  CHECK(f.lent->TakeReleased().empty());
  response = ElementsResponse{};
  writable = Tensor();
  CHECK(f.lent->TakeReleased() == std::vector<uint64_t>{8});
  second = ElementsResponse{};
  CHECK(f.lent->TakeReleased() == std::vector<uint64_t>{7});
  CHECK(f.lent->held() == 0);
}

TEST_CASE("LentTensors: a lent tensor that does not fit is DataLoss naming it, and nothing is kept",
          "[client][shared_memory]") {
  Fixture f;
  f.Send(3);
  ElementsResponse response = Response(3, 0, {16});
  uint64_t lease = 3;
  std::string expected;
  SECTION("an element out of range") {
    response.lent_tensors[0].set_element(1);
    expected = "worker w:1 lent a tensor (lease 3) that names element 1 of 1";
  }
  SECTION("a component out of range") {
    response.lent_tensors[0].set_component(2);
    expected = "worker w:1 lent a tensor (lease 3) that names component 2 of 2";
  }
  SECTION("in place of a tensor that is not empty") {
    response.lent_tensors[0].set_component(0);
    expected = "worker w:1 lent a tensor (lease 3) that does not stand in place of an empty numeric tensor";
  }
  SECTION("a negative dimension") {
    response.lent_tensors[0].set_shape(0, -4);
    expected = "worker w:1 lent a tensor (lease 3) that has the shape [-4]";
  }
  SECTION("past the end of its buffer") {
    response.lent_tensors[0].set_offset(2 * kMiB - 32);
    expected =
        "worker w:1 lent a tensor (lease 3) that lies at byte 2097120 (64 bytes) of a buffer of 2097152";
  }
  SECTION("at an offset that is not a whole number of values") {
    response.lent_tensors[0].set_offset(2);
    expected = "worker w:1 lent a tensor (lease 3) that lies at byte 2 (64 bytes) of a buffer of 2097152";
  }
  SECTION("whose buffer never comes") {
    lease = 4;
    response.lent_tensors[0].set_lease(lease);
    expected =
        "worker w:1 lent a tensor (lease 4) that could not be mapped: no lent buffer from the worker within "
        "200 ms";
  }
  const absl::Status status = f.lent->Place(&response, "w:1");
  CHECK(absl::IsDataLoss(status));
  CHECK(status.message() == expected);
  CHECK(f.lent->held() == 0);
  // The lease goes back to the worker: nothing holds it.
  CHECK(f.lent->TakeReleased() == std::vector<uint64_t>{lease});
}

TEST_CASE(
    "LentTensors: a response lost on the way gives its leases back, and its memfds are closed on arrival",
    "[client][shared_memory]") {
  Fixture f;
  const ElementsResponse lost = Response(5, 0, {16});
  f.lent->Discard(lost.lent_tensors);  // before its memfd has come
  CHECK(f.lent->TakeReleased() == std::vector<uint64_t>{5});
  f.Send(5);
  f.Send(6);
  ElementsResponse next = Response(6, 0, {16});
  REQUIRE(f.lent->Place(&next, "w:1").ok());  // passes lease 5's memfd by
  CHECK(next.elements[0].components[1].data<int32_t>()[3] == 3);
  next = ElementsResponse{};
  CHECK(f.lent->TakeReleased() == std::vector<uint64_t>{6});  // 5 is not given back twice
  CHECK(f.lent->held() == 0);
}

}  // namespace
}  // namespace sluice::reader
