#include "client/data_service_dataset.h"

#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/definition_checks.h"
#include "client/element_transport.h"
#include "client/epoch_losses.h"
#include "client/split_position_filter.h"
#include "client/warnings.h"
#include "common/proto_convert.h"
#include "pipeline/builder.h"
#include "pipeline/sharding.h"
#include "service/compression.h"
#include "service/dispatcher_client.h"
#include "service/grpc_util.h"
#include "service/job_params.h"
#include "service/malloc_tuning.h"
#include "sluice/service.grpc.pb.h"

namespace sluice {
namespace {

// How long a client waits for a dispatcher that is not up yet, by default.
constexpr std::chrono::milliseconds kDefaultDispatcherDeadline(60000);
constexpr absl::Duration kHeartbeatInterval = absl::Milliseconds(100);
constexpr int64_t kDefaultMaxOutstanding = 64;
// Elements asked of a worker in one request, at most.
constexpr int kMaxElementsPerRequest = 64;
// Requests ask for about this many bytes, judged from the elements seen so
// far, so that a response is decoded while its bytes are still in the CPU's
// cache. With 1 MiB elements, 4 MiB responses ran at 2.5 GB/s, 16 MiB ones
// at 1.9 GB/s and 1 MiB ones at 2.0 GB/s (bench/README.md).
constexpr int64_t kTargetResponseBytes = 4 << 20;
// Requests in flight per task, so that one round trip's latency overlaps
// the next: the worker encodes while the previous response travels.
constexpr int kRequestsInFlightPerTask = 4;
// A worker unreachable this long is reported to the dispatcher, which
// declares it lost if it has stopped heartbeating too.
constexpr absl::Duration kUnreachableReportAfter = absl::Seconds(1);

// Errors of a worker that is slow, restarting or leaving: retried until the
// dispatcher stops listing its task.
bool IsTransient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) || absl::IsCancelled(status) ||
         absl::IsAborted(status);
}

class DataServiceDataset : public DatasetBase {
 public:
  DataServiceDataset(std::shared_ptr<DispatcherClient> service, proto::JobParams params, ElementSpec spec,
                     int64_t cardinality, int64_t max_outstanding, std::chrono::milliseconds deadline,
                     proto::WireCompression compression, int64_t consumer_index, bool allow_partial)
      : consumer_index_(consumer_index),
        allow_partial_(allow_partial),
        deadline_(deadline),
        compression_(compression),
        service_(std::move(service)),
        params_(std::move(params)),
        spec_(std::move(spec)),
        cardinality_(cardinality),
        max_outstanding_(max_outstanding) {}

  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override {
    // One repetition of a shared job may be split between consumers.
    return params_.job_name().empty() && params_.processing_mode() == proto::DISTRIBUTED_EPOCH
               ? cardinality_
               : kUnknownCardinality;
  }
  std::string DebugName() const override { return "distribute"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext&) const override;

 private:
  class Iterator;

  const int64_t consumer_index_;  // coordinated reads; -1 otherwise
  const bool allow_partial_;
  const std::chrono::milliseconds deadline_;
  const proto::WireCompression compression_;
  const std::shared_ptr<DispatcherClient> service_;
  const proto::JobParams params_;
  const ElementSpec spec_;
  const int64_t cardinality_;
  const int64_t max_outstanding_;
  mutable std::atomic<int64_t> repetitions_{0};
};

// Reads one iteration: a heartbeat thread learns the tasks, a fetch thread
// per task pulls elements into one buffer. Buffered plus requested elements
// never exceed max_outstanding, which bounds memory.
class DataServiceDataset::Iterator : public IteratorBase {
 public:
  // `sole_reader`: no other consumer shares the job (it has no name).
  // `losses`: set for a parallel_epochs read, whose lost tasks cut it short.
  // `dispatcher_deadline`: how long the dispatcher may go unheard before
  // the read fails.
  Iterator(std::shared_ptr<DispatcherClient> service, int64_t max_outstanding, int64_t iteration_client_id,
           proto::WireCompression compression, int64_t consumer_index, bool sole_reader,
           std::optional<EpochLosses> losses, std::chrono::milliseconds dispatcher_deadline)
      : service_(std::move(service)),
        max_outstanding_(max_outstanding),
        client_id_(iteration_client_id),
        compression_(compression),
        dispatcher_deadline_(absl::FromChrono(dispatcher_deadline)),
        positions_(sole_reader),
        consumer_index_(consumer_index),
        losses_(std::move(losses)) {
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
    if (coordinated()) rounds_ = std::thread([this] { RoundLoop(); });
  }

