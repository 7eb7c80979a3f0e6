#include "client/read/shared_memory_lent_tensors.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::reader {

// What a lent tensor's buffer holds on to: the mapping, and the lease,
// given back when the last view goes.
class LentTensors::View {
 public:
  View(std::shared_ptr<LentTensors> owner, std::shared_ptr<SharedRegion> region, uint64_t lease)
      : owner_(std::move(owner)), region_(std::move(region)), lease_(lease) {}
  ~View() { owner_->Released(lease_); }
  View(const View&) = delete;
  View& operator=(const View&) = delete;

 private:
  const std::shared_ptr<LentTensors> owner_;
  const std::shared_ptr<SharedRegion> region_;
  const uint64_t lease_;
};

void LentTensors::KeepLocked(uint64_t lease, Arrived arrived) {
  if (discarded_.erase(lease) > 0) return;  // its lease went back already
  for (auto it = arrived_.begin(); it != arrived_.end();) {
    if (arrived.when - it->second.when > kUnclaimedLentBufferLifetime) {
      released_.push_back(it->first);
      it = arrived_.erase(it);
    } else {
      ++it;
    }
  }
  // The worker lends a session at most kMaxLeases at once, so more
  // unclaimed ones than that are orphans (a memfd whose response never
  // came); should twice as many pile up, the oldest go.
  if (arrived_.size() >= 2 * kMaxLeases) {
    released_.push_back(arrived_.begin()->first);
    arrived_.erase(arrived_.begin());
  }
  arrived_[lease] = std::move(arrived);
}

absl::StatusOr<LentTensors::Arrived> LentTensors::Receive(uint64_t lease) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  const auto take = [&]() -> std::optional<Arrived> {
    absl::MutexLock lock(&mu_);
    auto it = arrived_.find(lease);
    if (it == arrived_.end()) return std::nullopt;
    Arrived found = std::move(it->second);
    arrived_.erase(it);
    return found;
  };
  while (true) {
    // Another thread may have taken it off the socket: no need to wait for
    // the socket then.
    if (std::optional<Arrived> found = take(); found.has_value()) return *std::move(found);
    absl::MutexLock socket_lock(&socket_mu_);
    if (std::optional<Arrived> found = take(); found.has_value()) return *std::move(found);
    const auto left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    uint64_t got = 0;
    Arrived arrived;
    absl::Status status = left <= 0
                              ? absl::DeadlineExceededError("")
                              : ReceiveLentBuffer(socket_.get(), left, &got, &arrived.size, &arrived.memfd);
    if (absl::IsDeadlineExceeded(status)) {
      return absl::DeadlineExceededError(
          absl::StrCat("no lent buffer from the worker within ", timeout_ms_, " ms"));
    }
    if (!status.ok()) return status;
    arrived.when = Clock::now();
    if (got == lease) return arrived;
    absl::MutexLock lock(&mu_);
    KeepLocked(got, std::move(arrived));
  }
}

absl::Status LentTensors::Place(ElementsResponse* response, const std::string& worker) {
  std::vector<proto::LentTensor> lent = std::move(response->lent_tensors);
  response->lent_tensors.clear();
  for (size_t i = 0; i < lent.size(); ++i) {
    const proto::LentTensor& t = lent[i];
    bool received = false;  // this lease's memfd is off the socket
    const auto fail = [&](const std::string& what) {
      // This lease and the ones not placed go back at once: nothing will
      // use them.
      Discard(std::vector<proto::LentTensor>(lent.begin() + static_cast<std::ptrdiff_t>(i), lent.end()),
              received ? t.lease() : 0);
      return absl::DataLossError(
          absl::StrCat("worker ", worker, " lent a tensor (lease ", t.lease(), ") that ", what));
    };
    if (t.element() < 0 || static_cast<size_t>(t.element()) >= response->elements.size()) {
      return fail(absl::StrCat("names element ", t.element(), " of ", response->elements.size()));
    }
    std::vector<Tensor>& components = response->elements[static_cast<size_t>(t.element())].components;
    if (t.component() < 0 || static_cast<size_t>(t.component()) >= components.size()) {
      return fail(absl::StrCat("names component ", t.component(), " of ", components.size()));
    }
    Tensor& slot = components[static_cast<size_t>(t.component())];
    if (slot.dtype() == DType::kString || slot.num_elements() != 0) {
      return fail("does not stand in place of an empty numeric tensor");
    }
    const Shape shape(t.shape().begin(), t.shape().end());
    for (int64_t d : shape) {
      if (d < 0) return fail(absl::StrCat("has the shape ", ShapeDebugString(shape)));
    }
    const int64_t count = NumElements(shape);
    const auto dtype_bytes = static_cast<int64_t>(DTypeSize(slot.dtype()));
    if (count <= 0 || count > std::numeric_limits<int64_t>::max() / dtype_bytes) {
      return fail(absl::StrCat("has the shape ", ShapeDebugString(shape), ", whose size is 0 or overflows"));
    }
    const int64_t bytes = count * dtype_bytes;
    absl::StatusOr<Arrived> arrived = Receive(t.lease());
    if (!arrived.ok()) return fail(absl::StrCat("could not be mapped: ", arrived.status().message()));
    received = true;
    if (t.offset() < 0 || t.offset() % dtype_bytes != 0 || t.offset() > arrived->size ||
        bytes > arrived->size - t.offset()) {
      return fail(
          absl::StrCat("lies at byte ", t.offset(), " (", bytes, " bytes) of a buffer of ", arrived->size));
    }
    // Only the tensor's pages: a tensor sliced from a larger batch maps (and
    // shows) no more of it.
    absl::StatusOr<std::shared_ptr<SharedRegion>> region =
        SharedRegion::MapSealedPrivate(arrived->memfd.get(), arrived->size, t.offset(), bytes);
    if (!region.ok()) return fail(absl::StrCat("could not be mapped: ", region.status().message()));
    const auto page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
    char* data = (*region)->data() + t.offset() % page;
    auto view = std::make_shared<View>(shared_from_this(), *std::move(region), t.lease());
    {
      absl::MutexLock lock(&mu_);
      ++held_;
    }
    std::shared_ptr<TensorBuffer> buffer = TensorBuffer::Wrap(slot.dtype(), count, data, [view] {});
    slot = Tensor::FromBuffer(slot.dtype(), shape, std::move(buffer), 0);
  }
  return absl::OkStatus();
}

void LentTensors::Discard(const std::vector<proto::LentTensor>& lent, uint64_t received) {
  absl::MutexLock lock(&mu_);
  for (const proto::LentTensor& t : lent) {
    released_.push_back(t.lease());
    if (t.lease() == received) continue;
    // Its memfd came already, or is on the socket (sent before the
    // response): closed now, or when it arrives.
    if (arrived_.erase(t.lease()) == 0 && discarded_.size() < kMaxLeases) discarded_.insert(t.lease());
  }
}

void LentTensors::Released(uint64_t lease) {
  absl::MutexLock lock(&mu_);
  released_.push_back(lease);
  --held_;
}

std::vector<uint64_t> LentTensors::TakeReleased() {
  absl::MutexLock lock(&mu_);
  return std::exchange(released_, {});
}

void LentTensors::GiveBackLater(const std::vector<uint64_t>& leases) {
  absl::MutexLock lock(&mu_);
  released_.insert(released_.end(), leases.begin(), leases.end());
}

int64_t LentTensors::held() {
  absl::MutexLock lock(&mu_);
  return held_;
}

}  // namespace sluice::reader
