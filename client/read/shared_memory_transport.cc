#include "client/read/shared_memory_transport.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/read/warnings.h"
#include "service/metrics.h"

namespace sluice::reader {
namespace {

constexpr int kVerdictTimeoutMs = 5000;
// How soon to ask again a worker that did not answer (doubling up to
// kMaxRetryAfter), or to open a new session after one was lost.
constexpr absl::Duration kRetryAfter = absl::Seconds(1);
constexpr absl::Duration kMaxRetryAfter = absl::Seconds(60);
// Times one request is asked again in a new session: regions at least
// double each time, from kInitialSlotBytes to kMaxSlotBytes.
constexpr int kMaxRetries = 8;

// Puts in `request` the leases whose tensors are gone: the session's own,
// and those of sessions it replaced.
void GiveBackLeases(LentTensors& lent, const std::vector<std::shared_ptr<LentTensors>>& retired,
                    proto::GetElementsRequest* request) {
  const std::vector<uint64_t> released = lent.TakeReleased();
  request->mutable_shm_released()->Add(released.begin(), released.end());
  for (const std::shared_ptr<LentTensors>& old : retired) {
    const std::vector<uint64_t> leases = old->TakeReleased();
    if (leases.empty()) continue;
    proto::ReleasedLeases* elsewhere = request->add_shm_released_elsewhere();
    elsewhere->set_session(old->session());
    elsewhere->set_secret(old->secret());
    elsewhere->mutable_leases()->Add(leases.begin(), leases.end());
  }
}

// After a request that may not have reached the worker: its leases go with
// the next one.
void TakeBackLeases(LentTensors& lent, const std::vector<std::shared_ptr<LentTensors>>& retired,
                    const proto::GetElementsRequest& request) {
  lent.GiveBackLater({request.shm_released().begin(), request.shm_released().end()});
  for (const proto::ReleasedLeases& elsewhere : request.shm_released_elsewhere()) {
    for (const std::shared_ptr<LentTensors>& old : retired) {
      if (old->session() == elsewhere.session())
        old->GiveBackLater({elsewhere.leases().begin(), elsewhere.leases().end()});
    }
  }
}

void CountLent(size_t tensors) {
  static Counter& lent = ProcessMetrics()
                             .AddCounter("sluice_client_lent_tensors_total",
                                         "tensors a worker on this host lent (mapped where the worker made "
                                         "them, not copied)")
                             .Get();
  lent.Increment(static_cast<double>(tensors));
}

}  // namespace

// Regions given back by the tensors kept in them, until the transport next
// takes a region. Its own lock, never the transport's: dropping a tensor
// must not wait for a session being set up (RPCs under mu_). Tensors may
// outlive the transport; they then give back to nobody.
struct SharedMemoryTransport::SlotReturns {
  absl::Mutex mu;
  std::vector<std::pair<uint64_t, int>> returned ABSL_GUARDED_BY(mu);  // (session, slot)
};

// A region whose response was decoded in place: keeps it mapped, and gives
// it back when the last tensor that is a view of it goes.
class SharedMemoryTransport::SlotHold {
 public:
  SlotHold(std::shared_ptr<SharedRegion> region, std::shared_ptr<SlotReturns> returns, uint64_t session,
           int slot)
      : region_(std::move(region)), returns_(std::move(returns)), session_(session), slot_(slot) {}
  ~SlotHold() {
    absl::MutexLock lock(&returns_->mu);
    returns_->returned.emplace_back(session_, slot_);
  }

