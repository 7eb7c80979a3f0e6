// SharedMemoryServer's lending (worker/shared_memory_lending.cc) with a reader's
// socket in the test: what is lent, what is sent, the bounds, and every way
// a lease ends.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>

#include "worker/shared_memory_server.h"

namespace sluice::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// A connected session of `server` whose reader side is `socket`.
struct Session {
  proto::OpenSharedMemoryResponse offer;
  UniqueFd socket;
};

Session Open(SharedMemoryServer& server, int64_t region_bytes = kMiB) {
  Session session;
  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = server.Offer(HostId());
  REQUIRE(offer.ok());
  session.offer = *offer;
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(region_bytes);
  REQUIRE(memfd.ok());
  absl::StatusOr<UniqueFd> socket = ConnectAbstract(offer->socket_name());
  REQUIRE(socket.ok());
  REQUIRE(SendHello(socket->get(),
                    {.session = offer->session(), .secret = offer->secret(), .size = region_bytes},
                    memfd->get())
              .ok());
  REQUIRE(ReceiveVerdict(socket->get(), 5000).ok());
  session.socket = *std::move(socket);
  return session;
}

// An element of a label and `count` int32 values i * 3 made in `heap`.
Element HeapElement(const std::shared_ptr<SharedBufferHeap>& heap, int64_t count) {
  LargeBufferAllocatorScope scope(heap);
  Tensor values(DType::kInt32, Shape{count});
  for (int64_t i = 0; i < count; ++i) values.mutable_data<int32_t>()[i] = static_cast<int32_t>(i * 3);
  Tensor label(DType::kInt64, Shape{});
  return Element({label, values});
}

TEST_CASE("tensor lending: a heap's large tensors are lent with their memfd, and come back when released",
          "[worker][shared_memory]") {
  absl::StatusOr<std::unique_ptr<SharedMemoryServer>> server = SharedMemoryServer::Start(int64_t{1} << 30);
  REQUIRE(server.ok());
  Session reader = Open(**server);
  const uint64_t session = reader.offer.session();
  auto heap = std::make_shared<SharedBufferHeap>(64 * kMiB);
  std::vector<Element> elements = {HeapElement(heap, kMiB / 2), HeapElement(heap, kMiB / 2)};
  const std::vector<Element> originals = elements;
  elements.push_back(Element::Of(Tensor(DType::kInt32, Shape{kMiB / 2})));  // not the heap's: copied
  std::vector<proto::LentTensor> lent;
  CHECK((*server)->Lend(session, *heap, &elements, &lent) == 4 * kMiB);
  REQUIRE(lent.size() == 2);
  CHECK(lent[0].element() == 0);
  CHECK(lent[0].component() == 1);
  CHECK(lent[0].offset() == 0);
  CHECK(lent[0].shape(0) == kMiB / 2);
  CHECK(lent[1].element() == 1);
  CHECK(lent[1].lease() == lent[0].lease() + 1);
  CHECK(elements[0].components[1].num_elements() == 0);  // lent: the frame carries an empty tensor
  CHECK(elements[0].components[0].num_elements() == 1);
  CHECK(elements[2].components[0].num_elements() == kMiB / 2);
  CHECK((*server)->leases(session) == 2);

  // The memfds came over the socket, under the leases, in order; mapped,
  // they hold the tensors.
  for (const proto::LentTensor& t : lent) {
    uint64_t lease = 0;
    int64_t size = 0;
    UniqueFd memfd;
    REQUIRE(ReceiveLentBuffer(reader.socket.get(), 1000, &lease, &size, &memfd).ok());
    CHECK(lease == t.lease());
    CHECK(size == 2 * kMiB);
    absl::StatusOr<std::shared_ptr<SharedRegion>> mapped =
        SharedRegion::MapSealedPrivate(memfd.get(), size, t.offset(), 2 * kMiB);
    REQUIRE(mapped.ok());
    CHECK(reinterpret_cast<const int32_t*>((*mapped)->data())[1000] == 3000);
  }

  // Released, the worker holds the tensors no longer (the originals keep
  // their buffers here).
  (*server)->Release(session, {lent[0].lease(), 12345});
  CHECK((*server)->leases(session) == 1);
  proto::GetElementsRequest request;
  request.set_shm_session(session);
  request.add_shm_released(lent[1].lease());
  (*server)->ReleaseGivenBack(request);
  CHECK((*server)->leases(session) == 0);
}

