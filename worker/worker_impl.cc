#include "worker/worker_impl.h"

#include <spdlog/spdlog.h>

#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/proto_convert.h"
#include "pipeline/builder.h"
#include "pipeline/sharding.h"
#include "pipeline/split_provider.h"
#include "worker/split_prefetcher.h"

namespace sluice::worker {
namespace {

constexpr auto kRpcTimeout = std::chrono::seconds(10);
constexpr auto kRetryFor = std::chrono::seconds(60);
// How long GetElements waits for a first element before answering empty,
// so that clients poll without spinning.
constexpr absl::Duration kElementWait = absl::Milliseconds(50);
// How often parked requests are checked for the end of their wait.
constexpr absl::Duration kExpiryTick = absl::Milliseconds(5);

int64_t ElementBytes(const Element& element) {
  int64_t bytes = 0;
  for (const Tensor& t : element.components) bytes += static_cast<int64_t>(t.ByteSize());
  return bytes;
}

// Fetches a distributed_epoch task's splits from the dispatcher.
SplitPrefetcher::FetchFn FetchSplitsFrom(proto::DispatcherService::Stub* dispatcher, int64_t iteration_id,
                                         int64_t task_id) {
  // Numbers the requests, so that the dispatcher answers a retry with the
  // splits it leased the first time. One fetch thread calls this.
  auto last_request = std::make_shared<int64_t>(0);
  return [=](int max_splits, const std::function<bool()>& cancelled, std::vector<Split>* splits, bool* end) {
    proto::GetSplitsRequest request;
    *request.mutable_version() = CurrentVersion();
    request.set_iteration_id(iteration_id);
    request.set_task_id(task_id);
    request.set_max_splits(max_splits);
    request.set_request_id(++*last_request);
    proto::GetSplitsResponse response;
    absl::Status status = CallWithRetries(
        [&](grpc::ClientContext* context) { return dispatcher->GetSplits(context, request, &response); },
        kRpcTimeout, kRetryFor, "GetSplits", cancelled);
    if (!status.ok()) return status;
    for (const auto& s : response.splits()) splits->push_back(SplitFromMessage(s));
    *end = response.end_of_splits();
    return absl::OkStatus();
  };
}

// Hands out one split, then says end: an exactly_once task runs its
// pipeline once per split, so it knows where each element came from.
class OneSplitProvider : public SplitProvider {
 public:
  explicit OneSplitProvider(Split split) : split_(split) {}
  absl::Status GetNext(Split* split, bool* end_of_splits) override {
    *end_of_splits = given_;
    *split = split_;
    given_ = true;
    return absl::OkStatus();
  }
  absl::Status Reset() override {
    given_ = false;
    return absl::OkStatus();
  }
  std::string Save() const override { return given_ ? "1" : "0"; }
  absl::Status Restore(const std::string& state) override {
    given_ = state == "1";
    return absl::OkStatus();
  }

 private:
  const Split split_;
  bool given_ = false;
};

}  // namespace

class WorkerImpl::Task {
 public:
  Task(proto::TaskDef def, const WorkerConfig& config, proto::DispatcherService::Stub* dispatcher,
       std::function<void(int64_t)> on_finished)
      : def_(std::move(def)),
        max_elements_(config.buffer_elements),
        max_bytes_(config.buffer_bytes),
        dispatcher_(dispatcher),
        on_finished_(std::move(on_finished)) {}

  ~Task() {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    if (splits_ != nullptr) splits_->Cancel();
    if (thread_.joinable()) thread_.join();
    // Every parked request gets its answer: an empty one, as for a task
    // this worker does not have.
    ExpireWaiters(absl::InfiniteFuture());
  }

  int64_t id() const { return def_.task_id(); }

  // Builds the pipeline and starts producing. A pipeline that fails to
  // build makes a task whose readers get that error.
  void Start() {
    if (def_.processing_mode() == proto::DISTRIBUTED_EPOCH) {
      // Started now, so the first splits arrive while the pipeline builds.
      splits_ = std::make_unique<SplitPrefetcher>(
          FetchSplitsFrom(dispatcher_, def_.iteration_id(), def_.task_id()), SplitPrefetcher::Options{});
    }
    thread_ = std::thread([this] { Run(); });
  }