 private:
  const std::shared_ptr<SharedRegion> region_;
  const std::shared_ptr<SlotReturns> returns_;
  const uint64_t session_;
  const int slot_;
};

SharedMemoryTransport::SharedMemoryTransport(const std::string& worker_address,
                                             std::unique_ptr<ElementTransport> tcp)
    : address_(worker_address),
      tcp_(std::move(tcp)),
      worker_(worker_address),
      returns_(std::make_shared<SlotReturns>()) {}

SharedMemoryTransport::~SharedMemoryTransport() {
  absl::MutexLock lock(&mu_);
  CloseLocked();
}

void SharedMemoryTransport::TakeBackReturnedLocked() {
  std::vector<std::pair<uint64_t, int>> returned;
  {
    absl::MutexLock lock(&returns_->mu);
    returned.swap(returns_->returned);
  }
  for (const auto& [session, slot] : returned) {
    if (session == 0 || session != session_) continue;  // an ended session's
    --held_slots_;
    free_slots_.push_back(slot);
  }
}

int64_t SharedMemoryTransport::slot_bytes() {
  absl::MutexLock lock(&mu_);
  return slot_bytes_;
}

int64_t SharedMemoryTransport::shared_responses() {
  absl::MutexLock lock(&mu_);
  return shared_responses_;
}

void SharedMemoryTransport::CloseLocked() {
  if (lent_ != nullptr) retired_.push_back(lent_);
  lent_.reset();
  secret_.clear();
  region_.reset();
  free_slots_.clear();
  lost_slots_ = 0;
  held_slots_ = 0;
  session_ = 0;
}

void SharedMemoryTransport::UseTcpLocked(const std::string& why) {
  CloseLocked();
  state_ = State::kTcp;
  Warn(absl::StrCat("shared memory with worker ", address_, " is off (", why, "): reading over TCP"));
}

void SharedMemoryTransport::SetUpLocked() {
  proto::OpenSharedMemoryRequest request;
  request.set_host_id(HostId());
  if (request.host_id().empty()) {
    state_ = State::kTcp;  // no way to tell which host this is: stay safe, quietly
    return;
  }
  proto::OpenSharedMemoryResponse offer;
  const absl::Status status = worker_.OpenSharedMemory(request, &offer);
  if (absl::IsFailedPrecondition(status)) {
    state_ = State::kTcp;  // another host: TCP is the way, nothing to say
    return;
  }
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
    next_try_ = absl::Now() + retry_after_;  // not up yet, or busy: TCP for now
    retry_after_ = std::min(retry_after_ * 2, kMaxRetryAfter);
    return;
  }
  if (absl::IsUnimplemented(status)) return UseTcpLocked("it is a workerd without shared memory");
  if (!status.ok()) return UseTcpLocked(std::string(status.message()));
  if (!offer.unavailable().empty()) return UseTcpLocked(offer.unavailable());
  if (absl::Status connected = ConnectLocked(offer); !connected.ok()) {
    return UseTcpLocked(absl::StrCat("it is on this host, but ", connected.message()));
  }
  state_ = State::kShared;
}

absl::Status SharedMemoryTransport::ConnectLocked(const proto::OpenSharedMemoryResponse& offer) {
  const int64_t kBytes = kSharedMemorySlots * slot_bytes_;
  absl::StatusOr<UniqueFd> memfd = CreateSealedMemfd(kBytes);
  if (!memfd.ok()) return memfd.status();
  absl::StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::MapSealed(memfd->get(), kBytes);
  if (!region.ok()) return region.status();
  absl::StatusOr<UniqueFd> socket = ConnectAbstract(offer.socket_name());
  if (!socket.ok()) return socket.status();
  // Abstract names are listed in /proc/net/unix: another user could have
  // bound a dead worker's name. The memfd goes only to this user, or root.
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (getsockopt(socket->get(), SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 ||
      (peer.uid != getuid() && peer.uid != 0)) {
    return absl::PermissionDeniedError(absl::StrCat("the socket @", offer.socket_name(), " belongs to uid ",
                                                    peer.uid, ", not to this user"));
  }
  SharedMemoryHello hello{.session = offer.session(), .secret = offer.secret(), .size = kBytes};
  if (absl::Status s = SendHello(socket->get(), hello, memfd->get()); !s.ok()) return s;
  if (absl::Status s = ReceiveVerdict(socket->get(), kVerdictTimeoutMs); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("the worker refused the memory: ", s.message()));
  }
  lent_ = std::make_shared<LentTensors>(*std::move(socket), offer.session(), offer.secret());
  region_ = *std::move(region);
  session_ = offer.session();
  secret_ = offer.secret();
  for (int slot = kSharedMemorySlots - 1; slot >= 0; --slot) free_slots_.push_back(slot);
  return absl::OkStatus();
}

