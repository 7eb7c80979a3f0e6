#include "client/device/device_prefetcher.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <thread>

#include "absl/synchronization/notification.h"

namespace sluice {
namespace {

using std::chrono::milliseconds;

// A device whose memory is not host memory as far as the prefetcher knows,
// so every value goes through staging, a DMA and a fence, like a GPU. Its
// "DMA" is a memcpy that can be held at a gate to catch the prefetcher
// mid-copy. It counts what is still allocated.
class FakeGpuBackend : public DeviceBackend {
 public:
  explicit FakeGpuBackend(int index) : device_{DeviceKind::kGpu, index} {}
  const Device& device() const override { return device_; }
  bool host_addressable() const override { return false; }
  absl::StatusOr<void*> AllocateStaging(size_t bytes) override { return Allocate(bytes); }
  void FreeStaging(void* data) override { Free(data); }
  absl::StatusOr<void*> AllocateDevice(size_t bytes) override { return Allocate(bytes); }
  void FreeDevice(void* data) override { Free(data); }
  absl::Status CopyToDevice(void* device_data, const void* staging_data, size_t bytes) override {
    if (copies_started.fetch_add(1) >= hold_from_copy.load()) gate.WaitForNotification();
    std::memcpy(device_data, staging_data, bytes);
    copies_done.fetch_add(1);
    return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFence() override { return std::make_shared<Fence>(); }
  // A fence on the trainer's stream: counts how often the pool waits on it.
  absl::StatusOr<std::shared_ptr<ReadyFence>> RecordFenceOn(void* stream) override {
    trainer_fences.fetch_add(1);
    return std::make_shared<TrainerFence>(&trainer_fence_waits);
  }
  // Host memory the test declared pinned (set before the prefetcher starts).
  bool IsPinned(const void* host_data) const override { return pinned.count(host_data) > 0; }
  absl::Status CopyToHost(void* host_data, const void* device_data, size_t bytes) override {
    std::memcpy(host_data, device_data, bytes);
    return absl::OkStatus();
  }

  std::atomic<int> live_allocations{0};
  std::atomic<int> copies_started{0};
  std::atomic<int> copies_done{0};
  // Copies numbered from 0 at or after this one wait at the gate.
  std::atomic<int> hold_from_copy{std::numeric_limits<int>::max()};
  absl::Notification gate;
  std::atomic<int> trainer_fences{0};
  std::atomic<int> trainer_fence_waits{0};
  std::set<const void*> pinned;

 private:
  struct Fence : ReadyFence {
    absl::Status Wait() override { return absl::OkStatus(); }
    absl::Status WaitOnStream(void*) override { return absl::OkStatus(); }
    void* native_event() const override { return nullptr; }
  };
  struct TrainerFence : Fence {
    explicit TrainerFence(std::atomic<int>* waits) : waits(waits) {}
    absl::Status Wait() override {
      waits->fetch_add(1);
      return absl::OkStatus();
    }
    std::atomic<int>* waits;
  };
  absl::StatusOr<void*> Allocate(size_t bytes) {
    live_allocations.fetch_add(1);
    return std::malloc(bytes);
  }
  void Free(void* data) {
    live_allocations.fetch_sub(1);
    std::free(data);
  }
  const Device device_;
};

// Step k gives replica r the tensor [k*10 + r] of `rows` copies.
DevicePrefetcher::StepSource CountingSource(int num_replicas, int num_steps, std::atomic<int>* calls,
                                            int64_t rows = 1) {
  return [=](std::vector<Element>* step, bool* end) {
    const int k = calls->fetch_add(1);
    if (k >= num_steps) {
      *end = true;
      return absl::OkStatus();
    }
    step->clear();
    for (int r = 0; r < num_replicas; ++r) {
      step->push_back(Element::Of(Tensor::FromVector<int64_t>(std::vector<int64_t>(rows, k * 10 + r))));
    }
    return absl::OkStatus();
  };
}

int64_t FirstValue(const ReplicaValue& value) {
  Tensor host = *value.components[0].ToHostTensor();
  return host.values<int64_t>()[0];
}

template <typename Predicate>
bool WaitFor(Predicate predicate) {
  for (int i = 0; i < 500 && !predicate(); ++i) std::this_thread::sleep_for(milliseconds(10));
  return predicate();
}

TEST_CASE("The prefetcher yields steps in order, per replica, then OutOfRange", "[client][prefetch]") {
  auto gpu0 = std::make_shared<FakeGpuBackend>(0);
  auto gpu1 = std::make_shared<FakeGpuBackend>(1);
  std::atomic<int> calls{0};
  {
    DevicePrefetcher prefetcher({gpu0, gpu1}, CountingSource(2, 20, &calls), 2);
    for (int k = 0; k < 20; ++k) {
      absl::StatusOr<PerReplica> step = prefetcher.GetNext();
      REQUIRE(step.ok());
      REQUIRE(step->size() == 2);
      CHECK((*step)[0].device.name() == "GPU:0");
      CHECK((*step)[1].device.name() == "GPU:1");
      CHECK(FirstValue((*step)[0]) == k * 10);
      CHECK(FirstValue((*step)[1]) == k * 10 + 1);
    }
    absl::StatusOr<PerReplica> end = prefetcher.GetNext();
    CHECK(end.status().code() == absl::StatusCode::kOutOfRange);
    CHECK(end.status().message() == "end of input");
    CHECK(prefetcher.GetNext().status().code() == absl::StatusCode::kOutOfRange);
  }
  CHECK(gpu0->live_allocations.load() == 0);
  CHECK(gpu1->live_allocations.load() == 0);
}

TEST_CASE("A warm prefetcher allocates no buffers per step", "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  std::atomic<int> calls{0};
  DevicePrefetcher prefetcher({gpu}, CountingSource(1, 300, &calls, /*rows=*/4096), 2);
  for (int k = 0; k < 300; ++k) {
    absl::StatusOr<PerReplica> step = prefetcher.GetNext();
    REQUIRE(step.ok());
    CHECK(FirstValue((*step)[0]) == k * 10);
  }
  // 300 steps, and never more buffers than the pools hold: each is reused.
  const DevicePrefetcher::Counters later = prefetcher.counters();
  CHECK(later.device_allocations <= 4);
  CHECK(later.staging_allocations <= 2);
  CHECK(later.steps_produced == 300);
}

TEST_CASE("The prefetcher reads only prefetch_buffer_size steps ahead", "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  std::atomic<int> calls{0};
  DevicePrefetcher prefetcher({gpu}, CountingSource(1, 100, &calls), 3);
  REQUIRE(WaitFor([&] { return calls.load() == 3; }));
  std::this_thread::sleep_for(milliseconds(100));
  CHECK(calls.load() == 3);
  REQUIRE(prefetcher.GetNext().ok());
  REQUIRE(WaitFor([&] { return calls.load() == 4; }));
  std::this_thread::sleep_for(milliseconds(100));
  CHECK(calls.load() == 4);
}

TEST_CASE("A trainer that holds every buffer gets ResourceExhausted, not a hang", "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  std::atomic<int> calls{0};
  DevicePrefetcher prefetcher({gpu}, CountingSource(1, 100, &calls), 2);
  std::vector<PerReplica> held;
  for (int k = 0; k < 4; ++k) {
    absl::StatusOr<PerReplica> step = prefetcher.GetNext();
    INFO("step " << k << ": " << step.status().ToString());
    REQUIRE(step.ok());
    held.push_back(*std::move(step));
  }
  absl::StatusOr<PerReplica> blocked = prefetcher.GetNext();
  CHECK(blocked.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(blocked.status().message() ==
        "the trainer holds all 4 prefetch buffers of GPU:0 (prefetch_buffer_size + 2); drop earlier values "
        "before asking for more");
  held.erase(held.begin());  // frees step 0's buffer
  absl::StatusOr<PerReplica> next = prefetcher.GetNext();
  REQUIRE(next.ok());
  CHECK(FirstValue((*next)[0]) == 40);
  // Values stay intact while held, although their pool keeps working.
  CHECK(FirstValue(held[0][0]) == 10);
  CHECK(FirstValue(held[2][0]) == 30);
}

TEST_CASE("Shutdown mid-copy waits for the copy, and held values outlive the prefetcher",
          "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  std::atomic<int> calls{0};
  std::optional<PerReplica> held;
  std::thread release;
  // One copy per step: the first two pass, the third (step 2, which the
  // prefetcher starts once step 0 is taken, whatever the timing) waits.
  gpu->hold_from_copy = 2;
  {
    DevicePrefetcher prefetcher({gpu}, CountingSource(1, 100, &calls, /*rows=*/1024), 2);
    absl::StatusOr<PerReplica> first = prefetcher.GetNext();
    REQUIRE(first.ok());
    held = *std::move(first);
    REQUIRE(WaitFor([&] { return gpu->copies_started.load() > gpu->copies_done.load(); }));
    release = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(200));
      gpu->gate.Notify();
    });
    // ~DevicePrefetcher here must wait for the copy, not free under it.
  }
  release.join();
  CHECK(gpu->copies_started.load() == gpu->copies_done.load());
  REQUIRE(held.has_value());
  CHECK(FirstValue((*held)[0]) == 0);
  CHECK((*held)[0].components[0].shape() == Shape{1024});
  CHECK(gpu->live_allocations.load() == 1);  // the held value's device buffer
  held.reset();
  CHECK(gpu->live_allocations.load() == 0);
}

TEST_CASE("An input error arrives in order and the next step goes on", "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  std::atomic<int> calls{0};
  auto counting = CountingSource(1, 4, &calls);
  DevicePrefetcher prefetcher(
      {gpu},
      [&](std::vector<Element>* step, bool* end) {
        if (calls.load() == 1) {
          calls.fetch_add(1);
          return absl::DataLossError("corrupt record at offset 42");
        }
        return counting(step, end);
      },
      2);
  CHECK(FirstValue((*prefetcher.GetNext())[0]) == 0);
  absl::StatusOr<PerReplica> failed = prefetcher.GetNext();
  CHECK(failed.status().code() == absl::StatusCode::kDataLoss);
  CHECK(failed.status().message() == "corrupt record at offset 42");
  CHECK(FirstValue((*prefetcher.GetNext())[0]) == 20);
  CHECK(FirstValue((*prefetcher.GetNext())[0]) == 30);
  CHECK(prefetcher.GetNext().status().code() == absl::StatusCode::kOutOfRange);
}

TEST_CASE("String tensors stay on CPU replicas and are refused by GPU ones", "[client][prefetch]") {
  auto source = [](std::vector<Element>* step, bool* end) {
    static thread_local int calls = 0;
    if (calls++ > 0) {
      calls = 0;
      *end = true;
      return absl::OkStatus();
    }
    *step = {Element({Tensor::FromVector<int64_t>({7, 8}), Tensor::FromVector<std::string>({"a", "b"})})};
    return absl::OkStatus();
  };
  {
    DevicePrefetcher cpu({std::shared_ptr<DeviceBackend>(MakeCpuBackend(Device{DeviceKind::kCpu, 0}))},
                         source, 2);
    absl::StatusOr<PerReplica> step = cpu.GetNext();
    REQUIRE(step.ok());
    CHECK(*step->ToJson() == "{\"CPU:0\": [[7, 8], [\"a\", \"b\"]]}");
  }
  DevicePrefetcher gpu({std::make_shared<FakeGpuBackend>(0)}, source, 2);
  absl::StatusOr<PerReplica> refused = gpu.GetNext();
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(refused.status().message() == "component 1 is a string tensor; GPU:0 takes numeric tensors only");
}

TEST_CASE("A value's components share one aligned device buffer", "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  int calls = 0;
  DevicePrefetcher prefetcher(
      {gpu},
      [&](std::vector<Element>* step, bool* end) {
        if (calls++ > 0) {
          *end = true;
          return absl::OkStatus();
        }
        *step = {
            Element({Tensor::FromVector<float>({1.5f, 2.5f, 3.5f}), Tensor::FromVector<int32_t>({4, 5, 6})})};
        return absl::OkStatus();
      },
      2);
  absl::StatusOr<PerReplica> step = prefetcher.GetNext();
  REQUIRE(step.ok());
  const ReplicaValue& value = (*step)[0];
  REQUIRE(value.components.size() == 2);
  CHECK(value.num_rows() == 3);
  const char* first = static_cast<const char*>(value.components[0].data());
  const char* second = static_cast<const char*>(value.components[1].data());
  CHECK(second - first == 256);
  CHECK(value.components[0].byte_size() == 12);
  CHECK(*value.components[1].ToHostTensor() == Tensor::FromVector<int32_t>({4, 5, 6}));
  CHECK(value.Wait().ok());
}

TEST_CASE("A dropped value's buffer is reused only after the trainer's streams are done",
          "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  std::atomic<int> calls{0};
  int streams = 0;
  {
    DevicePrefetcher prefetcher({gpu}, CountingSource(1, 10, &calls), 2);
    for (int k = 0; k < 10; ++k) {
      absl::StatusOr<PerReplica> step = prefetcher.GetNext();
      REQUIRE(step.ok());
      // Half the steps are read on the stream they were waited on, half
      // also on a second stream.
      REQUIRE((*step)[0].WaitOnStream(&streams).ok());
      if (k % 2 == 1) REQUIRE((*step)[0].RecordStream(&k).ok());
    }  // each step dropped here: a fence per recorded stream
    CHECK(gpu->trainer_fences.load() == 15);
    // At most 4 buffers exist, so at least 6 of the 10 were reused, each
    // after waiting on its recorded fences.
    CHECK(gpu->trainer_fence_waits.load() >= 6);
  }
  // The rest are waited on before they are freed.
  CHECK(gpu->trainer_fence_waits.load() == 15);
  CHECK(gpu->live_allocations.load() == 0);
}

TEST_CASE("Components in pinned memory go straight to the device, the rest through staging",
          "[client][prefetch]") {
  auto gpu = std::make_shared<FakeGpuBackend>(0);
  const Tensor pinned_rows = Tensor::FromVector<int64_t>({1, 2, 3});
  const Tensor pageable_rows = Tensor::FromVector<float>({0.5f, 1.5f, 2.5f});
  gpu->pinned.insert(pinned_rows.raw_data());
  auto one_step = [&](std::vector<Element> values) {
    return [values, done = false](std::vector<Element>* step, bool* end) mutable {
      *end = done;
      if (!done) *step = values;
      done = true;
      return absl::OkStatus();
    };
  };
  {
    DevicePrefetcher prefetcher({gpu}, one_step({Element({pinned_rows, pageable_rows})}), 2);
    absl::StatusOr<PerReplica> step = prefetcher.GetNext();
    REQUIRE(step.ok());
    CHECK(*(*step)[0].components[0].ToHostTensor() == pinned_rows);
    CHECK(*(*step)[0].components[1].ToHostTensor() == pageable_rows);
    CHECK(gpu->copies_started.load() == 2);  // one direct, one staged
    CHECK(prefetcher.counters().staging_allocations == 1);
  }
  {
    DevicePrefetcher prefetcher({gpu}, one_step({Element::Of(pinned_rows)}), 2);
    absl::StatusOr<PerReplica> step = prefetcher.GetNext();
    REQUIRE(step.ok());
    CHECK(*(*step)[0].components[0].ToHostTensor() == pinned_rows);
    CHECK(prefetcher.counters().staging_allocations == 0);
  }
  CHECK(gpu->live_allocations.load() == 0);
}

}  // namespace
}  // namespace sluice
