#include "worker/worker_impl.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/grpc_util.h"
#include "service/metrics.h"
#include "service/rpc_auth.h"
#include "service/shared_memory.h"
#include "worker/element_responses.h"
#include "worker/request_checks.h"
#include "worker/shared_memory_server.h"
#include "worker/worker_task.h"

namespace sluice::worker {
namespace {

// How long GetElements waits for a first element before answering empty,
// so that clients poll without spinning.
constexpr absl::Duration kElementWait = absl::Milliseconds(50);
// How often parked requests are checked for the end of their wait.
constexpr absl::Duration kExpiryTick = absl::Milliseconds(5);

}  // namespace

WorkerImpl::WorkerImpl(WorkerConfig config, SharedMemoryServer* shared_memory,
                       absl::Status shared_memory_error)
    : config_(std::move(config)),
      shared_memory_(shared_memory),
      shared_memory_error_(std::move(shared_memory_error)),
      incarnation_(absl::StrCat(absl::Hex(std::random_device()(), absl::kZeroPad8),
                                absl::Hex(std::random_device()(), absl::kZeroPad8))) {
  expire_thread_ = std::thread([this] { ExpireLoop(); });
}

WorkerImpl::~WorkerImpl() { Stop(); }

absl::Status WorkerImpl::Start(const std::string& address) {
  absl::StatusOr<std::string> dispatcher = ParseServiceAddress(config_.dispatcher);
  if (!dispatcher.ok()) return dispatcher.status();
  address_ = address;
  dispatcher_ = std::make_unique<DispatcherClient>(*dispatcher);
  // The first heartbeat registers; it waits for a dispatcher still starting.
  proto::WorkerHeartbeatResponse response;
  absl::Status status = dispatcher_->WorkerHeartbeat(
      HeartbeatRequest(), &response,
      {.retry_for = std::chrono::milliseconds(config_.dispatcher_timeout_ms),
       .what = absl::StrCat("registering with the dispatcher at ", *dispatcher)});
  if (!status.ok()) return status;
  spdlog::info("registered with the dispatcher at {} as {}", *dispatcher, address_);
  {
    absl::MutexLock lock(&mu_);
    registered_ = true;
  }
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  return absl::OkStatus();
}

void WorkerImpl::Stop() {
  std::map<int64_t, std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    tasks.swap(tasks_);
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (expire_thread_.joinable()) expire_thread_.join();
  if (dispatcher_ != nullptr) {
    proto::WorkerShutdownRequest request;
    request.set_worker_address(address_);
    proto::WorkerShutdownResponse response;
    absl::Status status =
        dispatcher_->WorkerShutdown(request, &response, {.attempt_timeout = std::chrono::seconds(2)});
    if (!status.ok())
      spdlog::warn("could not tell the dispatcher about shutdown: {}", std::string(status.message()));
  }
  tasks.clear();  // joins the task threads
}

void WorkerImpl::Drain(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (!stopping_) DrainLocked(why);
}

void WorkerImpl::DrainLocked(const std::string& why) {
  if (draining_) return;
  draining_ = true;
  drain_deadline_ = absl::Now() + absl::Milliseconds(config_.drain_timeout_ms);
  // The tasks are drained once the dispatcher knows (Heartbeat), so that
  // it counts them drained rather than ended on their own.
  heartbeat_now_ = true;
  spdlog::info(
      "draining ({}): no new tasks or splits; {} tasks; leaving once their readers have read them, or after "
      "{} ms (drain_timeout_ms)",
      why, tasks_.size(), config_.drain_timeout_ms);
}

bool WorkerImpl::Drained() {
  absl::MutexLock lock(&mu_);
  if (!draining_) return false;
  if (drained_) return true;
  if (drain_known_ && tasks_.empty()) {
    spdlog::info("drained: every task was read to its end; leaving");
  } else if (absl::Now() >= drain_deadline_) {
    std::vector<int64_t> left;
    for (const auto& [id, task] : tasks_) left.push_back(id);
    spdlog::warn("drain_timeout_ms ({} ms) passed{}; leaving{}", config_.drain_timeout_ms,
                 drain_known_ ? "" : " before the dispatcher answered",
                 left.empty() ? std::string()
                              : absl::StrCat(": what tasks ", absl::StrJoin(left, ", "),
                                             " still hold is lost to their readers (a distributed_epoch "
                                             "read reads their splits again on other workers)"));
  } else {
    return false;
  }
  drained_ = true;
  return true;
}

void WorkerImpl::HeartbeatLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(this, &WorkerImpl::HeartbeatDue),
                           absl::Milliseconds(config_.heartbeat_interval_ms));
      if (stopping_) return;
      heartbeat_now_ = false;
    }
    if (absl::Status status = Heartbeat(); !status.ok())
      spdlog::warn("heartbeat failed: {}", std::string(status.message()));
    std::vector<UnreportedFailure> failures;
    {
      absl::MutexLock lock(&mu_);
      failures.swap(unreported_failures_);
    }
    for (const UnreportedFailure& failure : failures) {
      ReportFinished(failure.task_id, failure.dispatcher_incarnation, failure.status);
    }
  }
}