  // Answers at once when there are elements or the pipeline has ended;
  // otherwise parks the request until there are, or until `deadline`.
  void Take(int max_elements, proto::WireCompression compression, absl::Time deadline,
            ElementsCallback done) {
    ElementsReply reply;
    {
      absl::MutexLock lock(&mu_);
      if (!HasOutput()) {
        waiters_.push_back({max_elements, compression, deadline, std::move(done)});
        return;
      }
      reply = TakeLocked(max_elements, compression);
    }
    done(std::move(reply));
  }

  bool coordinated() const { return def_.num_consumers() > 0; }

  // Coordinated reads: consumer `consumer`'s element of `round`. A round
  // is assembled, from the next num_consumers elements, once every
  // consumer is waiting for it here, or once one says that another consumer
  // already has its element of the round (`others_past_round`: their
  // worker was lost); until then (or until `deadline`) the request is
  // parked.
  void TakeRound(int64_t round, int64_t consumer, bool others_past_round, proto::WireCompression compression,
                 absl::Time deadline, ElementsCallback done) {
    if (consumer < 0 || consumer >= def_.num_consumers()) {
      ElementsReply reply;
      reply.status = absl::InvalidArgumentError(absl::StrCat(
          "consumer_index ", consumer, " is out of range for ", def_.num_consumers(), " consumers"));
      return done(std::move(reply));
    }
    std::vector<std::pair<ElementsCallback, ElementsReply>> ready;
    {
      absl::MutexLock lock(&mu_);
      Round& r = rounds_[round];
      r.others_past |= others_past_round;
      r.waiters.push_back({consumer, compression, deadline, std::move(done)});
      AssembleRoundsLocked(&ready);
    }
    for (auto& [callback, reply] : ready) callback(std::move(reply));
  }

