#include "client/read/coordinated_reader.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/read/element_transport.h"
#include "service/element_wire.h"

namespace sluice::reader {

// A worker that knows the task waits up to 50 ms for a round before it
// answers empty; one the task has not reached yet (its heartbeat brings
// it) answers empty at once. An empty answer sooner than this is waited
// for as an error is, or the loop would ask again without pause.
constexpr std::chrono::milliseconds kEmptyAnswerAtOnce(20);

int64_t TaskForRound(const std::map<int64_t, TaskState>& tasks, int64_t round) {
  std::vector<int64_t> serving;
  for (const auto& [id, task] : tasks) {
    if (!task.removed && task.starting_round <= round) serving.push_back(id);
  }
  return serving.empty() ? 0 : serving[round % static_cast<int64_t>(serving.size())];
}

CoordinatedReader::CoordinatedReader(ReadState& state, proto::WireCompression compression,
                                     int64_t consumer_index)
    : state_(state), compression_(compression), consumer_index_(consumer_index) {}

bool CoordinatedReader::RoundReady() const {
  return state_.cancelled || !state_.status.ok() ||
         (static_cast<int64_t>(state_.buffer.size()) < state_.max_outstanding &&
          state_.current_round <= state_.round_horizon &&
          TaskForRound(state_.tasks, state_.current_round) != 0);
}

// A worker answers once every consumer is waiting, or empty after 50 ms,
// and the request goes again (to the worker the then current task list
// names). A round asked for again while another consumer is already past
// it will never have every consumer waiting (that one took it from a
// worker since lost), so the request says so.
void CoordinatedReader::RoundLoop() {
  std::chrono::milliseconds backoff(10);
  int64_t retried_round = -1;
  while (true) {
    int64_t task_id = 0;
    int64_t round = 0;
    bool others_past_round = false;
    std::shared_ptr<ElementTransport> transport;
    std::string address;
    std::string task_secret;
    {
      absl::MutexLock lock(&state_.mu);
      // At the horizon: a heartbeat now brings the next task list.
      if (state_.current_round > state_.round_horizon) state_.heartbeat_now = true;
      if (!state_.mu.AwaitWithTimeout(absl::Condition(this, &CoordinatedReader::RoundReady),
                                      absl::Milliseconds(50))) {
        state_.heartbeat_now = true;  // past the horizon, or no task yet: ask now
        continue;
      }
      if (state_.cancelled || !state_.status.ok()) return;
      round = state_.current_round;
      task_id = TaskForRound(state_.tasks, round);
      transport = state_.tasks[task_id].transport;
      address = state_.tasks[task_id].worker_address;
      task_secret = state_.tasks[task_id].read_secret;
      others_past_round = retried_round == round && state_.furthest_round > round;
      retried_round = round;
    }
    proto::GetElementsRequest request;
    request.set_task_id(task_id);
    request.set_task_secret(task_secret);
    request.set_max_elements(1);
    request.set_compression(compression_);
    request.set_consumer_index(consumer_index_);
    request.set_round(round);
    request.set_others_past_round(others_past_round);
    ElementsResponse response;
    const auto asked = std::chrono::steady_clock::now();
    absl::Status status = transport->GetElements(request, &response);
    const bool answered_at_once = std::chrono::steady_clock::now() - asked < kEmptyAnswerAtOnce;
    absl::MutexLock lock(&state_.mu);
    TaskState& task = state_.tasks[task_id];
    task.NoteReachability(status);
    if (status.ok() && !response.elements.empty()) {
      state_.buffer.push_back(std::move(response.elements[0]));
      ++state_.current_round;
      backoff = std::chrono::milliseconds(10);
      continue;
    }
    if (status.ok() && response.end_of_sequence) {
      state_.status = absl::FailedPreconditionError(
          absl::StrCat("coordinated reads: the pipeline on worker ", address, " ended at round ", round,
                       "; coordinated reads need an infinite dataset"));
      return;
    }
    if (!status.ok() && !IsTransientReadError(status)) {
      state_.status = absl::Status(status.code(), absl::StrCat("reading round ", round, " from worker ",
                                                               address, ": ", status.message()));
      return;
    }
    if (status.ok() && !answered_at_once) continue;  // the worker waited already
    state_.mu.AwaitWithTimeout(absl::Condition(&state_.cancelled), absl::FromChrono(backoff));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

}  // namespace sluice::reader