  ~Iterator() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    heartbeat_.join();
    if (rounds_.joinable()) rounds_.join();
    for (auto& [id, task] : tasks_) {
      for (std::thread& thread : task.threads) thread.join();
    }
    proto::ReleaseIterationClientRequest request;
    request.set_iteration_client_id(client_id_);
    proto::ReleaseIterationClientResponse response;
    // Best effort: a client not released is released after client_timeout_ms.
    (void)service_->ReleaseIterationClient(request, &response, {.attempt_timeout = std::chrono::seconds(2)});
  }

  absl::Status GetNext(Element* element, bool* end) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Iterator::CanReturn));
    if (!buffer_.empty()) {
      *element = std::move(buffer_.front());
      buffer_.pop_front();
      *end = false;
      return absl::OkStatus();
    }
    if (!status_.ok()) return status_;
    if (!positions_.gapped().empty()) {
      // A response was lost in transit while its worker lived on, so no
      // rerun filled the gap: say so rather than end short.
      return absl::DataLossError(absl::StrCat("exactly_once: elements of split ",
                                              *positions_.gapped().begin(),
                                              " were lost in transit and never read again"));
    }
    // A read ends normally only when it delivered everything its mode
    // promises (docs/design.md, "What a read promises"); judged once, so
    // that an accepted partial epoch warns once.
    if (!end_status_.has_value()) {
      end_status_ = losses_.has_value()
                        ? losses_->Finish(static_cast<int64_t>(tasks_.size()) + unseen_lost_tasks_)
                        : absl::OkStatus();
    }
    if (!end_status_->ok()) return *end_status_;
    *end = true;
    return absl::OkStatus();
  }

 private:
  struct TaskState {
    std::string worker_address;
    std::shared_ptr<ElementTransport> transport;
    std::vector<std::thread> threads;  // one per request in flight
    bool ended = false;
    bool removed = false;  // no longer listed by the dispatcher
    // Responses are put back in the task's order (several requests are in
    // flight, and they may come back in any order). Each request gets a
    // stamp when sent; a response waits in `held` (by first_index) while a
    // request sent before it arrived is still out, since only such a
    // request can hold earlier elements.
    int64_t sent = 0;
    std::set<int64_t> in_flight;
    struct Held {
      int64_t sent_before_arrival = 0;
      std::vector<Element> elements;
      SplitTags tags;
    };
    std::map<int64_t, Held> held;
    // Since when requests fail as unreachable; reported to the dispatcher
    // after kUnreachableReportAfter.
    std::optional<absl::Time> unreachable_since;
    std::string unreachable_error;
    // Coordinated reads: the first round the task serves.
    int64_t starting_round = 0;
    // Elements of the task delivered to this reader.
    int64_t elements = 0;
    bool warned_unreachable = false;
  };

  bool coordinated() const { return consumer_index_ >= 0; }

  // Tracks how long a task's worker has been unreachable, for the report
  // in the heartbeat.
  static void NoteReachability(TaskState& task, const absl::Status& status) {
    if (!absl::IsUnavailable(status)) {
      task.unreachable_since.reset();
      return;
    }
    task.unreachable_error = std::string(status.message());
    if (!task.unreachable_since.has_value()) task.unreachable_since = absl::Now();
  }

  // A dispatcher unheard for dispatcher_deadline_ fails the read, naming
  // it; before that, one warning after kUnreachableReportAfter says that
  // the reader is retrying.
  void NoteDispatcherReachability(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time now = absl::Now();
    if (status.ok() || !IsTransient(status)) {
      dispatcher_heard_ = now;
      warned_dispatcher_ = false;
      return;
    }
    const absl::Duration silent = now - dispatcher_heard_;
    if (silent >= dispatcher_deadline_) {
      if (status_.ok()) {
        status_ = absl::UnavailableError(
            absl::StrCat("lost the dispatcher at ", service_->address(), ": no answer for ",
                         absl::ToInt64Milliseconds(silent), " ms (timeout_ms ",
                         absl::ToInt64Milliseconds(dispatcher_deadline_), "): ", status.message()));
      }
    } else if (silent >= kUnreachableReportAfter && !warned_dispatcher_) {
      warned_dispatcher_ = true;
      Warn(absl::StrCat("the dispatcher at ", service_->address(), " does not answer (", status.message(),
                        "); retrying for up to ", absl::ToInt64Milliseconds(dispatcher_deadline_),
                        " ms (timeout_ms)"));
    }
  }

  // Coordinated reads: the task that serves `round` (all consumers agree
  // on it: the live tasks that have started, by id, taken round-robin), or
  // 0 when none has.
  int64_t TaskForRound(int64_t round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<int64_t> serving;
    for (const auto& [id, task] : tasks_) {
      if (!task.removed && task.starting_round <= round) serving.push_back(id);
    }
    return serving.empty() ? 0 : serving[round % static_cast<int64_t>(serving.size())];
  }

  // The next round can be asked for: room in the buffer, a task list that
  // holds for it, and a task to ask.
  bool RoundReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || !status_.ok() ||
           (static_cast<int64_t>(buffer_.size()) < max_outstanding_ && current_round_ <= round_horizon_ &&
            TaskForRound(current_round_) != 0);
  }

  // Coordinated reads: asks the round's worker for this consumer's element
  // of each round in turn. A worker answers once every consumer is waiting,
  // or empty after 50 ms, and the request goes again (to the worker the
  // then current task list names). A round asked for again while another
  // consumer is already past it will never have every consumer waiting
  // (that one took it from a worker since lost), so the request says so.
  void RoundLoop() {
    std::chrono::milliseconds backoff(10);
    int64_t retried_round = -1;
    while (true) {
      int64_t task_id = 0;
      int64_t round = 0;
      bool others_past_round = false;
      std::shared_ptr<ElementTransport> transport;
      std::string address;
      {
        absl::MutexLock lock(&mu_);
        // At the horizon: a heartbeat now brings the next task list.
        if (current_round_ > round_horizon_) heartbeat_now_ = true;
        if (!mu_.AwaitWithTimeout(absl::Condition(this, &Iterator::RoundReady), absl::Milliseconds(50))) {
          heartbeat_now_ = true;  // past the horizon, or no task yet: ask now
          continue;
        }
        if (cancelled_ || !status_.ok()) return;
        round = current_round_;
        task_id = TaskForRound(round);
        transport = tasks_[task_id].transport;
        address = tasks_[task_id].worker_address;
        others_past_round = retried_round == round && furthest_round_ > round;
        retried_round = round;
      }
      proto::GetElementsRequest request;
      *request.mutable_version() = CurrentVersion();
      request.set_task_id(task_id);
      request.set_max_elements(1);
      request.set_compression(compression_);
      request.set_consumer_index(consumer_index_);
      request.set_round(round);
      request.set_others_past_round(others_past_round);
      ElementsResponse response;
      absl::Status status = transport->GetElements(request, &response);
      absl::MutexLock lock(&mu_);
      TaskState& task = tasks_[task_id];
      NoteReachability(task, status);
      if (status.ok() && !response.elements.empty()) {
        buffer_.push_back(std::move(response.elements[0]));
        ++current_round_;
        backoff = std::chrono::milliseconds(10);
        continue;
      }
      if (status.ok() && response.end_of_sequence) {
        status_ = absl::FailedPreconditionError(absl::StrCat("coordinated reads: the pipeline on worker ",
                                                             address, " ended at round ", round,
                                                             "; coordinated reads need an infinite dataset"));
        return;
      }
      if (!status.ok() && !IsTransient(status)) {
        status_ = absl::Status(status.code(), absl::StrCat("reading round ", round, " from worker ", address,
                                                           ": ", status.message()));
        return;
      }
      if (status.ok()) continue;  // the worker waited 50 ms already
      mu_.AwaitWithTimeout(absl::Condition(&cancelled_), absl::FromChrono(backoff));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }

  void ReleaseInOrder(TaskState& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!task.held.empty()) {
      auto first = task.held.begin();
      if (!task.in_flight.empty() && *task.in_flight.begin() <= first->second.sent_before_arrival) return;
      held_elements_ -= static_cast<int64_t>(first->second.elements.size());
      const SplitTags& tags = first->second.tags;
      for (size_t i = 0; i < first->second.elements.size(); ++i) {
        // exactly_once: repeats of a rerun split are dropped, and so is
        // what follows a response lost in transit (split_position_filter.h).
        if (!tags.split_seqs.empty() && !positions_.Accept(tags.split_seqs[i], tags.split_positions[i])) {
          continue;
        }
        buffer_.push_back(std::move(first->second.elements[i]));
        ++task.elements;
      }
      // Reported only now, in order: an earlier response still out may
      // hold the split's first elements. A split with a gap is not
      // reported, so that it is read again.
      for (int64_t seq : tags.completed_splits) {
        if (positions_.CompleteInOrder(seq)) completed_splits_.push_back(seq);
      }
      task.held.erase(first);
    }
  }

  bool CanReturn() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !buffer_.empty() || !status_.ok() || Finished();
  }

  bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // With several requests in flight per task, one may see the end while
    // another still carries the last elements: wait for every response.
    if (!iteration_finished_ || outstanding_ > 0 || held_elements_ > 0) return false;
    for (const auto& [id, task] : tasks_) {
      if (!task.ended && !task.removed) return false;
    }
    return true;
  }

  // Room for a request worth sending: at least half a request's share of
  // the budget. Asking as soon as one element's room frees up would make
  // many tiny requests, a round trip each (TCP's silly window syndrome).
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t room =
        max_outstanding_ - static_cast<int64_t>(buffer_.size()) - outstanding_ - held_elements_;
    return cancelled_ || room >= min_request_;
  }

  void HeartbeatLoop() {
    while (true) {
      proto::ClientHeartbeatRequest request;
      request.set_iteration_client_id(client_id_);
      std::vector<int64_t> reported;
      std::vector<int64_t> reported_splits;
      {
        absl::MutexLock lock(&mu_);
        reported = completed_tasks_;
        reported_splits = completed_splits_;
        std::set<std::string> unreachable;
        for (auto& [id, task] : tasks_) {
          if (!task.removed && task.unreachable_since.has_value() &&
              absl::Now() - *task.unreachable_since >= kUnreachableReportAfter) {
            unreachable.insert(task.worker_address);
            if (!task.warned_unreachable) {
              task.warned_unreachable = true;
              Warn(absl::StrCat("worker ", task.worker_address, " (task ", id,
                                ") does not answer: ", task.unreachable_error,
                                "; reading from the other workers, and reported to "
                                "the dispatcher at ",
                                service_->address()));
            }
          }
        }
        for (const std::string& address : unreachable) request.add_unreachable_workers(address);
        request.set_current_round(current_round_);
      }
      for (int64_t id : reported) request.add_completed_tasks(id);
      for (int64_t seq : reported_splits) request.add_completed_splits(seq);
      proto::ClientHeartbeatResponse response;
      absl::Status status = service_->ClientHeartbeat(
          std::move(request), &response,
          {.attempt_timeout = std::min<std::chrono::milliseconds>(
               kDispatcherRpcTimeout, absl::ToChronoMilliseconds(dispatcher_deadline_))});
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;
      NoteDispatcherReachability(status);
      if (status.ok()) {
        completed_tasks_.erase(completed_tasks_.begin(), completed_tasks_.begin() + reported.size());
        completed_splits_.erase(completed_splits_.begin(),
                                completed_splits_.begin() + reported_splits.size());
        std::set<int64_t> listed;
        for (const proto::TaskInfo& info : response.tasks()) {
          listed.insert(info.task_id());
          if (tasks_.contains(info.task_id())) continue;
          TaskState& task = tasks_[info.task_id()];
          task.worker_address = info.worker_address();
          task.transport = MakeGrpcElementTransport(info.worker_address());
          task.starting_round = info.starting_round();
          // Coordinated reads go round by round from one thread.
          for (int i = 0; i < (coordinated() ? 0 : kRequestsInFlightPerTask); ++i) {
            task.threads.emplace_back(
                [this, task_id = info.task_id(), address = info.worker_address(),
                 transport = task.transport] { FetchLoop(task_id, address, *transport); });
          }
        }
        for (auto& [id, task] : tasks_) {
          if (!listed.contains(id)) task.removed = true;
        }
        for (const proto::LostTask& lost : response.lost_tasks()) {
          auto task = tasks_.find(lost.task_id());
          // A task read to its end lost nothing.
          if (!losses_.has_value() || (task != tasks_.end() && task->second.ended)) continue;
          losses_->TaskLost(lost.task_id(), lost.worker_address(), lost.reason(),
                            task == tasks_.end() ? 0 : task->second.elements);
          if (task == tasks_.end()) ++unseen_lost_tasks_;
        }
        if (response.error_code() != 0 && status_.ok()) {
          status_ = absl::Status(static_cast<absl::StatusCode>(response.error_code()),
                                 absl::StrCat("the iteration failed: ", response.error_message()));
        }
        iteration_finished_ = response.iteration_finished();
        round_horizon_ = response.round_horizon();
        furthest_round_ = std::max(furthest_round_, response.furthest_round());
      } else if (!IsTransient(status)) {
        status_ = status;  // the dispatcher refused us: nothing to wait for
      }
      mu_.AwaitWithTimeout(absl::Condition(this, &Iterator::HeartbeatDue), kHeartbeatInterval);
      if (cancelled_) return;
      heartbeat_now_ = false;
    }
  }

  bool HeartbeatDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancelled_ || heartbeat_now_; }

  int64_t ElementsForTargetBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (elements_received_ == 0) return 1;  // the first response measures
    const int64_t average = std::max<int64_t>(1, bytes_received_ / elements_received_);
    return std::max<int64_t>(1, kTargetResponseBytes / average);
  }

  void FetchLoop(int64_t task_id, const std::string& address, ElementTransport& transport) {
    std::chrono::milliseconds backoff(10);
    while (true) {
      int want = 0;
      int64_t stamp = 0;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Iterator::HasRoom));
        TaskState& task = tasks_[task_id];
        if (cancelled_ || task.removed || task.ended || !status_.ok()) return;
        want = static_cast<int>(std::min<int64_t>(
            {kMaxElementsPerRequest, request_share_, ElementsForTargetBytes(),
             max_outstanding_ - static_cast<int64_t>(buffer_.size()) - outstanding_ - held_elements_}));
        outstanding_ += want;
        stamp = ++task.sent;
        task.in_flight.insert(stamp);
      }
      proto::GetElementsRequest request;
      *request.mutable_version() = CurrentVersion();
      request.set_task_id(task_id);
      request.set_max_elements(want);
      request.set_compression(compression_);
      ElementsResponse response;
      absl::Status status = transport.GetElements(request, &response);
      absl::MutexLock lock(&mu_);
      outstanding_ -= want;
      TaskState& task = tasks_[task_id];
      task.in_flight.erase(stamp);
      const bool end_of_sequence = response.end_of_sequence;
      const bool empty = response.elements.empty();
      if (status.ok() && !empty) {
        for (const Element& e : response.elements) {
          // A running sum; halved now and then so that it follows changes.
          for (const Tensor& t : e.components) bytes_received_ += static_cast<int64_t>(t.ByteSize());
          if (++elements_received_ == 1024) {
            elements_received_ /= 2;
            bytes_received_ /= 2;
          }
        }
        held_elements_ += static_cast<int64_t>(response.elements.size());
      }
      if (status.ok() && (!empty || !response.tags.completed_splits.empty())) {
        // An empty response that reports splits complete shares its
        // first_index with the next one that has elements: they merge, in
        // the worker's order.
        TaskState::Held& held = task.held[response.first_index];
        held.sent_before_arrival = std::max(held.sent_before_arrival, task.sent);
        if (held.elements.empty()) {
          held.elements = std::move(response.elements);
        } else {
          for (Element& e : response.elements) held.elements.push_back(std::move(e));
        }
        auto append = [](std::vector<int64_t>& to, const std::vector<int64_t>& from) {
          to.insert(to.end(), from.begin(), from.end());
        };
        append(held.tags.split_seqs, response.tags.split_seqs);
        append(held.tags.split_positions, response.tags.split_positions);
        append(held.tags.completed_splits, response.tags.completed_splits);
      }
      ReleaseInOrder(task);
      NoteReachability(task, status);
      if (status.ok()) {
        backoff = std::chrono::milliseconds(10);
        // A finished iteration whose worker no longer knows the task has
        // nothing more to give.
        if (end_of_sequence || (empty && iteration_finished_)) {
          task.ended = true;
          // Every element of the task is here: its splits need never be
          // read again, even if its worker is lost now.
          if (end_of_sequence) completed_tasks_.push_back(task_id);
          // Ask at once whether the iteration is over, rather than at the
          // next heartbeat: the end of an epoch then costs no wait.
          heartbeat_now_ = true;
          return;
        }
        if (!empty) continue;
      } else if (!IsTransient(status)) {
        status_ = absl::Status(status.code(),
                               absl::StrCat("reading from worker ", address, ": ", status.message()));
        return;
      }
      // Nothing yet (or the worker is unreachable): wait a little.
      mu_.AwaitWithTimeout(absl::Condition(&cancelled_), absl::FromChrono(backoff));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }

  const std::shared_ptr<DispatcherClient> service_;
  const int64_t max_outstanding_;
  // Each request takes up to half the budget, so that two can be out at
  // once whatever the element size; the byte target keeps large elements
  // to smaller requests, of which all four can be out...
  const int64_t request_share_ = std::max<int64_t>(1, max_outstanding_ / 2);
  // ...and waits until at least this much of it is free.
  const int64_t min_request_ = std::max<int64_t>(1, request_share_ / 2);
  const int64_t client_id_;
  const proto::WireCompression compression_;
  const absl::Duration dispatcher_deadline_;

  absl::Mutex mu_;
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_elements_ ABSL_GUARDED_BY(mu_) = 0;  // received, waiting for their turn
  // For the average element size, which sizes requests.
  int64_t elements_received_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_received_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, TaskState> tasks_ ABSL_GUARDED_BY(mu_);
  // Read to their end, not yet reported to the dispatcher.
  std::vector<int64_t> completed_tasks_ ABSL_GUARDED_BY(mu_);
  // exactly_once: splits wholly received, not yet reported; and the
  // filter of repeated or out-of-order positions.
  std::vector<int64_t> completed_splits_ ABSL_GUARDED_BY(mu_);
  SplitPositionFilter positions_ ABSL_GUARDED_BY(mu_);
  const int64_t consumer_index_;  // coordinated reads; -1 otherwise
  int64_t current_round_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t round_horizon_ ABSL_GUARDED_BY(mu_) = -1;
  // The furthest round any consumer of the iteration has reached, from
  // the dispatcher's last heartbeat reply.
  int64_t furthest_round_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread rounds_;
  bool iteration_finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_now_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // The last answer from the dispatcher (or the start).
  absl::Time dispatcher_heard_ ABSL_GUARDED_BY(mu_) = absl::Now();
  bool warned_dispatcher_ ABSL_GUARDED_BY(mu_) = false;
  // parallel_epochs: tasks lost before the reader saw their end.
  std::optional<EpochLosses> losses_ ABSL_GUARDED_BY(mu_);
  // Lost tasks this reader never heard of while they ran.
  int64_t unseen_lost_tasks_ ABSL_GUARDED_BY(mu_) = 0;
  // How the read ends, once judged.
  std::optional<absl::Status> end_status_ ABSL_GUARDED_BY(mu_);
  std::thread heartbeat_;
};