absl::Status SharedMemoryTransport::GetElements(const proto::GetElementsRequest& request,
                                                ElementsResponse* response) {
  return GetElementsFrom(request, response, 0);
}

bool SharedMemoryTransport::GrowLocked(uint64_t session, int64_t needed) {
  if (session_ != session) return state_ != State::kTcp;  // already replaced: try the new one
  if (SharedMemoryFitBytes(kMaxSlotBytes) < needed) return false;
  while (SharedMemoryFitBytes(slot_bytes_) < needed) slot_bytes_ *= 2;
  // Requests still out keep the old region mapped; the worker answers
  // those that name the old session after this into it while tensors lent
  // in it keep its socket open, else with FailedPrecondition.
  CloseLocked();
  state_ = State::kUntried;
  next_try_ = absl::InfinitePast();
  return true;
}

absl::Status SharedMemoryTransport::GetElementsFrom(const proto::GetElementsRequest& request,
                                                    ElementsResponse* response, int depth) {
  int slot = -1;
  int64_t slot_bytes = 0;
  proto::GetElementsRequest shared;
  std::shared_ptr<SharedRegion> region;  // stays mapped while this request uses it
  std::shared_ptr<LentTensors> lent;     // the session's, for this request's lent tensors
  std::vector<std::shared_ptr<LentTensors>> retired;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kUntried && absl::Now() >= next_try_) SetUpLocked();
    TakeBackReturnedLocked();
    if (state_ == State::kShared && !free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
      region = region_;
      shared = request;
      shared.set_compression(proto::COMPRESSION_NONE);  // no wire to save
      shared.set_shm_session(session_);
      shared.set_shm_secret(secret_);
      slot_bytes = slot_bytes_;
      shared.set_shm_offset(slot * slot_bytes);
      shared.set_shm_capacity(slot_bytes);
      shared.set_shm_resizable(true);
      shared.set_shm_lending(true);
      lent = lent_;
      std::erase_if(retired_, [](const std::weak_ptr<LentTensors>& r) { return r.expired(); });
      for (const std::weak_ptr<LentTensors>& r : retired_) {
        if (std::shared_ptr<LentTensors> alive = r.lock(); alive != nullptr)
          retired.push_back(std::move(alive));
      }
    }
  }
  if (slot < 0) return tcp_->GetElements(request, response);
  GiveBackLeases(*lent, retired, &shared);
  absl::Status status = tcp_->GetElements(shared, response);
  // The worker ignores leases it no longer has: give them back again if the
  // request may not have reached it.
  if (!status.ok()) TakeBackLeases(*lent, retired, shared);
  if (absl::IsFailedPrecondition(status)) {
    // The worker no longer knows the session: it wrote nothing. Ask again
    // in the session that replaced it (regions grown meanwhile), or, if it
    // restarted, open a new session later and read this over TCP.
    bool replaced = false;
    {
      absl::MutexLock lock(&mu_);
      replaced = session_ != shared.shm_session() && state_ != State::kTcp;
      if (session_ == shared.shm_session()) {
        CloseLocked();
        state_ = State::kUntried;
        next_try_ = absl::Now() + kRetryAfter;
      }
    }
    if (replaced && depth < kMaxRetries) return GetElementsFrom(request, response, depth + 1);
    return tcp_->GetElements(request, response);
  }
  if (status.ok() && response->shared_memory_needed > 0) {
    // The next element is past the region, and nothing was handed out:
    // grow the regions and ask again; past the largest, ask over TCP. A
    // worker asks only for more than the region it had holds; asking for
    // less would have the reader open sessions for nothing.
    const int64_t needed = response->shared_memory_needed;
    const bool fits = needed <= SharedMemoryFitBytes(slot_bytes);
    bool grown = false;
    {
      absl::MutexLock lock(&mu_);
      if (!fits) grown = GrowLocked(shared.shm_session(), needed);
      if (session_ == shared.shm_session()) free_slots_.push_back(slot);
    }
    *response = ElementsResponse{};
    if (fits) {
      return absl::DataLossError(absl::StrCat("worker ", address_, " says the next element needs ", needed,
                                              " bytes of shared memory, but the region it was offered holds ",
                                              SharedMemoryFitBytes(slot_bytes)));
    }
    if (grown && depth < kMaxRetries) return GetElementsFrom(request, response, depth + 1);
    return tcp_->GetElements(request, response);
  }
  if (!status.ok()) {
    // The worker may still write into the slot: never use it again.
    absl::MutexLock lock(&mu_);
    // Once no region can come back (the rest lost, or held by tensors that
    // may be kept for good), a fresh session.
    if (session_ == shared.shm_session() && ++lost_slots_ + held_slots_ >= kSharedMemorySlots) {
      CloseLocked();
      state_ = State::kUntried;
      next_try_ = absl::Now() + kRetryAfter;
    }
    return status;
  }
  const bool through_memory = response->shared_memory_bytes > 0;
  // Set when the region may keep large tensors in place: it then comes back
  // through the hold, now or once those tensors go.
  std::shared_ptr<SlotHold> hold;
  if (through_memory) {
    const int64_t bytes = response->shared_memory_bytes;
    if (bytes > slot_bytes) {
      lent->Discard(response->lent_tensors);
      status = absl::DataLossError(absl::StrCat("worker ", address_, " says its response is ", bytes,
                                                " bytes of shared memory, past the region's ", slot_bytes));
    } else {
      {
        absl::MutexLock lock(&mu_);
        TakeBackReturnedLocked();
        if (session_ == shared.shm_session() && held_slots_ < kMaxHeldSlots) {
          ++held_slots_;
          hold = std::make_shared<SlotHold>(region, returns_, session_, slot);
        }
      }
      grpc::Slice slice(region->data() + shared.shm_offset(), static_cast<size_t>(bytes),
                        grpc::Slice::STATIC_SLICE);
      grpc::ByteBuffer buffer(&slice, 1);
      std::vector<proto::LentTensor> lent_tensors = std::move(response->lent_tensors);
      *response = ElementsResponse{};
      status = DecodeElementsResponse(&buffer, response, tcp_->frame_specs(), hold);
      CountReceived(*response, bytes);
      if (!status.ok()) {
        status = absl::Status(status.code(), absl::StrCat("the response of worker ", address_,
                                                          " in shared memory: ", status.message()));
        lent->Discard(lent_tensors);
      } else if (!lent_tensors.empty()) {
        CountLent(lent_tensors.size());
        response->lent_tensors = std::move(lent_tensors);
        status = lent->Place(response, address_);
      }
    }
  } else if (!response->lent_tensors.empty()) {
    lent->Discard(response->lent_tensors);
    status = absl::DataLossError(absl::StrCat("worker ", address_,
                                              " lent tensors in a response that did not "
                                              "come through shared memory"));
  }
  const bool returned_by_hold = hold != nullptr;
  hold.reset();  // the region is free now, unless tensors stay in it
  // An answer inline that would not have fit: the next session's regions
  // hold one like it, with room for the headers.
  int64_t needed = 0;
  if (!through_memory && status.ok()) {
    for (const Element& element : response->elements)
      needed += static_cast<int64_t>(ElementWireBound(element));
    needed += needed / 64 + 4096;
  }
  if (through_memory && status.ok() && !response->elements.empty()) {
    static Counter& shared_responses =
        ProcessMetrics()
            .AddCounter("sluice_client_shared_memory_responses_total",
                        "GetElements responses with elements that came through shared memory (the others "
                        "travelled over the connection)")
            .Get();
    shared_responses.Increment();
  }
  absl::MutexLock lock(&mu_);
  if (through_memory) ++shared_responses_;
  if (session_ != shared.shm_session()) return status;
  if (!returned_by_hold) free_slots_.push_back(slot);
  if (needed > slot_bytes_ && slot_bytes_ < kMaxSlotBytes) {
    while (slot_bytes_ < needed && slot_bytes_ < kMaxSlotBytes) slot_bytes_ *= 2;
    // Requests still out keep the old region mapped; the worker answers
    // those that name the old session after this into it while tensors lent
    // in it keep its socket open, else with FailedPrecondition.
    CloseLocked();
    state_ = State::kUntried;
    next_try_ = absl::InfinitePast();
  }
  return status;
}

}  // namespace sluice::reader
