#include "client/read/service_read.h"

#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/read/warnings.h"
#include "service/heartbeat_bounds.h"
#include "service/metrics.h"

namespace sluice::reader {

ServiceRead::ServiceRead(std::shared_ptr<DispatcherClient> service, ServiceReadOptions options)
    : service_(std::move(service)),
      allow_partial_(options.allow_partial),
      client_id_(options.iteration_client_id),
      client_secret_(std::move(options.client_secret)),
      state_(options.max_outstanding, options.sole_reader, std::move(options.losses), options.transport,
             options.exactly_once, options.exactly_once && options.consumer_index < 0, options.restored,
             options.deterministic, options.track_worker_positions),
      fetches_(state_, options.compression),
      rounds_(state_, options.compression, options.consumer_index),
      heartbeat_(state_, *service_, client_id_, client_secret_, absl::FromChrono(options.dispatcher_deadline),
                 options.consumer_index >= 0 ? nullptr : &fetches_) {
  state_.lost_splits_repeat = options.lost_splits_repeat;
  state_.trainer_id = std::move(options.trainer_id);
  heartbeat_thread_ = std::thread([this] { heartbeat_.HeartbeatLoop(); });
  if (options.consumer_index >= 0) rounds_thread_ = std::thread([this] { rounds_.RoundLoop(); });
}

ServiceRead::~ServiceRead() {
  {
    absl::MutexLock lock(&state_.mu);
    state_.cancelled = true;
  }
  heartbeat_thread_.join();
  if (rounds_thread_.joinable()) rounds_thread_.join();
  // Only the heartbeat adds tasks, and it has stopped.
  for (auto& [id, task] : state_.tasks) {
    for (std::thread& thread : task.threads) thread.join();
  }
  // A shared exactly_once read says what it took of splits still out, so
  // that a rerun after a later lost task passes over them.
  std::vector<std::pair<int64_t, IntRanges>> taken;
  bool cut = false;
  {
    absl::MutexLock lock(&state_.mu);
    taken = state_.positions.Taken({{1, INT64_MAX}}, kMaxTakenPositionNumbers, &cut);
  }
  ReleaseIterationClient(*service_, client_id_, client_secret_, taken, cut);
}

void ReleaseIterationClient(DispatcherClient& service, int64_t client_id, const std::string& client_secret,
                            const std::vector<std::pair<int64_t, IntRanges>>& taken, bool taken_cut) {
  proto::ReleaseIterationClientRequest request;
  request.set_iteration_client_id(client_id);
  request.set_client_secret(client_secret);
  for (const auto& [seq, positions] : taken) {
    proto::SplitDelivery* split = request.add_taken_positions();
    split->set_seq(seq);
    AppendPairs(positions, split->mutable_delivered());
  }
  request.set_taken_positions_cut(taken_cut);
  proto::ReleaseIterationClientResponse response;
  (void)service.ReleaseIterationClient(request, &response, {.attempt_timeout = std::chrono::seconds(2)});
}

absl::Status ServiceRead::GetNext(Element* element, bool* end) {
  static Counter& waited = ProcessMetrics()
                               .AddCounter("sluice_client_wait_seconds_total",
                                           "time the trainer waited for elements from the service")
                               .Get();
  absl::MutexLock lock(&state_.mu);
  // The clock is read only when there is a wait: an element already
  // buffered costs nothing more.
  if (!state_.CanReturn()) {
    const auto start = std::chrono::steady_clock::now();
    state_.waiting_since = start;
    state_.mu.Await(absl::Condition(&state_, &ReadState::CanReturn));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state_.waiting_since.reset();
    state_.waited_seconds += seconds;
    waited.Increment(seconds);
  }
  // Every task is read to its end, so no earlier split can come.
  if (state_.buffer.empty() && state_.deterministic && state_.Finished()) state_.ReleaseOrdered(/*all=*/true);
  if (!state_.buffer.empty()) {
    *element = std::move(state_.buffer.front());
    state_.buffer.pop_front();
    if (state_.track_worker_positions) {
      const auto [task_id, position] = state_.buffer_tags.front();
      state_.buffer_tags.pop_front();
      state_.delivered.AddWorkerPosition(state_.tasks[task_id].worker_address, position);
    } else if (state_.track_deliveries) {
      const auto [seq, position] = state_.buffer_tags.front();
      state_.buffer_tags.pop_front();
      if (seq >= 0) state_.delivered.Add(seq, position);
    }
    *end = false;
    return absl::OkStatus();
  }
  if (!state_.status.ok()) return state_.status;
  if (!state_.positions.gapped().empty()) {
    // A response was lost in transit while its worker lived on, so no
    // rerun filled the gap: say so rather than end short.
    return absl::DataLossError(absl::StrCat("exactly_once: elements of split ",
                                            *state_.positions.gapped().begin(),
                                            " were lost in transit and never read again"));
  }
  // A read ends normally only when it delivered everything its mode
  // promises (docs/design.md, "What a read promises"); judged once, so
  // that an accepted partial epoch warns once.
  if (!end_status_.has_value()) {
    if (state_.losses.has_value()) {
      // Every request is back (Finished): what each lost task delivered.
      for (const auto& [id, task] : state_.tasks) state_.losses->Settle(id, task.read_whole, task.elements);
    }
    end_status_ =
        state_.losses.has_value()
            ? state_.losses->Finish(static_cast<int64_t>(state_.tasks.size()) + state_.unseen_lost_tasks)
            : absl::OkStatus();
    if (end_status_->ok()) end_status_ = state_.TransitLossesOfEndedTasks().Finish(allow_partial_);
    if (end_status_->ok()) end_status_ = RestoredWorkersServed();
  }
  if (!end_status_->ok()) return *end_status_;
  *end = true;
  return absl::OkStatus();
}

SplitDeliveries ServiceRead::Delivered() {
  absl::MutexLock lock(&state_.mu);
  return state_.DeliveredWithEnds();
}

absl::Status ServiceRead::RestoredWorkersServed() {
  std::set<std::string> served;
  for (const auto& [id, task] : state_.tasks) served.insert(task.worker_address);
  std::vector<std::string> missing;
  for (const auto& [address, positions] : state_.restored_positions) {
    const bool finished = !positions.empty() && std::prev(positions.end())->second == kEpochEnd;
    if (!finished && !served.contains(address)) missing.push_back(address);
  }
  if (missing.empty()) return absl::OkStatus();
  const std::string message = absl::StrCat(
      "restored parallel_epochs read: ", missing.size(), " worker(s) whose epoch the save left unfinished ",
      "did not serve this read (", absl::StrJoin(missing, ", "),
      "), so the rest of their epochs is missing; start them at the same addresses and restore again");
  if (!allow_partial_) return absl::DataLossError(message);
  Warn(message + " (allow_partial: ending normally)");
  return absl::OkStatus();
}

}  // namespace sluice::reader