proto::WorkerHeartbeatRequest WorkerImpl::HeartbeatRequest() const {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address_);
  request.set_incarnation(incarnation_);
  for (const std::string& tag : config_.tags) request.add_tags(tag);
  request.set_elements_sent(elements_sent_.load(std::memory_order_relaxed));
  request.set_bytes_sent(bytes_sent_.load(std::memory_order_relaxed));
  return request;
}

void WorkerImpl::CountSent(int64_t elements, int64_t bytes) {
  static Counter& elements_sent =
      ProcessMetrics().AddCounter("sluice_worker_elements_sent_total", "elements sent to clients").Get();
  static Counter& bytes_sent =
      ProcessMetrics()
          .AddCounter("sluice_worker_bytes_sent_total", "bytes of elements sent to clients")
          .Get();
  elements_sent_.fetch_add(elements, std::memory_order_relaxed);
  bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  elements_sent.Increment(static_cast<double>(elements));
  bytes_sent.Increment(static_cast<double>(bytes));
}

void WorkerImpl::ServeElements(const proto::GetElementsRequest& request, ResponseCallback done) {
  // Held until the response is written, so that the session's memory
  // stays mapped even if its reader hangs up meanwhile.
  absl::StatusOr<std::shared_ptr<SharedRegion>> region = RequestRegion(shared_memory_, request);
  if (!region.ok()) return done(region.status());
  if (*region != nullptr) shared_memory_->ReleaseGivenBack(request);
  // Answered now or later, on whichever thread has the elements.
  GetElements(request,
              [this, request, region = *std::move(region), done = std::move(done)](ElementsReply reply) {
                SentCounts sent;
                absl::StatusOr<grpc::ByteBuffer> bytes =
                    EncodeElementsReply(shared_memory_, region, request, std::move(reply), &sent);
                if (sent.elements > 0 || sent.bytes > 0) CountSent(sent.elements, sent.bytes);
                done(std::move(bytes));
              });
}

absl::Status WorkerImpl::OpenSharedMemory(const proto::OpenSharedMemoryRequest& request,
                                          proto::OpenSharedMemoryResponse* response,
                                          const std::string& client) {
  if (shared_memory_ == nullptr) {
    // Only a reader on this host hears why.
    if (request.host_id().empty() || request.host_id() != HostId()) {
      return absl::FailedPreconditionError(
          "the reader is on another host than this worker, or in another network namespace");
    }
    response->set_unavailable(std::string(shared_memory_error_.message()));
    return absl::OkStatus();
  }
  absl::StatusOr<proto::OpenSharedMemoryResponse> offer = shared_memory_->Offer(request.host_id(), client);
  if (!offer.ok()) return offer.status();
  *response = *std::move(offer);
  return absl::OkStatus();
}

