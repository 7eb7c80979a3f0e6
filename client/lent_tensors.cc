#include "client/lent_tensors.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sluice {

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

absl::StatusOr<std::pair<std::shared_ptr<SharedRegion>, int64_t>> LentTensors::Map(uint64_t lease) {
  UniqueFd memfd;
  int64_t size = 0;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms_);
    while (!arrived_.contains(lease)) {
      const auto left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      uint64_t got = 0;
      int64_t got_size = 0;
      UniqueFd got_fd;
      if (absl::Status s = ReceiveLentBuffer(socket_.get(), std::max(left, 0), &got, &got_size, &got_fd);
          !s.ok()) {
        if (absl::IsDeadlineExceeded(s)) {
          return absl::DeadlineExceededError(
              absl::StrCat("no lent buffer from the worker within ", timeout_ms_, " ms"));
        }
        return s;
      }
      // The worker lends a session at most kMaxLeases at once, so more
      // unclaimed ones than that cannot be; should they be, the oldest go.
      if (arrived_.size() >= kMaxLeases) arrived_.erase(arrived_.begin());
      arrived_[got] = {std::move(got_fd), got_size};
    }
    auto it = arrived_.find(lease);
    memfd = std::move(it->second.first);
    size = it->second.second;
    arrived_.erase(it);
  }
  // Mapped at once: a reader reads every byte of a batch it uses, and a
  // fault per page would cost it more than the copy this saves the worker.
  // Private: a reader that writes into a tensor (normalizing in place, say)
  // never changes what the worker lends the next reader.
  absl::StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::MapSealedPrivate(memfd.get(), size);
  if (!region.ok()) return region.status();
  return std::make_pair(*std::move(region), size);
}

absl::Status LentTensors::Place(ElementsResponse* response, const std::string& worker) {
  std::vector<proto::LentTensor> lent = std::move(response->lent_tensors);
  response->lent_tensors.clear();
  for (size_t i = 0; i < lent.size(); ++i) {
    const proto::LentTensor& t = lent[i];
    const auto fail = [&](const std::string& what) {
      // The leases not placed go back at once: nothing will use them.
      absl::MutexLock lock(&mu_);
      for (size_t k = i; k < lent.size(); ++k) {
        released_.push_back(lent[k].lease());
        arrived_.erase(lent[k].lease());
      }
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
    if (count < 0 || count > std::numeric_limits<int64_t>::max() / dtype_bytes) {
      return fail(absl::StrCat("has the shape ", ShapeDebugString(shape), ", whose size overflows"));
    }
    const int64_t bytes = count * dtype_bytes;
    absl::StatusOr<std::pair<std::shared_ptr<SharedRegion>, int64_t>> mapped = Map(t.lease());
    if (!mapped.ok()) return fail(absl::StrCat("could not be mapped: ", mapped.status().message()));
    const auto& [region, size] = *mapped;
    if (t.offset() < 0 || t.offset() % dtype_bytes != 0 || t.offset() > size || bytes > size - t.offset()) {
      return fail(absl::StrCat("lies at byte ", t.offset(), " (", bytes, " bytes) of a buffer of ", size));
    }
    auto view = std::make_shared<View>(shared_from_this(), region, t.lease());
    {
      absl::MutexLock lock(&mu_);
      ++held_;
    }
    std::shared_ptr<TensorBuffer> buffer =
        TensorBuffer::Wrap(slot.dtype(), count, region->data() + t.offset(), [view] {});
    slot = Tensor::FromBuffer(slot.dtype(), shape, std::move(buffer), 0);
  }
  return absl::OkStatus();
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

}  // namespace sluice