  // Answers, empty, the parked requests whose wait is over.
  void ExpireWaiters(absl::Time now) {
    std::vector<std::pair<ElementsCallback, ElementsReply>> expired;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [index, round] : rounds_) {
        for (auto it = round.waiters.begin(); it != round.waiters.end();) {
          if (it->deadline > now) {
            ++it;
            continue;
          }
          ElementsReply reply;
          reply.compression = it->compression;
          expired.emplace_back(std::move(it->done), std::move(reply));
          it = round.waiters.erase(it);
        }
      }
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->deadline > now) {
          ++it;
          continue;
        }
        ElementsReply reply;
        reply.compression = it->compression;
        reply.first_index = handed_out_;
        expired.emplace_back(std::move(it->done), std::move(reply));
        it = waiters_.erase(it);
      }
    }
    for (auto& [done, reply] : expired) done(std::move(reply));
  }

  void Buffered(int64_t* elements, int64_t* bytes) {
    absl::MutexLock lock(&mu_);
    *elements += static_cast<int64_t>(buffer_.size());
    *bytes += bytes_;
  }

 private:
  struct Waiter {
    int max_elements;
    proto::WireCompression compression;
    absl::Time deadline;
    ElementsCallback done;
  };

  bool HasOutput() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !buffer_.empty() || done_; }

  struct RoundWaiter {
    int64_t consumer;
    proto::WireCompression compression;
    absl::Time deadline;
    ElementsCallback done;
  };
  struct Round {
    std::vector<Element> elements;  // one per consumer, once assembled
    bool assembled = false;
    // A consumer has its element of this round from another worker.
    bool others_past = false;
    std::vector<RoundWaiter> waiters;
    // Whether every consumer is waiting here now. Only waiting ones count:
    // one whose request ran out may ask another worker next (its task list
    // changed), and a round assembled without it here would never reach it.
    bool AllWaiting(size_t num_consumers) const {
      std::set<int64_t> waiting;
      for (const RoundWaiter& waiter : waiters) waiting.insert(waiter.consumer);
      return waiting.size() == num_consumers;
    }
  };
  // Assembled rounds kept for consumers that ask again (a lost answer).
  static constexpr size_t kKeptRounds = 256;

  // Assembles, in round order, every round that all consumers wait for
  // (or that a consumer marked as passed by others), and answers the
  // parked requests of assembled rounds.
  void AssembleRoundsLocked(std::vector<std::pair<ElementsCallback, ElementsReply>>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t n = static_cast<size_t>(def_.num_consumers());
    for (auto& [index, round] : rounds_) {
      if (!round.assembled && (round.others_past || round.AllWaiting(n)) && buffer_.size() >= n) {
        for (size_t i = 0; i < n; ++i) {
          bytes_ -= ElementBytes(buffer_.front());
          round.elements.push_back(std::move(buffer_.front()));
          buffer_.pop_front();
        }
        handed_out_ += static_cast<int64_t>(n);
        round.assembled = true;
        ++assembled_rounds_;
      }
      const bool failed = !round.assembled && done_ && buffer_.size() < n;
      if (!round.assembled && !failed) continue;
      for (RoundWaiter& waiter : round.waiters) {
        ElementsReply reply;
        reply.compression = waiter.compression;
        if (round.assembled) {
          reply.elements.push_back(round.elements[waiter.consumer]);  // shares the tensors' buffers
        } else if (!status_.ok()) {
          reply.status = status_;
        } else {
          reply.end_of_sequence = true;
        }
        ready->emplace_back(std::move(waiter.done), std::move(reply));
      }
      round.waiters.clear();
    }
    // Forgets the oldest rounds, assembled or abandoned, beyond what is kept.
    while (rounds_.size() > kKeptRounds && rounds_.begin()->second.waiters.empty())
      rounds_.erase(rounds_.begin());
  }

  ElementsReply TakeLocked(int max_elements, proto::WireCompression compression)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ElementsReply reply;
    reply.compression = compression;
    reply.first_index = handed_out_;
    while (!buffer_.empty() && static_cast<int>(reply.elements.size()) < max_elements) {
      bytes_ -= ElementBytes(buffer_.front());
      reply.elements.push_back(std::move(buffer_.front()));
      buffer_.pop_front();
      if (!tags_.empty()) {
        reply.tags.split_seqs.push_back(tags_.front().first);
        reply.tags.split_positions.push_back(tags_.front().second);
        tags_.pop_front();
      }
    }
    handed_out_ += static_cast<int64_t>(reply.elements.size());
    // A split is wholly sent once every element produced from it is.
    while (!completions_.empty() && completions_.front().first <= handed_out_) {
      reply.tags.completed_splits.push_back(completions_.front().second);
      completions_.pop_front();
    }
    if (buffer_.empty() && done_) {
      // A failed pipeline's error comes after its last elements.
      if (!status_.ok() && reply.elements.empty()) reply.status = status_;
      if (status_.ok()) reply.end_of_sequence = true;
    }
    return reply;
  }

  // Answers parked requests while there is output; the answers are sent
  // (encoded, even) after the lock is released.
  void ServeWaiters() {
    std::vector<std::pair<ElementsCallback, ElementsReply>> served;
    {
      absl::MutexLock lock(&mu_);
      if (coordinated()) AssembleRoundsLocked(&served);
      while (!waiters_.empty() && HasOutput()) {
        Waiter waiter = std::move(waiters_.front());
        waiters_.pop_front();
        served.emplace_back(std::move(waiter.done), TakeLocked(waiter.max_elements, waiter.compression));
      }
    }
    for (auto& [done, reply] : served) done(std::move(reply));
  }
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // A coordinated round needs num_consumers elements at once.
    const int64_t max_elements = std::max(max_elements_, 2 * def_.num_consumers());
    return cancelled_ || (static_cast<int64_t>(buffer_.size()) < max_elements && bytes_ < max_bytes_);
  }

  void Run() {
    absl::Status status = Produce();
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;
      status_ = status;
      done_ = true;
    }
    ServeWaiters();
    if (!status.ok()) spdlog::error("task {} failed: {}", id(), std::string(status.message()));
    on_finished_(id());
  }

  // Waits for room in the buffer, before the pipeline is asked for an
  // element, so that it runs no further ahead than the buffer allows.
  absl::Status WaitForRoom() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Task::HasRoom));
    if (cancelled_) return absl::CancelledError("task cancelled");
    return absl::OkStatus();
  }

  // Adds an element (with its tag in exactly_once) and serves parked
  // requests.
  void Push(Element element, std::optional<std::pair<int64_t, int64_t>> tag) {
    const int64_t bytes = ElementBytes(element);
    bool serve = false;
    {
      absl::MutexLock lock(&mu_);
      bytes_ += bytes;
      buffer_.push_back(std::move(element));
      if (tag.has_value()) tags_.push_back(*tag);
      ++produced_;
      serve = !waiters_.empty() || !rounds_.empty();
    }
    if (serve) ServeWaiters();
  }

  // exactly_once: the pipeline runs once per split, from the split's
  // start, so a split that a lost worker had begun gives the same elements
  // at the same positions when rerun here.
  absl::Status ProducePerSplit(const DatasetPtr& dataset) {
    while (true) {
      Split run;
      bool end = false;
      if (absl::Status s = splits_->GetNext(&run, &end); !s.ok()) return s;
      if (end) return absl::OkStatus();
      for (int64_t index = 0; index < run.count; ++index) {
        if (absl::Status s = ProduceOneSplit(dataset, SplitRunPart(run, index, 1)); !s.ok()) return s;
      }
    }
  }

  absl::Status ProduceOneSplit(const DatasetPtr& dataset, const Split& split) {
    OneSplitProvider one(split);
    IteratorContext context;
    context.split_provider = &one;
    absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = dataset->MakeIterator(context);
    if (!iterator.ok()) return iterator.status();
    for (int64_t position = 0;; ++position) {
      if (absl::Status s = WaitForRoom(); !s.ok()) return s;
      Element element;
      bool end = false;
      if (absl::Status s = (*iterator)->GetNext(&element, &end); !s.ok()) return s;
      if (end) break;
      Push(std::move(element), std::make_pair(split.seq, position));
    }
    absl::MutexLock lock(&mu_);
    completions_.emplace_back(produced_, split.seq);
    return absl::OkStatus();
  }

  absl::Status Produce() {
    proto::DatasetDef def = def_.dataset();
    if (IsStaticPolicy(def_.sharding_policy())) {
      if (absl::Status s =
              ShardForWorker(def_.sharding_policy(), def_.num_shards(), def_.shard_index(), &def);
          !s.ok()) {
        return s;
      }
    }
    absl::StatusOr<DatasetPtr> dataset = BuildDataset(def);
    if (!dataset.ok()) return dataset.status();
    if (def_.exactly_once() && splits_ != nullptr) return ProducePerSplit(*dataset);
    IteratorContext context;
    context.split_provider = splits_.get();  // null in parallel_epochs
    absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*dataset)->MakeIterator(context);
    if (!iterator.ok()) return iterator.status();
    while (true) {
      if (absl::Status s = WaitForRoom(); !s.ok()) return s;
      Element element;
      bool end = false;
      if (absl::Status status = (*iterator)->GetNext(&element, &end); !status.ok()) return status;
      if (end) return absl::OkStatus();
      Push(std::move(element), std::nullopt);
    }
  }

  const proto::TaskDef def_;
  const int64_t max_elements_;
  const int64_t max_bytes_;
  proto::DispatcherService::Stub* const dispatcher_;
  const std::function<void(int64_t)> on_finished_;
  std::unique_ptr<SplitPrefetcher> splits_;  // set before the task thread starts

  absl::Mutex mu_;
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads, by round.
  std::map<int64_t, Round> rounds_ ABSL_GUARDED_BY(mu_);
  int64_t assembled_rounds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t handed_out_ ABSL_GUARDED_BY(mu_) = 0;  // elements taken from buffer_ so far
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;    // elements put in buffer_ so far
  // exactly_once: (split seq, position) of each buffered element, and
  // (elements produced when the split ended, split seq) of finished splits
  // not yet reported.
  std::deque<std::pair<int64_t, int64_t>> tags_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, int64_t>> completions_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