absl::StatusOr<std::unique_ptr<IteratorBase>> DataServiceDataset::MakeIterator(const IteratorContext&) const {
  // Elements arrive as a steady stream of large messages (service/malloc_tuning.h).
  TuneMallocForLargeMessages();
  proto::GetOrCreateJobRequest job_request;
  *job_request.mutable_params() = params_;
  proto::GetOrCreateJobResponse job;
  absl::Status status = service_->GetOrCreateJob(
      job_request, &job,
      {.retry_for = deadline_, .what = absl::StrCat("creating a job at ", service_->address())});
  if (!status.ok()) return status;
  proto::GetOrCreateIterationRequest iteration_request;
  iteration_request.set_job_id(job.job_id());
  const int64_t repetition = repetitions_.fetch_add(1);
  iteration_request.set_repetition(repetition);
  iteration_request.set_consumer_index(std::max<int64_t>(0, consumer_index_));
  proto::GetOrCreateIterationResponse iteration;
  status = service_->GetOrCreateIteration(
      iteration_request, &iteration,
      {.retry_for = deadline_, .what = absl::StrCat("starting an iteration at ", service_->address())});
  if (!status.ok()) return status;
  if (iteration.already_finished()) {
    Warn(absl::StrCat("job '", params_.job_name(), "' repetition ", repetition,
                      " already finished: nothing to read (each repetition of a shared job is read once, as "
                      "in tf.data; use another job_name to read the data again)"));
  }
  // In parallel_epochs every task runs the whole epoch, so a lost one cut
  // it short; in distributed_epoch its splits are read again, and static
  // shards are run again when their worker returns.
  std::optional<EpochLosses> losses;
  if (params_.processing_mode() == proto::PARALLEL_EPOCHS && !IsStaticPolicy(params_.sharding_policy()) &&
      consumer_index_ < 0) {
    losses.emplace(cardinality_, !params_.job_name().empty(), allow_partial_);
  }
  return std::make_unique<Iterator>(service_, max_outstanding_, iteration.iteration_client_id(), compression_,
                                    consumer_index_, params_.job_name().empty(), std::move(losses),
                                    deadline_);
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeDataServiceDataset(const proto::DatasetDef& worker_part,
                                                  const proto::DistributeOp& op) {
  proto::JobParams params;
  if (absl::Status s = JobParamsFromDistribute(op, &params); !s.ok()) return s;
  if (absl::Status s = CheckSendable(worker_part); !s.ok()) return s;
  if (op.service().empty())
    return absl::InvalidArgumentError("distribute: missing 'service' (grpc://HOST:PORT)");
  absl::StatusOr<std::string> address = ParseServiceAddress(op.service());
  if (!address.ok()) return address.status();
  absl::StatusOr<proto::WireCompression> compression = ParseWireCompression(op.compression());
  if (!compression.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("distribute: ", compression.status().message()));
  }
  if (op.max_outstanding_requests() < 0) {
    return absl::InvalidArgumentError("distribute: max_outstanding_requests must be >= 0");
  }
  if (op.timeout_ms() < 0) return absl::InvalidArgumentError("distribute: timeout_ms must be >= 0");
  if (op.num_consumers() < 0 ||
      (op.num_consumers() > 0 && (op.consumer_index() < 0 || op.consumer_index() >= op.num_consumers()))) {
    return absl::InvalidArgumentError(absl::StrCat("distribute: consumer_index ", op.consumer_index(),
                                                   " is out of range for num_consumers ",
                                                   op.num_consumers()));
  }
  const std::chrono::milliseconds deadline =
      op.timeout_ms() > 0 ? std::chrono::milliseconds(op.timeout_ms()) : kDefaultDispatcherDeadline;
  auto service = std::make_shared<DispatcherClient>(*address);

  proto::GetOrRegisterDatasetRequest register_request;
  *register_request.mutable_dataset() = worker_part;
  proto::GetOrRegisterDatasetResponse registered;
  // The first contact: a dispatcher not up yet is waited for, and the user
  // hears so after a second rather than only at the deadline.
  auto still_retrying = [&](const std::string& reason) {
    Warn(absl::StrCat("the dispatcher at ", *address, " does not answer yet (", reason,
                      "); retrying for up to ", deadline.count(),
                      " ms (timeout_ms, sluice read --timeout-ms)"));
  };
  absl::Status status =
      service->GetOrRegisterDataset(register_request, &registered,
                                    {.retry_for = deadline,
                                     .what = absl::StrCat("registering the dataset at ", *address),
                                     .still_retrying = still_retrying});
  if (absl::IsUnimplemented(status)) {
    return absl::UnimplementedError(absl::StrCat("the dispatcher at ", *address, ": ", status.message()));
  }
  if (!status.ok()) return status;
  proto::GetDatasetInfoRequest info_request;
  info_request.set_dataset_id(registered.dataset_id());
  proto::GetDatasetInfoResponse info;
  status = service->GetDatasetInfo(info_request, &info, {.retry_for = deadline});
  if (!status.ok()) return status;
  absl::StatusOr<ElementSpec> spec = ElementSpecFromProto(info.element_spec());
  if (!spec.ok()) return spec.status();

  params.set_dataset_id(registered.dataset_id());
  params.set_job_name(op.job_name());
  params.set_num_consumers(op.num_consumers());
  const int64_t max_outstanding =
      op.max_outstanding_requests() > 0 ? op.max_outstanding_requests() : kDefaultMaxOutstanding;
  const int64_t consumer_index = op.num_consumers() > 0 ? op.consumer_index() : -1;
  return std::make_shared<DataServiceDataset>(std::move(service), std::move(params), *std::move(spec),
                                              info.cardinality(), max_outstanding, deadline, *compression,
                                              consumer_index, op.allow_partial());
}

void EnableDataService() {
  static const bool registered = [] {
    SetDistributeFactory(MakeDataServiceDataset);
    return true;
  }();
  (void)registered;
}

}  // namespace sluice