absl::Status WorkerImpl::Heartbeat() {
  proto::WorkerHeartbeatRequest request = HeartbeatRequest();
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, task] : tasks_) {
      request.add_current_tasks(id);
      // For the dispatcher's autoscaling: how busy each pipeline has been.
      const PipelineLoad::Seconds load = task->Load();
      proto::TaskLoad* reported = request.add_task_loads();
      reported->set_task_id(id);
      reported->set_busy_seconds(load.busy);
      reported->set_idle_seconds(load.idle);
    }
    request.set_draining(draining_);
  }
  proto::WorkerHeartbeatResponse response;
  if (absl::Status status = dispatcher_->WorkerHeartbeat(std::move(request), &response); !status.ok()) {
    return status;
  }
  // Declared before the lock, so removed tasks are destroyed (their threads
  // joined) after it is released.
  std::vector<std::shared_ptr<Task>> removed;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::OkStatus();
  // Before the new tasks, which then start drained.
  if (response.drain() && !drain_known_) {
    DrainLocked("the dispatcher asked (sluice drain)");
    drain_known_ = true;
    for (const auto& [id, task] : tasks_) task->Drain();
  }
  DropOtherIncarnationsLocked(response.dispatcher_incarnation(), &removed);
  for (const proto::TaskDef& def : response.new_tasks()) StartTaskLocked(def, &removed);
  for (int64_t id : response.tasks_to_delete()) {
    auto it = tasks_.find(id);
    if (it == tasks_.end()) continue;
    removed.push_back(it->second);
    tasks_.erase(it);
  }
  return absl::OkStatus();
}

void WorkerImpl::DropOtherIncarnationsLocked(const std::string& incarnation,
                                             std::vector<std::shared_ptr<Task>>* removed) {
  if (incarnation.empty()) return;
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    // A task without one came from no dispatcher of this release (a test's
    // push): no incarnation claims its id.
    if (it->second->dispatcher_incarnation().empty() || it->second->dispatcher_incarnation() == incarnation) {
      ++it;
      continue;
    }
    spdlog::warn("task {} is of a dispatcher that restarted without its state; dropped", it->first);
    removed->push_back(it->second);
    it = tasks_.erase(it);
  }
}

void WorkerImpl::StartTaskLocked(const proto::TaskDef& def, std::vector<std::shared_ptr<Task>>* removed) {
  // A dispatcher that restarted without its state gives old ids to new
  // tasks: the old ones go first.
  DropOtherIncarnationsLocked(def.dispatcher_incarnation(), removed);
  if (tasks_.contains(def.task_id())) return;
  auto task = std::make_shared<Task>(
      def, config_, dispatcher_.get(),
      [this, incarnation = def.dispatcher_incarnation()](int64_t id, const absl::Status& status) {
        ReportFinished(id, incarnation, status);
      });
  // Given before the dispatcher knew of the drain: it ends at once, cleanly.
  if (drain_known_) task->Drain();
  if (absl::Status status = task->Start(); !status.ok()) {
    // Reported by the heartbeat thread: not here, under mu_.
    spdlog::error("task {} failed: {}", def.task_id(), std::string(status.message()));
    unreported_failures_.push_back({def.task_id(), def.dispatcher_incarnation(), status});
  }
  tasks_[def.task_id()] = task;
  spdlog::info("started task {} of iteration {}", def.task_id(), def.iteration_id());
}

absl::Status WorkerImpl::ProcessTask(const proto::ProcessTaskRequest& request) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  if (absl::Status s = CheckTaskDef(request.task()); !s.ok()) return s;
  // Destroyed (their threads joined) after the lock is released.
  std::vector<std::shared_ptr<Task>> removed;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError(absl::StrCat("worker ", address_, " is shutting down"));
  // Before registration there is no dispatcher stub for the task to use;
  // the first heartbeat will hand the task over again.
  if (!registered_) return absl::UnavailableError("worker is not registered yet");
  StartTaskLocked(request.task(), &removed);
  return absl::OkStatus();
}

