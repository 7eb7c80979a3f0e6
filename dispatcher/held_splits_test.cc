// A shared exactly_once read that loses a task (issue 50, finding 10): the
// dispatcher holds the task's unfinished splits until each client has said
// which of their positions it took, then hands them out again with those
// positions, which the rerun passes over.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/journal.h"
#include "service/heartbeat_bounds.h"
#include "service/metrics.h"
#include "tests/testing/dispatcher_test_util.h"
#include "tests/testing/test_util.h"

namespace sluice::dispatcher {
namespace {

using Taken = std::vector<std::pair<int64_t, std::vector<int64_t>>>;

absl::Status Answer(DispatcherImpl& d, int64_t client, int64_t hold, const Taken& taken,
                    proto::ClientHeartbeatResponse* response) {
  response->Clear();
  proto::ClientHeartbeatRequest request;
  request.set_iteration_client_id(client);
  request.set_client_secret(d.ClientSecretOf(client));
  request.set_answered_hold(hold);
  for (const auto& [seq, pairs] : taken) {
    proto::SplitDelivery* split = request.add_taken_positions();
    split->set_seq(seq);
    split->mutable_delivered()->Add(pairs.begin(), pairs.end());
  }
  return Call(d, &DispatcherImpl::ClientHeartbeat, request, response);
}

std::vector<int64_t> Seqs(const proto::GetSplitsResponse& response) {
  std::vector<int64_t> seqs;
  for (const auto& split : response.splits()) seqs.push_back(split.seq());
  return seqs;
}

// The skip positions an answer carries, by seq.
std::vector<std::pair<int64_t, std::vector<int64_t>>> Skips(const proto::GetSplitsResponse& response) {
  std::vector<std::pair<int64_t, std::vector<int64_t>>> skips;
  for (const auto& split : response.skip_positions()) {
    skips.emplace_back(split.seq(), std::vector<int64_t>(split.delivered().begin(), split.delivered().end()));
  }
  return skips;
}

// A named exactly_once job read by `clients` clients (2 or 1) over
// workers a:1 and b:2, and the task of the iteration on each; a:1's task
// has leased splits 1-4.
struct SharedRead {
  explicit SharedRead(int clients, DispatcherConfig config = TestConfig()) : d(config) {
    // With a journal, recovered and journaling from here.
    if (!config.work_dir.empty()) REQUIRE(d.Start().ok());
    Heartbeat(d, "a:1");
    Heartbeat(d, "b:2");
    const int64_t job = RangeJobOverSplits(d, /*exactly_once=*/true, "shared");
    const proto::GetOrCreateIterationResponse joined = Iteration(d, job);
    first = joined.iteration_client_id();
    iteration = joined.iteration_id();
    if (clients > 1) second = Iteration(d, job).iteration_client_id();
    lost = TaskOn(d, iteration, "a:1");
    other = TaskOn(d, iteration, "b:2");
    REQUIRE(Seqs(Splits(d, iteration, lost, 4, 1)) == std::vector<int64_t>{1, 2, 3, 4});
  }
  DispatcherImpl d;
  int64_t first = 0;
  int64_t second = 0;
  int64_t iteration = 0;
  int64_t lost = 0;
  int64_t other = 0;
};

TEST_CASE(
    "held splits: a lost task's splits wait for every client's report, then run again past what they took",
    "[dispatcher][exactly_once]") {
  MetricsRegistry metrics;  // outlives the dispatcher, whose gauges it holds
  SharedRead read(2);
  auto& [d, first, second, iteration, lost, other] = read;
  // Splits 1-4 went to the task on a:1, 5-8 go to the one on b:2; 9 and on
  // are not handed out yet.
  REQUIRE(Seqs(Splits(d, iteration, other, 4, 1)) == std::vector<int64_t>{5, 6, 7, 8});
  // Split 2 was read whole before the loss: never held.
  proto::ClientHeartbeatRequest complete;
  complete.set_iteration_client_id(first);
  complete.set_client_secret(d.ClientSecretOf(first));
  complete.add_completed_splits(2);
  CallOk(d, &DispatcherImpl::ClientHeartbeat, complete);
  d.ExportMetrics(metrics);
  const auto shown = [&d, &metrics](int64_t held, int64_t awaited) {
    const proto::StatusSnapshot status = CallOk(d, &DispatcherImpl::GetStatus, proto::GetStatusRequest());
    REQUIRE(status.iterations_size() == 1);
    CHECK(status.iterations(0).held_splits() == held);
    CHECK(status.iterations(0).awaiting_reports() == awaited);
    CHECK_THAT(d.StatusJson(), Catch::Matchers::Contains(absl::StrCat(
                                   "\"held_splits\":", held, ",\"awaiting_reports\":", awaited, "}")));
    const std::string rendered = metrics.Render();
    CHECK_THAT(rendered, Catch::Matchers::Contains(absl::StrCat("\nsluice_splits_held ", held, "\n")));
    CHECK_THAT(rendered, Catch::Matchers::Contains(
                             absl::StrCat("\nsluice_held_split_reports_awaited ", awaited, "\n")));
  };
  shown(0, 0);
  Shutdown(d, "a:1");
  // Seen in `sluice status`, the status page and the metrics.
  shown(3, 2);

  // Both clients are asked, the read goes on (no error), and nothing held
  // is handed out meanwhile.
  for (int64_t client : {first, second}) {
    const proto::ClientHeartbeatResponse beat = ClientBeat(d, client);
    INFO(beat.error_message());
    CHECK(beat.error_code() == 0);
    CHECK_FALSE(beat.iteration_finished());
    CHECK(beat.report_hold() == 1);
    CHECK(std::vector<int64_t>(beat.report_splits().begin(), beat.report_splits().end()) ==
          std::vector<int64_t>{1, 2, 3, 5});
  }
  CHECK(Seqs(Splits(d, iteration, other, 4, 2)) == std::vector<int64_t>{9, 10, 11, 12});

  proto::ClientHeartbeatResponse answered;
  REQUIRE(Answer(d, first, 1, {{1, {0, 3}}, {4, {2, 4}}, {7, {0, 1}}}, &answered).ok());
  CHECK(answered.report_hold() == 0);  // its answer is in
  shown(3, 1);
  CHECK(ClientBeat(d, second).report_hold() == 1);
  // An answer to another hold than the current one is not taken.
  REQUIRE(Answer(d, second, 7, {}, &answered).ok());
  CHECK(answered.report_hold() == 1);
  CHECK(Seqs(Splits(d, iteration, other, 4, 3)) == std::vector<int64_t>{13, 14, 15, 16});

  REQUIRE(Answer(d, second, 1, {{1, {3, 5, 8, 9}}, {3, {0, 10}}}, &answered).ok());
  CHECK(answered.report_hold() == 0);
  shown(0, 0);
  // Back, ahead of new splits, each with the union of what was taken of
  // it; split 3 was taken whole, split 7 is not held (its task lives).
  const proto::GetSplitsResponse rerun = Splits(d, iteration, other, 4, 4);
  CHECK(Seqs(rerun) == std::vector<int64_t>{1, 3, 4, 17});
  CHECK(Skips(rerun) ==
        std::vector<std::pair<int64_t, std::vector<int64_t>>>{{1, {0, 5, 8, 9}}, {3, {0, 10}}, {4, {2, 4}}});
  // A retry of that request gets the same answer, skips included.
  CHECK(Skips(Splits(d, iteration, other, 4, 4)) == Skips(rerun));
  // A completed split's taken positions go (no retry follows a
  // completion: its worker had the answer).
  complete.set_completed_splits(0, 1);
  CallOk(d, &DispatcherImpl::ClientHeartbeat, complete);
  CHECK(Skips(Splits(d, iteration, other, 4, 4)) ==
        std::vector<std::pair<int64_t, std::vector<int64_t>>>{{3, {0, 10}}, {4, {2, 4}}});
}

TEST_CASE("held splits: a task whose worker had made all its elements is lost with it, and not listed again",
          "[dispatcher][exactly_once]") {
  SharedRead read(2);
  auto& [d, first, second, iteration, lost, other] = read;
  // Its worker made every element; its readers have not taken them all.
  Finish(d, "a:1", {lost});
  Shutdown(d, "a:1");
  const proto::ClientHeartbeatResponse beat = ClientBeat(d, first);
  CHECK(beat.report_hold() == 1);
  REQUIRE(beat.lost_tasks_size() == 1);
  CHECK(beat.lost_tasks(0).task_id() == lost);
  // Back at its address, the worker's task is listed to no reader: what
  // it still buffers of the held splits nobody reported.
  Heartbeat(d, "a:1", {lost});
  for (const auto& [id, address] : Listed(ClientBeat(d, second))) CHECK(id != lost);
}

TEST_CASE("held splits: a client that leaves says what it took with its release, and is not waited for",
          "[dispatcher][exactly_once]") {
  SharedRead read(2);
  auto& [d, first, second, iteration, lost, other] = read;
  Shutdown(d, "a:1");
  proto::ClientHeartbeatResponse answered;
  REQUIRE(Answer(d, first, 1, {{2, {0, 4}}}, &answered).ok());
  CHECK(Seqs(Splits(d, iteration, other, 4, 1)) == std::vector<int64_t>{5, 6, 7, 8});
  // The second client leaves, saying what it took.
  proto::ReleaseIterationClientRequest release;
  release.set_iteration_client_id(second);
  release.set_client_secret(d.ClientSecretOf(second));
  proto::SplitDelivery* taken = release.add_taken_positions();
  taken->set_seq(2);
  taken->add_delivered(6);
  taken->add_delivered(7);
  CallOk(d, &DispatcherImpl::ReleaseIterationClient, release);
  const proto::GetSplitsResponse rerun = Splits(d, iteration, other, 4, 2);
  CHECK(Seqs(rerun) == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(Skips(rerun) == std::vector<std::pair<int64_t, std::vector<int64_t>>>{{2, {0, 4, 6, 7}}});
}

TEST_CASE("held splits: an iteration with no task left to take them waits for the reports, then gets one",
          "[dispatcher][exactly_once]") {
  SharedRead read(1);
  auto& [d, first, second, iteration, lost, other] = read;
  // b:2's task takes every other split, and is told they have ended.
  int64_t request = 0;
  while (!Splits(d, iteration, other, 4, ++request).end_of_splits()) REQUIRE(request < 100);
  Shutdown(d, "a:1");
  // No task is made for the held splits: they wait for the report.
  CHECK(NewTaskIds(Heartbeat(d, "b:2", {other})).empty());
  CHECK_FALSE(ClientBeat(d, first).iteration_finished());
  proto::ClientHeartbeatResponse answered;
  REQUIRE(Answer(d, first, 1, {{1, {0, 10}}}, &answered).ok());
  const std::vector<int64_t> made = NewTaskIds(Heartbeat(d, "b:2", {other}));
  REQUIRE(made.size() == 1);
  const proto::GetSplitsResponse rerun = Splits(d, iteration, made[0], 4, 1);
  CHECK(Seqs(rerun) == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(Skips(rerun) == std::vector<std::pair<int64_t, std::vector<int64_t>>>{{1, {0, 10}}});
}

TEST_CASE("held splits: a dispatcher that crashed before the rerun's task was made makes it once recovered",
          "[dispatcher][exactly_once]") {
  testing::TempDir dir;
  DispatcherConfig config = TestConfig();
  config.work_dir = dir.File("work");
  // Nobody is timed out while the test runs.
  config.worker_timeout_ms = 60000;
  config.client_timeout_ms = 60000;
  config.job_gc_timeout_ms = 60000;
  int64_t iteration = 0;
  int64_t other = 0;
  {
    SharedRead read(1, config);
    iteration = read.iteration;
    other = read.other;
    int64_t request = 0;
    while (!Splits(read.d, iteration, other, 4, ++request).end_of_splits()) REQUIRE(request < 100);
    Shutdown(read.d, "a:1");
    proto::ClientHeartbeatResponse answered;
    REQUIRE(Answer(read.d, read.first, 1, {{1, {0, 10}}}, &answered).ok());
  }
  // The crash: the journal ends with the report that gave the held splits
  // back, before the task made to take them.
  {
    Journal::Recovered recovered;
    absl::StatusOr<Journal> journal = Journal::Open(config.work_dir, &recovered);
    REQUIRE(journal.ok());
    REQUIRE(recovered.updates.size() >= 2);
    const Journal::Recovered::Record& last = recovered.updates.back();
    REQUIRE(last.update.has_create_task());
    REQUIRE(recovered.updates[recovered.updates.size() - 2].update.has_report_taken_positions());
    const std::string file = last.file;
    const int64_t offset = last.offset;
    journal = absl::UnknownError("closed");  // unlocks the work dir
    std::filesystem::resize_file(file, static_cast<uintmax_t>(offset));
  }
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());
  // Not at the next loss, release or drain: the monitor's first pass.
  std::vector<int64_t> made;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (made.empty() && std::chrono::steady_clock::now() < deadline) {
    made = NewTaskIds(Heartbeat(d, "b:2", {other}));
    if (made.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(made.size() == 1);
  const proto::GetSplitsResponse rerun = Splits(d, iteration, made[0], 4, 1);
  CHECK(Seqs(rerun) == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(Skips(rerun) == std::vector<std::pair<int64_t, std::vector<int64_t>>>{{1, {0, 10}}});
}

TEST_CASE("held splits: a second loss during a hold asks every client again, for both tasks' splits",
          "[dispatcher][exactly_once]") {
  SharedRead read(2);
  auto& [d, first, second, iteration, lost, other] = read;
  REQUIRE(Seqs(Splits(d, iteration, other, 4, 1)) == std::vector<int64_t>{5, 6, 7, 8});
  Heartbeat(d, "c:3");
  Shutdown(d, "a:1");
  proto::ClientHeartbeatResponse answered;
  REQUIRE(Answer(d, first, 1, {{1, {0, 2}}}, &answered).ok());
  Shutdown(d, "b:2");
  for (int64_t client : {first, second}) {
    const proto::ClientHeartbeatResponse beat = ClientBeat(d, client);
    CHECK(beat.report_hold() == 2);
    CHECK(std::vector<int64_t>(beat.report_splits().begin(), beat.report_splits().end()) ==
          std::vector<int64_t>{1, 5, 5, 9});
  }
  // An answer to hold 1, now past, is not taken: neither its positions nor
  // as an answer to hold 2 (split 6's [0, 1) is not skipped below).
  REQUIRE(Answer(d, first, 1, {{6, {0, 1}}}, &answered).ok());
  CHECK(answered.report_hold() == 2);
  REQUIRE(Answer(d, first, 2, {{1, {0, 2}}, {6, {3, 4}}}, &answered).ok());
  REQUIRE(Answer(d, second, 2, {{1, {2, 3}}, {5, {0, 10}}}, &answered).ok());
  const int64_t rerun_task = TaskOn(d, iteration, "c:3");
  const proto::GetSplitsResponse rerun = Splits(d, iteration, rerun_task, 4, 1);
  CHECK(Seqs(rerun) == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(Skips(rerun) == std::vector<std::pair<int64_t, std::vector<int64_t>>>{{1, {0, 3}}});
  const proto::GetSplitsResponse rest = Splits(d, iteration, rerun_task, 4, 2);
  CHECK(Seqs(rest) == std::vector<int64_t>{5, 6, 7, 8});
  CHECK(Skips(rest) == std::vector<std::pair<int64_t, std::vector<int64_t>>>{{5, {0, 10}}, {6, {3, 4}}});
}

TEST_CASE("held splits: a client released for silence during a hold may not come back",
          "[dispatcher][exactly_once]") {
  DispatcherConfig config = TestConfig();
  config.client_timeout_ms = 200;
  config.worker_timeout_ms = 60000;
  config.job_gc_timeout_ms = 60000;
  DispatcherImpl d(config);
  REQUIRE(d.Start().ok());  // the monitor that releases silent clients
  Heartbeat(d, "a:1");
  Heartbeat(d, "b:2");
  const int64_t job = RangeJobOverSplits(d, /*exactly_once=*/true, "shared");
  const proto::GetOrCreateIterationResponse joined = Iteration(d, job);
  const int64_t first = joined.iteration_client_id();
  const int64_t second = Iteration(d, job).iteration_client_id();
  const int64_t iteration = joined.iteration_id();
  const int64_t other = TaskOn(d, iteration, "b:2");
  REQUIRE(ClientBeat(d, second).tasks_size() == 2);  // it took tasks
  REQUIRE(Seqs(Splits(d, iteration, TaskOn(d, iteration, "a:1"), 4, 1)) == std::vector<int64_t>{1, 2, 3, 4});
  Shutdown(d, "a:1");
  proto::ClientHeartbeatResponse answered;
  REQUIRE(Answer(d, first, 1, {{1, {0, 10}}}, &answered).ok());
  // The second client goes silent; once it is released, the held splits
  // are handed out without its report.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<int64_t> seqs;
  for (int64_t request = 1; seqs.empty() && std::chrono::steady_clock::now() < give_up; ++request) {
    ClientBeat(d, first);
    Heartbeat(d, "b:2", {other});
    seqs = Seqs(Splits(d, iteration, other, 4, request));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // 5-8 went before the release, as new splits; the held 1-4 after it.
  REQUIRE(seqs == std::vector<int64_t>{5, 6, 7, 8});
  for (int64_t request = 100;
       seqs != std::vector<int64_t>{1, 2, 3, 4} && std::chrono::steady_clock::now() < give_up; ++request) {
    ClientBeat(d, first);
    seqs = Seqs(Splits(d, iteration, other, 4, request));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(seqs == std::vector<int64_t>{1, 2, 3, 4});
  proto::ClientHeartbeatResponse back;
  proto::ClientHeartbeatRequest request;
  request.set_iteration_client_id(second);
  request.set_client_secret(d.ClientSecretOf(second));
  const absl::Status status = Call(d, &DispatcherImpl::ClientHeartbeat, request, &back);
  CHECK(absl::IsFailedPrecondition(status));
  CHECK(status.message() ==
        "iteration client " + std::to_string(second) +
            " was released after 200 ms without a heartbeat (client_timeout_ms), and its shared exactly_once "
            "read "
            "(iteration " +
            std::to_string(iteration) +
            ") has since lost a task whose splits ran again without knowing what this client took of them: "
            "it "
            "may not come back, or elements would repeat; raise client_timeout_ms on the dispatcher for "
            "trainers "
            "that pause longer");
}

TEST_CASE("held splits: a report cut short, or past the iteration's bound, fails the read for every client",
          "[dispatcher][exactly_once]") {
  SharedRead read(2);
  auto& [d, first, second, iteration, lost, other] = read;
  Shutdown(d, "a:1");
  proto::ClientHeartbeatResponse answered;
  SECTION("cut short") {
    proto::ClientHeartbeatRequest request;
    request.set_iteration_client_id(first);
    request.set_client_secret(d.ClientSecretOf(first));
    request.set_answered_hold(1);
    request.set_taken_positions_cut(true);
    CallOk(d, &DispatcherImpl::ClientHeartbeat, request);
  }
  SECTION("past the bound") {
    // Each answer below holds 2^20 - 1 numbers (a seq and 2^19 - 1 pairs):
    // two fit in the iteration's 2^21, a third does not.
    std::vector<int64_t> many;
    for (int64_t i = 0; i < kMaxTakenPositionNumbers - 2; ++i) many.push_back(2 * i);
    REQUIRE(Answer(d, first, 1, {{1, many}}, &answered).ok());
    REQUIRE(Answer(d, second, 1, {{3, many}}, &answered).ok());
    REQUIRE(ClientBeat(d, second).error_code() == 0);  // both fit
    // A later hold's answers would pass it.
    Heartbeat(d, "c:3");
    REQUIRE(Seqs(Splits(d, iteration, other, 4, 1)).size() == 4);
    Shutdown(d, "b:2");
    REQUIRE(Answer(d, first, 2, {{1, many}}, &answered).ok());
  }
  for (int64_t client : {first, second}) {
    const proto::ClientHeartbeatResponse beat = ClientBeat(d, client);
    CHECK(beat.error_code() == static_cast<int>(absl::StatusCode::kResourceExhausted));
    CHECK(absl::StartsWith(beat.error_message(), "ClientHeartbeat: iteration " + std::to_string(iteration) +
                                                     " (a shared exactly_once read) "));
    CHECK(absl::StrContains(beat.error_message(), "so the read stops"));
  }
}

TEST_CASE("held splits: taken positions count towards the tenant's quota of skip list numbers",
          "[dispatcher][exactly_once]") {
  DispatcherConfig config = TestConfig();
  config.max_restore_numbers = 10;
  SharedRead read(2, config);
  auto& [d, first, second, iteration, lost, other] = read;
  Shutdown(d, "a:1");
  proto::ClientHeartbeatResponse answered;
  REQUIRE(Answer(d, first, 1, {{1, {0, 2, 4, 6}}}, &answered).ok());  // 5 numbers
  REQUIRE(ClientBeat(d, first).error_code() == 0);
  REQUIRE(Answer(d, second, 1, {{2, {0, 2, 4, 6, 8, 9}}}, &answered).ok());  // 7 more: past 10
  const proto::ClientHeartbeatResponse beat = ClientBeat(d, first);
  CHECK(beat.error_code() == static_cast<int>(absl::StatusCode::kResourceExhausted));
  CHECK(beat.error_message() ==
        "ClientHeartbeat: the clients hold 5 numbers of skip lists (restored reads', and positions shared "
        "reads "
        "took of held splits) and this adds 7; that would pass the dispatcher's quota max_restore_numbers "
        "= 10 "
        "for all tenants together (finished jobs and the datasets they used are forgotten after "
        "job_retention_ms; an operator may raise the quota); iteration " +
            std::to_string(iteration) +
            " (a shared exactly_once read) stops rather than rerun its lost task's splits without what its "
            "consumers took of them");
}

TEST_CASE("held splits: malformed or oversized reports are refused before the lock, naming the field",
          "[dispatcher][exactly_once]") {
  SharedRead read(1);
  DispatcherImpl& d = read.d;
  const int64_t client = read.first;
  proto::ClientHeartbeatResponse response;
  absl::Status status = Answer(d, client, 1, {{1, {5, 3}}}, &response);
  CHECK(absl::IsInvalidArgument(status));
  CHECK(status.message() ==
        "ClientHeartbeat: taken_positions of split 1 has [5, 3): empty, below 0, or not after the range "
        "before");
  status = Answer(d, client, 1, {{1, {0, 3, 9}}}, &response);
  CHECK(status.message() ==
        "ClientHeartbeat: taken_positions of split 1 must hold [begin, end) pairs, not 3 numbers");
  status = Answer(d, client, 1, {{0, {0, 3}}}, &response);
  CHECK(status.message() == "ClientHeartbeat: taken_positions.seq must be > 0, got 0");
  status = Answer(d, client, -1, {}, &response);
  CHECK(status.message() == "ClientHeartbeat: answered_hold must be >= 0, got -1");
  std::vector<int64_t> many;
  for (int64_t i = 0; i < kMaxTakenPositionNumbers; ++i) many.push_back(2 * i);  // [0,2), [4,6), ...
  status = Answer(d, client, 1, {{1, many}}, &response);
  CHECK(absl::IsInvalidArgument(status));
  CHECK(status.message() == "ClientHeartbeat: taken_positions must be at most " +
                                std::to_string(kMaxTakenPositionNumbers) + " numbers, got " +
                                std::to_string(kMaxTakenPositionNumbers + 1) + " numbers");
}

TEST_CASE("held splits: a hold, its reports and taken positions survive a snapshot",
          "[dispatcher][exactly_once]") {
  proto::JobParams params;
  params.set_processing_mode(proto::DISTRIBUTED_EPOCH);
  params.set_exactly_once(true);
  params.set_job_name("shared");
  DispatcherState state = StateWithIteration(params);
  auto apply = [&state](const proto::Update& update) { ApplyOk(state, update); };
  proto::Update update;
  for (int64_t client : {5, 6}) {
    update.Clear();
    update.mutable_acquire_iteration_client()->set_iteration_client_id(client);
    update.mutable_acquire_iteration_client()->set_iteration_id(1);
    apply(update);
  }
  update.Clear();
  update.mutable_register_worker()->set_address("a:1");
  apply(update);
  update.Clear();
  update.mutable_create_task()->set_task_id(1);
  update.mutable_create_task()->set_iteration_id(1);
  update.mutable_create_task()->set_worker_address("a:1");
  apply(update);
  update.Clear();
  update.mutable_lease_splits()->set_task_id(1);
  update.mutable_lease_splits()->set_request_id(1);
  auto* lease = update.mutable_lease_splits()->add_splits();
  lease->set_seq(1);
  lease->set_count(2);
  lease->set_begin(0);
  lease->set_end(20);
  lease->set_split_size(10);
  apply(update);
  update.Clear();
  update.mutable_lose_task()->set_task_id(1);
  update.mutable_lose_task()->set_reason("unreachable");
  apply(update);
  CHECK(state.FindIteration(1)->hold == 1);
  CHECK(state.FindIteration(1)->awaiting_reports == std::set<int64_t>{5, 6});
  update.Clear();
  auto* report = update.mutable_report_taken_positions();
  report->set_iteration_id(1);
  report->set_iteration_client_id(5);
  report->set_hold(1);
  auto* taken = report->add_positions();
  taken->set_seq(2);
  taken->add_delivered(1);
  taken->add_delivered(4);
  apply(update);

  absl::StatusOr<DispatcherState> restored = DispatcherState::FromSnapshot(state.ToSnapshot());
  REQUIRE(restored.ok());
  const DispatcherState::Iteration& iteration = *restored->FindIteration(1);
  CHECK(iteration.hold == 1);
  CHECK(iteration.awaiting_reports == std::set<int64_t>{6});
  CHECK(CountSplits(iteration.held_splits) == 2);
  CHECK(iteration.returned_splits.empty());
  CHECK(iteration.taken_positions == std::map<int64_t, IntRanges>{{2, {{1, 4}}}});
  CHECK_FALSE(iteration.finished);
  // The last report returns them, in the restored state as in the first.
  report->set_iteration_client_id(6);
  report->clear_positions();
  REQUIRE(restored->Apply(update).ok());
  CHECK(restored->FindIteration(1)->held_splits.empty());
  CHECK(CountSplits(restored->FindIteration(1)->returned_splits) == 2);
  // A report from a client not of the iteration changes nothing.
  report->set_iteration_client_id(9);
  CHECK(absl::IsFailedPrecondition(restored->Apply(update)));
}

}  // namespace
}  // namespace sluice::dispatcher