TEST_CASE("tensor lending: the bounds, and leases that end with their session", "[worker][shared_memory]") {
  auto heap = std::make_shared<SharedBufferHeap>(64 * kMiB);
  SECTION("what all sessions may map: a region of 1 MiB and one 2 MiB buffer in 3 MiB, all or none") {
    absl::StatusOr<std::unique_ptr<SharedMemoryServer>> server = SharedMemoryServer::Start(3 * kMiB);
    REQUIRE(server.ok());
    Session reader = Open(**server);
    std::vector<Element> two = {HeapElement(heap, kMiB / 2), HeapElement(heap, kMiB / 2)};
    std::vector<proto::LentTensor> lent;
    CHECK((*server)->Lend(reader.offer.session(), *heap, &two, &lent) == 0);
    CHECK(lent.empty());
    CHECK(two[0].components[1].num_elements() == kMiB / 2);  // copied instead, both
    std::vector<Element> one = {HeapElement(heap, kMiB / 2)};
    CHECK((*server)->Lend(reader.offer.session(), *heap, &one, &lent) == 2 * kMiB);
    CHECK(lent.size() == 1);
  }
  SECTION("kMaxLeases leases at once, the same buffer lent again and again") {
    absl::StatusOr<std::unique_ptr<SharedMemoryServer>> server = SharedMemoryServer::Start(int64_t{1} << 40);
    REQUIRE(server.ok());
    Session reader = Open(**server);
    const Element element = HeapElement(heap, kMiB / 4);
    std::vector<proto::LentTensor> lent;
    // In responses of 16, the reader taking each response's memfds as it
    // would (the socket holds some hundred messages unread).
    const int responses = static_cast<int>(kMaxLeases / 16) + 1;
    for (int response = 0; response < responses; ++response) {
      std::vector<Element> elements(16, element);
      const size_t before = lent.size();
      (*server)->Lend(reader.offer.session(), *heap, &elements, &lent);
      for (size_t i = before; i < lent.size(); ++i) {
        uint64_t lease = 0;
        int64_t size = 0;
        UniqueFd memfd;
        REQUIRE(ReceiveLentBuffer(reader.socket.get(), 1000, &lease, &size, &memfd).ok());
        CHECK(lease == lent[i].lease());
      }
      if (response == responses - 1)
        CHECK(elements.back().components[1].num_elements() == kMiB / 4);  // copied
    }
    CHECK(lent.size() == kMaxLeases);
    CHECK((*server)->leases(reader.offer.session()) == kMaxLeases);
  }
  SECTION("a hang-up ends the session's leases, and their buffers go back to the heap") {
    absl::StatusOr<std::unique_ptr<SharedMemoryServer>> server = SharedMemoryServer::Start(int64_t{1} << 30);
    REQUIRE(server.ok());
    Session reader = Open(**server);
    const uint64_t session = reader.offer.session();
    std::vector<Element> elements = {HeapElement(heap, kMiB / 2)};
    std::vector<proto::LentTensor> lent;
    (*server)->Lend(session, *heap, &elements, &lent);
    REQUIRE(lent.size() == 1);
    elements.clear();
    CHECK(heap->allocated_buffers() == 1);  // held by the lease alone

    // Another session's secret does not release them.
    Session other = Open(**server);
    proto::GetElementsRequest request;
    request.set_shm_session(other.offer.session());
    proto::ReleasedLeases* elsewhere = request.add_shm_released_elsewhere();
    elsewhere->set_session(session);
    elsewhere->set_secret(other.offer.secret());
    elsewhere->add_leases(lent[0].lease());
    (*server)->ReleaseGivenBack(request);
    CHECK((*server)->leases(session) == 1);

    reader.socket = UniqueFd();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (heap->allocated_buffers() != 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(heap->allocated_buffers() == 0);
    CHECK((*server)->leases(session) == 0);
  }
  SECTION("a replaced session's leases come back with its secret through another session's request") {
    absl::StatusOr<std::unique_ptr<SharedMemoryServer>> server = SharedMemoryServer::Start(int64_t{1} << 30);
    REQUIRE(server.ok());
    Session old = Open(**server);
    Session current = Open(**server);
    std::vector<Element> elements = {HeapElement(heap, kMiB / 2)};
    std::vector<proto::LentTensor> lent;
    (*server)->Lend(old.offer.session(), *heap, &elements, &lent);
    REQUIRE(lent.size() == 1);
    proto::GetElementsRequest request;
    request.set_shm_session(current.offer.session());
    proto::ReleasedLeases* elsewhere = request.add_shm_released_elsewhere();
    elsewhere->set_session(old.offer.session());
    elsewhere->set_secret(old.offer.secret());
    elsewhere->add_leases(lent[0].lease());
    (*server)->ReleaseGivenBack(request);
    CHECK((*server)->leases(old.offer.session()) == 0);
  }
}

}  // namespace
}  // namespace sluice::worker