WorkerImpl::WorkerImpl(WorkerConfig config)
    : config_(std::move(config)),
      incarnation_(absl::StrCat(absl::Hex(std::random_device()(), absl::kZeroPad8),
                                absl::Hex(std::random_device()(), absl::kZeroPad8))) {
  expire_thread_ = std::thread([this] { ExpireLoop(); });
}

WorkerImpl::~WorkerImpl() { Stop(); }

absl::Status WorkerImpl::Start(const std::string& address) {
  absl::StatusOr<std::string> dispatcher = ParseServiceAddress(config_.dispatcher);
  if (!dispatcher.ok()) return dispatcher.status();
  address_ = address;
  channel_ = MakeChannel(*dispatcher);
  dispatcher_ = proto::DispatcherService::NewStub(channel_);
  // The first heartbeat registers; it waits for a dispatcher still starting.
  proto::WorkerHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address(address_);
  request.set_incarnation(incarnation_);
  for (const std::string& tag : config_.tags) request.add_tags(tag);
  proto::WorkerHeartbeatResponse response;
  absl::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) { return dispatcher_->WorkerHeartbeat(context, request, &response); },
      kRpcTimeout, std::chrono::milliseconds(config_.dispatcher_timeout_ms),
      absl::StrCat("registering with the dispatcher at ", *dispatcher));
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
    *request.mutable_version() = CurrentVersion();
    request.set_worker_address(address_);
    proto::WorkerShutdownResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::Status status = dispatcher_->WorkerShutdown(&context, request, &response);
    if (!status.ok())
      spdlog::warn("could not tell the dispatcher about shutdown: {}", status.error_message());
  }
  tasks.clear();  // joins the task threads
}