void WorkerImpl::ReportFinished(int64_t task_id, const std::string& dispatcher_incarnation,
                                const absl::Status& status) {
  proto::WorkerUpdatesRequest request;
  request.set_worker_address(address_);
  request.set_dispatcher_incarnation(dispatcher_incarnation);
  request.add_finished_tasks(task_id);
  // The pipeline's failure, for the dispatcher to fail the iteration with;
  // a task cancelled or cut off from the dispatcher is not the pipeline's.
  if (!status.ok() && !absl::IsCancelled(status) && !absl::IsUnavailable(status)) {
    proto::TaskFailure* failure = request.add_failed_tasks();
    failure->set_task_id(task_id);
    failure->set_code(static_cast<int>(status.code()));
    failure->set_message(std::string(status.message()));
  }
  proto::WorkerUpdatesResponse response;
  absl::Status reported =
      dispatcher_->WorkerUpdates(std::move(request), &response, {.retry_for = kDispatcherRetryFor});
  if (!reported.ok())
    spdlog::warn("could not report task {} finished: {}", task_id, std::string(reported.message()));
}

void WorkerImpl::GetElements(const proto::GetElementsRequest& request, ElementsCallback done) {
  ElementsReply reply;
  reply.compression = request.compression();
  if (reply.status = CheckVersion(request.version()); !reply.status.ok()) return done(std::move(reply));
  if (reply.status = CheckGetElementsRequest(request); !reply.status.ok()) {
    reply.compression = proto::COMPRESSION_NONE;
    return done(std::move(reply));
  }
  std::shared_ptr<Task> task;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      reply.status = absl::UnavailableError(absl::StrCat("worker ", address_, " is shutting down"));
      return done(std::move(reply));
    }
    auto it = tasks_.find(request.task_id());
    // Not here yet: the push (ProcessTask) or the next heartbeat brings it.
    if (it == tasks_.end()) {
      reply.task_not_here = true;
      return done(std::move(reply));
    }
    task = it->second;
  }
  // A dispatcher of this release always sets the secret: ids are
  // sequential, so the id alone would let any client read or drain any
  // task, another tenant's included. Answered as a task not here is, so
  // that probing ids does not tell where another's task runs; the
  // operator hears of it here.
  if (!SameSecret(request.task_secret(), task->read_secret())) {
    const int64_t now = absl::ToUnixNanos(absl::Now());
    int64_t last = last_secret_warning_ns_.load(std::memory_order_relaxed);
    if (now - last > absl::ToInt64Nanoseconds(absl::Seconds(10)) &&
        last_secret_warning_ns_.compare_exchange_strong(last, now)) {
      spdlog::warn(
          "GetElements for task {} with a {} task_secret: answered as for a task not here (at most one "
          "such line every 10 s)",
          request.task_id(), request.task_secret().empty() ? "missing" : "wrong");
    }
    reply.task_not_here = true;
    return done(std::move(reply));
  }
  if (task->coordinated()) {
    return task->TakeRound(request.round(), request.consumer_index(), request.others_past_round(),
                           request.compression(), absl::Now() + kElementWait, std::move(done));
  }
  // A reader that grows its shared memory when told gets what its region
  // holds, so that its answers never fall back to travelling inline; one
  // that takes lent tensors, what its region holds besides them.
  ResponseFit fit;
  if (request.shm_session() != 0 && request.shm_resizable()) {
    fit.bytes = std::min(kMaxResponseBytes, SharedMemoryFitBytes(request.shm_capacity()));
    fit.lending = request.shm_lending();
  }
  task->Take(std::max(1, request.max_elements()), request.compression(), fit, absl::Now() + kElementWait,
             std::move(done), request.trainer_id());
}

void WorkerImpl::ExpireLoop() {
  while (true) {
    std::vector<std::shared_ptr<Task>> tasks;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), kExpiryTick);
      if (stopping_) return;
      for (const auto& [id, task] : tasks_) tasks.push_back(task);
    }
    const absl::Time now = absl::Now();
    for (const auto& task : tasks) task->ExpireWaiters(now);
  }
}

absl::Status WorkerImpl::GetStatus(const proto::WorkerStatusRequest&, proto::WorkerStatusResponse* response) {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    response->set_address(address_);
    for (const auto& [id, task] : tasks_) {
      response->add_tasks(id);
      tasks.push_back(task);
    }
  }
  int64_t elements = 0;
  int64_t bytes = 0;
  for (const auto& task : tasks) task->Buffered(&elements, &bytes);
  response->set_buffered_elements(elements);
  response->set_buffered_bytes(bytes);
  return absl::OkStatus();
}

}  // namespace sluice::worker
