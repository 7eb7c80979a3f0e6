// SharedMemoryServer's lending of tensors to readers on its host
// (docs/design.md, "Shared memory"): a task's finished batch goes to the
// reader as a view of the task's own memory rather than as a copy.
#include <spdlog/spdlog.h>

#include "worker/shared_memory_server.h"

namespace sluice::worker {

int64_t SharedMemoryServer::Lend(uint64_t session, SharedBufferHeap& heap, std::vector<Element>* elements,
                                 std::vector<proto::LentTensor>* lent) {
  struct Candidate {
    size_t element;
    size_t component;
    SharedBufferHeap::Lendable where;
  };
  std::vector<Candidate> candidates;
  int64_t buffer_bytes = 0;
  for (size_t e = 0; e < elements->size(); ++e) {
    const std::vector<Tensor>& components = (*elements)[e].components;
    for (size_t c = 0; c < components.size(); ++c) {
      const Tensor& tensor = components[c];
      const size_t bytes = tensor.ByteSize();
      if (tensor.dtype() == DType::kString || bytes < SharedBufferHeap::kMinBytes) continue;
      std::optional<SharedBufferHeap::Lendable> where = heap.Find(tensor.raw_data(), bytes);
      if (!where.has_value()) continue;
      candidates.push_back({e, c, *where});
      buffer_bytes += where->size;
    }
  }
  if (candidates.empty()) return 0;
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end() || !it->second.socket.valid()) return 0;
  Session& s = it->second;
  // All or none: a response partly lent would be sized for the region as
  // if wholly lent, and go inline. A lease keeps its whole buffer mapped in
  // the worker: it counts against the session's bounds and, with the
  // regions, against what all sessions may map (a quarter of
  // max_memory_bytes).
  if (s.leases.size() + candidates.size() > kMaxLeases || s.lent_bytes + buffer_bytes > kMaxLentBytes ||
      MappedBytesLocked() + buffer_bytes > max_mapped_bytes_) {
    return 0;
  }
  int64_t lent_bytes = 0;
  for (const Candidate& candidate : candidates) {
    const uint64_t lease = s.next_lease;
    if (absl::Status sent = SendLentBuffer(s.socket.get(), lease, candidate.where.size, candidate.where.fd);
        !sent.ok()) {
      // The socket is full (a reader that reads none of it): the rest of
      // this response is copied; the next tries again.
      spdlog::debug("shared memory session {:016x}: {}; copying instead", session,
                    std::string(sent.message()));
      break;
    }
    ++s.next_lease;
    Tensor& tensor = (*elements)[candidate.element].components[candidate.component];
    proto::LentTensor& entry = lent->emplace_back();
    entry.set_element(static_cast<int32_t>(candidate.element));
    entry.set_component(static_cast<int32_t>(candidate.component));
    entry.set_offset(candidate.where.offset);
    for (int64_t d : tensor.shape()) entry.add_shape(d);
    entry.set_lease(lease);
    s.lent_bytes += candidate.where.size;
    lent_bytes += static_cast<int64_t>(tensor.ByteSize());
    Tensor placeholder(tensor.dtype(), Shape{0});
    s.leases.emplace(lease, Session::Lease{.tensor = std::exchange(tensor, std::move(placeholder)),
                                           .buffer_bytes = candidate.where.size});
  }
  return lent_bytes;
}

void SharedMemoryServer::Release(uint64_t session, const std::vector<uint64_t>& leases) {
  std::vector<Tensor> released;  // their buffers go back to the heap after the lock
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  for (uint64_t lease : leases) {
    auto found = s.leases.find(lease);
    if (found == s.leases.end()) continue;
    s.lent_bytes -= found->second.buffer_bytes;
    released.push_back(std::move(found->second.tensor));
    s.leases.erase(found);
  }
}

void SharedMemoryServer::ReleaseGivenBack(const proto::GetElementsRequest& request) {
  if (!request.shm_released().empty()) {
    Release(request.shm_session(), {request.shm_released().begin(), request.shm_released().end()});
  }
  for (const proto::ReleasedLeases& elsewhere : request.shm_released_elsewhere()) {
    // The secret proves the sender is that session's reader.
    if (Region(elsewhere.session(), elsewhere.secret()) == nullptr) continue;
    Release(elsewhere.session(), {elsewhere.leases().begin(), elsewhere.leases().end()});
  }
}

size_t SharedMemoryServer::leases(uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second.leases.size();
}

}  // namespace sluice::worker