void WorkerImpl::HeartbeatLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(config_.heartbeat_interval_ms));
      if (stopping_) return;
    }
    if (absl::Status status = Heartbeat(); !status.ok())
      spdlog::warn("heartbeat failed: {}", std::string(status.message()));
  }
}

absl::Status WorkerImpl::Heartbeat() {
  proto::WorkerHeartbeatRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address(address_);
  request.set_incarnation(incarnation_);
  for (const std::string& tag : config_.tags) request.add_tags(tag);
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, task] : tasks_) request.add_current_tasks(id);
  }
  proto::WorkerHeartbeatResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
  if (absl::Status status = FromGrpcStatus(dispatcher_->WorkerHeartbeat(&context, request, &response));
      !status.ok()) {
    return status;
  }
  // Declared before the lock, so removed tasks are destroyed (their threads
  // joined) after it is released.
  std::vector<std::shared_ptr<Task>> removed;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::OkStatus();
  for (const proto::TaskDef& def : response.new_tasks()) StartTaskLocked(def);
  for (int64_t id : response.tasks_to_delete()) {
    auto it = tasks_.find(id);
    if (it == tasks_.end()) continue;
    removed.push_back(it->second);
    tasks_.erase(it);
  }
  return absl::OkStatus();
}

void WorkerImpl::StartTaskLocked(const proto::TaskDef& def) {
  if (tasks_.contains(def.task_id())) return;
  auto task =
      std::make_shared<Task>(def, config_, dispatcher_.get(), [this](int64_t id) { ReportFinished(id); });
  task->Start();
  tasks_[def.task_id()] = task;
  spdlog::info("started task {} of iteration {}", def.task_id(), def.iteration_id());
}

absl::Status WorkerImpl::ProcessTask(const proto::ProcessTaskRequest& request) {
  if (absl::Status s = CheckVersion(request.version()); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError(absl::StrCat("worker ", address_, " is shutting down"));
  // Before registration there is no dispatcher stub for the task to use;
  // the first heartbeat will hand the task over again.
  if (!registered_) return absl::UnavailableError("worker is not registered yet");
  StartTaskLocked(request.task());
  return absl::OkStatus();
}

void WorkerImpl::ReportFinished(int64_t task_id) {
  proto::WorkerUpdatesRequest request;
  *request.mutable_version() = CurrentVersion();
  request.set_worker_address(address_);
  request.add_finished_tasks(task_id);
  proto::WorkerUpdatesResponse response;
  absl::Status status = CallWithRetries(
      [&](grpc::ClientContext* context) { return dispatcher_->WorkerUpdates(context, request, &response); },
      kRpcTimeout, kRetryFor, "WorkerUpdates");
  if (!status.ok())
    spdlog::warn("could not report task {} finished: {}", task_id, std::string(status.message()));
}

void WorkerImpl::GetElements(const proto::GetElementsRequest& request, ElementsCallback done) {
  ElementsReply reply;
  reply.compression = request.compression();
  if (reply.status = CheckVersion(request.version()); !reply.status.ok()) return done(std::move(reply));
  std::shared_ptr<Task> task;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      reply.status = absl::UnavailableError(absl::StrCat("worker ", address_, " is shutting down"));
      return done(std::move(reply));
    }
    auto it = tasks_.find(request.task_id());
    // Not here yet: the push (ProcessTask) or the next heartbeat brings it.
    if (it == tasks_.end()) return done(std::move(reply));
    task = it->second;
  }
  if (task->coordinated()) {
    return task->TakeRound(request.round(), request.consumer_index(), request.others_past_round(),
                           request.compression(), absl::Now() + kElementWait, std::move(done));
  }
  task->Take(std::max(1, request.max_elements()), request.compression(), absl::Now() + kElementWait,
             std::move(done));
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
