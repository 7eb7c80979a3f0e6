// Saved reads of service jobs (issue 20, section 2), with the real
// dispatcherd and workerd: a distributed_epoch, exactly_once read saved
// mid-epoch and restored gives the rest of the epoch exactly once, also
// after a worker or the dispatcher is killed, for the consumers of a shared
// job merged into a job checkpoint and restored on another number of
// consumers, and through `sluice read --save-state/--restore` after the
// reader is killed with SIGKILL.
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "sluice/dataset.h"
#include "sluice/distribute.h"
#include "sluice/iterator.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/security_helpers.h"
#include "tests/integration/test_cluster.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::MakeConsumerOrFail;
using testing::MakeOrFail;
using testing::RestoreOrFail;
using testing::SaveOrFail;
using testing::Take;
using testing::TestCluster;

constexpr int64_t kEpoch = 20000;

// Every cluster here has auth on, so that each restore also proves its
// state (the restore keys of issue 32): one client token for the tests'
// readers.
struct AuthSetup {
  AuthSetup() { setenv("SLUICE_TOKEN_FILE", dir.File("client.token").c_str(), 1); }  // for the CLI's runs
  ~AuthSetup() { unsetenv("SLUICE_TOKEN_FILE"); }
  testing::TempDir dir;
  std::vector<std::string> tokens = testing::TokenFlags(dir);
  testing::ScopedClientSecurity security{{.token = testing::kClientToken}};
};
class AuthCluster : private AuthSetup, public TestCluster {
 public:
  explicit AuthCluster(TestCluster::Options options) : TestCluster(WithTokens(std::move(options), tokens)) {}

 private:
  static TestCluster::Options WithTokens(TestCluster::Options options,
                                         const std::vector<std::string>& tokens) {
    options.dispatcher_args.insert(options.dispatcher_args.end(), tokens.begin(), tokens.end());
    options.worker_args.insert(options.worker_args.end(), tokens.begin(), tokens.end());
    return options;
  }
};

Dataset Pipeline(const std::string& url, const std::string& job_name = "") {
  return Dataset::Range(kEpoch).ReadFromService({.service = url,
                                                 .processing_mode = ProcessingMode::kDistributedEpoch,
                                                 .job_name = job_name,
                                                 .exactly_once = true});
}

// Every value of the epoch, exactly once.
void CheckExactlyOnce(const std::vector<int64_t>& values) { testing::CheckEachValueTimes(values, kEpoch, 1); }

// A new iterator reads `count` values into `values` and saves; it then
// reads 500 more, which are not part of the saved run; its state.
std::string ReadAndSave(const Dataset& dataset, int64_t count, std::vector<int64_t>* values) {
  Iterator iterator = MakeOrFail(dataset);
  Take(iterator, count, values);
  const std::string state = SaveOrFail(iterator);
  std::vector<int64_t> after;
  Take(iterator, 500, &after);
  return state;
}

TEST_CASE("service checkpoint: a sole reader saved mid-epoch resumes with the rest, exactly once",
          "[service][checkpoint]") {
  AuthCluster cluster({.num_workers = 2, .dispatcher_args = {"--elements-per-split", "16"}});
  const Dataset dataset = Pipeline(cluster.ServiceUrl());
  std::vector<int64_t> values;
  const std::string state = ReadAndSave(dataset, 7001, &values);
  Iterator second = RestoreOrFail(dataset, state);
  std::vector<int64_t> rest;
  Take(second, 100, &rest);
  // A worker lost mid-way: its splits are read again, and what of them
  // came before is dropped, as in any exactly_once read.
  cluster.KillWorker(0);
  Take(second, -1, &rest);
  values.insert(values.end(), rest.begin(), rest.end());
  CheckExactlyOnce(values);
  // Saved again at its end, it resumes with nothing.
  const std::string end_state = SaveOrFail(second);
  Iterator third = RestoreOrFail(dataset, end_state);
  std::vector<int64_t> none;
  Take(third, -1, &none);
  CHECK(none.empty());
}

TEST_CASE(
    "service checkpoint: a restore needs nothing of the saved job: collected, or a dispatcher without "
    "its journal",
    "[service][checkpoint]") {
  AuthCluster cluster({.num_workers = 2,
                       .dispatcher_args = {"--job-gc-timeout-ms", "100", "--job-retention-ms", "100",
                                           "--elements-per-split", "16"}});
  const Dataset dataset = Pipeline(cluster.ServiceUrl());
  std::vector<int64_t> values;
  const std::string state = ReadAndSave(dataset, 4321, &values);
  SECTION("the saved job collected") {
    // Released with its iterator, then collected and forgotten.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  SECTION("the dispatcher restarted with no work dir, so with no jobs") {
    cluster.RestartDispatcher();
    cluster.WaitForRegisteredWorkers(2);
  }
  Iterator restored = RestoreOrFail(dataset, state);
  Take(restored, -1, &values);
  CheckExactlyOnce(values);
}

TEST_CASE("service checkpoint: with repeat after distribute, a restore goes on with the later epochs",
          "[service][checkpoint]") {
  AuthCluster cluster({.num_workers = 2, .dispatcher_args = {"--elements-per-split", "16"}});
  const Dataset dataset = Pipeline(cluster.ServiceUrl()).Repeat(2);
  for (const int64_t before : {int64_t{5000}, kEpoch + 3000}) {
    std::vector<int64_t> values;
    const std::string state = ReadAndSave(dataset, before, &values);
    Iterator restored = RestoreOrFail(dataset, state);
    Take(restored, -1, &values);
    std::map<int64_t, int> seen;
    for (int64_t v : values) ++seen[v];
    INFO("saved after " << before);
    CHECK(values.size() == static_cast<size_t>(2 * kEpoch));
    CHECK(seen.size() == static_cast<size_t>(kEpoch));
    CHECK(std::all_of(seen.begin(), seen.end(), [](const auto& entry) { return entry.second == 2; }));
  }
}

TEST_CASE("service checkpoint: the saved state survives a dispatcher restart (kill -9, work dir)",
          "[service][checkpoint]") {
  testing::TempDir work;
  AuthCluster cluster({.num_workers = 2, .dispatcher_args = {"--work-dir", work.File("journal")}});
  const Dataset dataset = Pipeline(cluster.ServiceUrl());
  std::vector<int64_t> values;
  const std::string state = ReadAndSave(dataset, 12345, &values);
  cluster.RestartDispatcher();
  Iterator second = RestoreOrFail(dataset, state);
  Take(second, -1, &values);
  CheckExactlyOnce(values);
}

// Consumers of shared job `job` read `counts[i]` elements each, in turns of
// 50, and save at once; their states, and the values they gave.
std::vector<std::string> ReadShared(const Dataset& dataset, const std::vector<int64_t>& counts,
                                    std::vector<int64_t>* values) {
  std::vector<Iterator> consumers;
  for (size_t i = 0; i < counts.size(); ++i) consumers.push_back(MakeConsumerOrFail(dataset));
  std::vector<int64_t> taken(counts.size(), 0);
  for (bool more = true; more;) {
    more = false;
    for (size_t i = 0; i < counts.size(); ++i) {
      const int64_t turn = std::min<int64_t>(50, counts[i] - taken[i]);
      if (turn <= 0) continue;
      Take(consumers[i], turn, values);
      taken[i] += turn;
      more = true;
    }
  }
  std::vector<std::string> states;
  for (Iterator& consumer : consumers) states.push_back(SaveOrFail(consumer));
  return states;
}

// `num_consumers` consumers restore `job_checkpoint` and read together to
// the end; the values they gave.
void RestoreShared(const Dataset& dataset, const std::string& job_checkpoint, int64_t num_consumers,
                   std::vector<int64_t>* values) {
  std::vector<Iterator> consumers;
  for (int64_t i = 0; i < num_consumers; ++i) {
    consumers.push_back(
        RestoreOrFail(dataset, job_checkpoint, {.consumer_index = i, .num_consumers = num_consumers}));
  }
  std::vector<std::vector<int64_t>> parts(num_consumers);
  std::vector<absl::Status> statuses(num_consumers);
  std::vector<std::thread> threads;
  // Catch's assertions are not thread-safe: the threads only read.
  for (int64_t i = 0; i < num_consumers; ++i) {
    threads.emplace_back([&, i] {
      while (true) {
        absl::StatusOr<std::optional<Element>> element = consumers[i].GetNextAsOptional();
        if (!element.ok() || !element->has_value()) {
          statuses[i] = element.status();
          return;
        }
        parts[i].push_back((*element)->components.at(0).data<int64_t>()[0]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& status : statuses) CHECK(status.ok());
  for (const std::vector<int64_t>& part : parts) values->insert(values->end(), part.begin(), part.end());
}

TEST_CASE("service checkpoint: the consumers' states merge and restore on another number of consumers",
          "[service][checkpoint]") {
  AuthCluster cluster({.num_workers = 2, .dispatcher_args = {"--elements-per-split", "16"}});
  SECTION("2 consumers saved, 3 restore") {
    const Dataset dataset = Pipeline(cluster.ServiceUrl(), "elastic-2-3");
    std::vector<int64_t> values;
    const std::vector<std::string> states = ReadShared(dataset, {3000, 4100}, &values);
    absl::StatusOr<std::string> merged = MergeSavedStates(states);
    REQUIRE(merged.ok());
    RestoreShared(dataset, *merged, 3, &values);
    CheckExactlyOnce(values);
  }
  SECTION("3 consumers saved, 1 restores") {
    const Dataset dataset = Pipeline(cluster.ServiceUrl(), "elastic-3-1");
    std::vector<int64_t> values;
    const std::vector<std::string> states = ReadShared(dataset, {2000, 2500, 1500}, &values);
    absl::StatusOr<std::string> merged = MergeSavedStates(states);
    REQUIRE(merged.ok());
    RestoreShared(dataset, *merged, 1, &values);
    CheckExactlyOnce(values);
  }
}

TEST_CASE("service checkpoint: reads that cannot be saved or restored say why", "[service][checkpoint]") {
  AuthCluster cluster({.num_workers = 1, .dispatcher_args = {"--elements-per-split", "16"}});
  SECTION("distributed_epoch without exactly_once") {
    Iterator iterator = MakeOrFail(Dataset::Range(100).ReadFromService(
        {.service = cluster.ServiceUrl(), .processing_mode = ProcessingMode::kDistributedEpoch}));
    const absl::StatusOr<std::string> state = iterator.Save();
    CHECK(absl::IsFailedPrecondition(state.status()));
    CHECK_THAT(std::string(state.status().message()),
               Catch::Matchers::Contains("saving a distributed_epoch read needs exactly_once: true"));
  }
  SECTION("states of two repetitions do not merge") {
    // Two iterators of one dataset read repetitions 0 and 1 of its job.
    const Dataset dataset = Pipeline(cluster.ServiceUrl(), "two-reps");
    Iterator first = MakeOrFail(dataset);
    Iterator second = MakeOrFail(dataset);
    std::vector<int64_t> values;
    Take(first, 10, &values);
    Take(second, 10, &values);
    const absl::StatusOr<std::string> merged = MergeSavedStates({SaveOrFail(first), SaveOrFail(second)});
    CHECK(absl::IsFailedPrecondition(merged.status()));
    CHECK(merged.status().message() ==
          "state 1: read job 'two-reps' repetition 1, and state 0 job 'two-reps' repetition 0: a job "
          "checkpoint merges the consumers of one repetition of one job");
  }
  SECTION("one consumer's state restored on 3 consumers") {
    const Dataset dataset = Pipeline(cluster.ServiceUrl());
    Iterator first = MakeOrFail(dataset);
    std::vector<int64_t> values;
    Take(first, 10, &values);
    const std::string state = SaveOrFail(first);
    const absl::StatusOr<Iterator> restored =
        dataset.MakeIterator(state, {.consumer_index = 0, .num_consumers = 3});
    CHECK(absl::IsInvalidArgument(restored.status()));
    CHECK(restored.status().message() ==
          "restore: one consumer's saved state restores one consumer, not 3; merge the states that all "
          "consumers saved at one step into a job checkpoint first (sluice.merge_saved_states in Python, "
          "sluice checkpoint merge on the command line)");
  }
  SECTION("a job checkpoint whose consumers held a partial batch, restored on another count") {
    const Dataset dataset = Pipeline(cluster.ServiceUrl(), "held").Batch(7);
    std::vector<Iterator> consumers;
    consumers.push_back(MakeConsumerOrFail(dataset));
    consumers.push_back(MakeConsumerOrFail(dataset));
    // A batch hands out whole batches, so its buffer is empty between
    // them: 2 consumers restore on 3 from there.
    std::vector<int64_t> ignored;
    for (Iterator& consumer : consumers) REQUIRE(consumer.GetNext().ok());
    std::vector<std::string> states;
    for (Iterator& consumer : consumers) states.push_back(SaveOrFail(consumer));
    absl::StatusOr<std::string> merged = MergeSavedStates(states);
    REQUIRE(merged.ok());
    CHECK(dataset.MakeIterator(*merged, {.consumer_index = 2, .num_consumers = 3}).ok());
    // A shuffle after distribute holds elements (its buffer, full once it
    // gave one): only as many consumers as saved can take them back.
    const Dataset prefetched = Pipeline(cluster.ServiceUrl(), "held-shuffle").Shuffle(50, 7);
    Iterator a = MakeOrFail(prefetched);
    REQUIRE(a.GetNext().ok());
    absl::StatusOr<std::string> alone = MergeSavedStates({SaveOrFail(a)});
    REQUIRE(alone.ok());
    const absl::StatusOr<Iterator> refused =
        prefetched.MakeIterator(*alone, {.consumer_index = 0, .num_consumers = 2});
    CHECK(absl::IsFailedPrecondition(refused.status()));
    CHECK_THAT(
        std::string(refused.status().message()),
        Catch::Matchers::StartsWith("restore: merged state 0 holds 49") &&
            Catch::Matchers::Contains(" elements in the steps after distribute (a partial batch, a prefetch "
                                      "or shuffle buffer), which only its own consumer can give: restore "
                                      "this job checkpoint on 1 consumers"));
    CHECK(prefetched.MakeIterator(*alone, {.consumer_index = 0, .num_consumers = 1}).ok());
  }
  SECTION("states of different pipelines do not merge") {
    Iterator a = MakeOrFail(Pipeline(cluster.ServiceUrl(), "m1"));
    Iterator b = MakeOrFail(Pipeline(cluster.ServiceUrl(), "m2").Map("square"));
    const absl::StatusOr<std::string> merged = MergeSavedStates({SaveOrFail(a), SaveOrFail(b)});
    CHECK(absl::IsFailedPrecondition(merged.status()));
    CHECK_THAT(std::string(merged.status().message()),
               Catch::Matchers::StartsWith("state 1: is from another pipeline"));
    // Named states (a file's path, as `sluice checkpoint merge` gives) are
    // named by their names.
    const absl::StatusOr<std::string> named = MergeSavedStates(
        std::vector<NamedState>{{"first.state", SaveOrFail(a)}, {"second.state", SaveOrFail(b)}});
    CHECK(absl::IsFailedPrecondition(named.status()));
    CHECK_THAT(std::string(named.status().message()),
               Catch::Matchers::StartsWith("second.state: is from another pipeline (fingerprint "));
  }
}

// Up to `count` steps (all, for -1): every replica's rows, in order.
void TakeSteps(DistributedIterator& iterator, int64_t count, std::vector<int64_t>* values) {
  for (int64_t i = 0; count < 0 || i < count; ++i) {
    absl::StatusOr<std::optional<PerReplica>> step = iterator.GetNextAsOptional();
    INFO(step.status().ToString());
    REQUIRE(step.ok());
    if (!step->has_value()) return;
    for (const ReplicaValue& value : **step) {
      absl::StatusOr<Tensor> host = value.components.at(0).ToHostTensor();
      REQUIRE(host.ok());
      for (int64_t row = 0; row < host->dim(0); ++row) values->push_back(host->data<int64_t>()[row]);
    }
  }
}

DistributedDataset DistributedOrFail(const Dataset& dataset) {
  absl::StatusOr<ReplicaSet> replicas = ReplicaSet::Create({"CPU:0", "CPU:1"});
  REQUIRE(replicas.ok());
  absl::StatusOr<DistributedDataset> distributed =
      DistributeDataset(dataset, *replicas, {.prefetch_buffer_size = 3});
  INFO(distributed.status().ToString());
  REQUIRE(distributed.ok());
  return *std::move(distributed);
}

TEST_CASE(
    "service checkpoint: a DistributedIterator saves as of the last step it returned, prefetched steps "
    "included",
    "[service][checkpoint]") {
  AuthCluster cluster({.num_workers = 2, .dispatcher_args = {"--elements-per-split", "16"}});
  SECTION("one trainer") {
    const DistributedDataset distributed = DistributedOrFail(Pipeline(cluster.ServiceUrl()).Batch(8));
    std::vector<int64_t> values;
    int64_t before_save = 0;
    std::string state;
    {
      absl::StatusOr<DistributedIterator> first = distributed.MakeIterator();
      REQUIRE(first.ok());
      TakeSteps(*first, 301, &values);
      before_save = static_cast<int64_t>(values.size());
      // Let the prefetcher fill its 3 steps, which the state must carry.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      absl::StatusOr<std::string> saved = first->Save();
      REQUIRE(saved.ok());
      state = *saved;
      CHECK(first->Save(3).status().message() ==
            "DistributedIterator::Save: steps_read_ahead must be 0 to 2, not 3");
      std::vector<int64_t> after;
      TakeSteps(*first, 5, &after);
    }
    absl::StatusOr<DistributedIterator> second = distributed.MakeIterator(state);
    INFO(second.status().ToString());
    REQUIRE(second.ok());
    TakeSteps(*second, -1, &values);
    CheckExactlyOnce(values);
    // A plain Iterator takes the same state, prefetched steps first.
    Iterator plain = RestoreOrFail(Pipeline(cluster.ServiceUrl()).Batch(8), state);
    std::vector<int64_t> again(values.begin(), values.begin() + before_save);
    while (true) {
      absl::StatusOr<std::optional<Element>> batch = plain.GetNextAsOptional();
      REQUIRE(batch.ok());
      if (!batch->has_value()) break;
      const Tensor& rows = (*batch)->components.at(0);
      for (int64_t row = 0; row < rows.dim(0); ++row) again.push_back(rows.data<int64_t>()[row]);
    }
    CheckExactlyOnce(again);
  }
  SECTION("two trainers of a shared job, restored as three") {
    const DistributedDataset distributed =
        DistributedOrFail(Pipeline(cluster.ServiceUrl(), "trainers").Batch(8));
    std::vector<int64_t> values;
    std::vector<std::string> states;
    {
      // Each trainer has its own DistributedDataset, as in its own process
      // (one dataset's iterators are successive repetitions).
      std::vector<DistributedDataset> datasets;
      std::vector<DistributedIterator> trainers;
      for (int i = 0; i < 2; ++i) {
        datasets.push_back(DistributedOrFail(Pipeline(cluster.ServiceUrl(), "trainers").Batch(8)));
        absl::StatusOr<DistributedIterator> trainer = datasets.back().MakeIterator();
        REQUIRE(trainer.ok());
        trainers.push_back(*std::move(trainer));
      }
      for (int round = 0; round < 40; ++round) {
        for (DistributedIterator& trainer : trainers) TakeSteps(trainer, 3, &values);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (DistributedIterator& trainer : trainers) {
        absl::StatusOr<std::string> saved = trainer.Save();
        REQUIRE(saved.ok());
        states.push_back(*saved);
      }
    }
    absl::StatusOr<std::string> merged = MergeSavedStates(states);
    REQUIRE(merged.ok());
    std::vector<DistributedIterator> restored;
    for (int64_t i = 0; i < 3; ++i) {
      absl::StatusOr<DistributedIterator> trainer =
          distributed.MakeIterator(*merged, {.consumer_index = i, .num_consumers = 3});
      INFO(trainer.status().ToString());
      REQUIRE(trainer.ok());
      restored.push_back(*std::move(trainer));
    }
    // In turns, so that none waits on a buffer another holds.
    std::vector<bool> done(3, false);
    while (std::count(done.begin(), done.end(), true) < 3) {
      for (int i = 0; i < 3; ++i) {
        if (done[i]) continue;
        const size_t before = values.size();
        absl::StatusOr<std::optional<PerReplica>> step = restored[i].GetNextAsOptional();
        REQUIRE(step.ok());
        if (!step->has_value()) {
          done[i] = true;
          continue;
        }
        for (const ReplicaValue& value : **step) {
          absl::StatusOr<Tensor> host = value.components.at(0).ToHostTensor();
          REQUIRE(host.ok());
          for (int64_t row = 0; row < host->dim(0); ++row) values.push_back(host->data<int64_t>()[row]);
        }
        CHECK(values.size() > before);
      }
    }
    CheckExactlyOnce(values);
  }
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  return lines;
}

TEST_CASE("service checkpoint: sluice read killed with SIGKILL resumes after its last saved multiple of N",
          "[service][checkpoint][cli]") {
  AuthCluster cluster({.num_workers = 2, .dispatcher_args = {"--elements-per-split", "16"}});
  testing::TempDir dir;
  const std::string pipeline = dir.File("p.yaml");
  {
    std::ofstream out(pipeline);
    out << "- range: 2000000\n- distribute: {service: \"" << cluster.ServiceUrl()
        << "\", processing_mode: distributed_epoch, exactly_once: true}\n";
  }
  const std::string sluice = SLUICE_CLI;
  const std::string state = dir.File("state");
  constexpr int kEvery = 1000;
  // Killed mid-read, once it printed 20,000 lines (bounded to 30 s): the
  // state is as of the last multiple of 1000 saved, which is the last one
  // printed or the one before (the kill can fall between a line and its
  // save).
  const std::string out = dir.File("first.out");
  testing::RunCommand(
      absl::StrCat(sluice, " read '", pipeline, "' --save-state '", state, "' --save-every ", kEvery, " > '",
                   out, "' & reader=$!; for i in $(seq 600); do [ $(wc -l < '", out,
                   "') -ge 20000 ] && break; sleep 0.05; done; kill -9 $reader; wait $reader"));
  const std::vector<std::string> printed = Lines(testing::ReadFileOrEmpty(out));
  INFO("first read printed " << printed.size());
  REQUIRE(printed.size() >= 20000);
  REQUIRE(printed.size() < 2000000);
  const testing::CommandResult second =
      testing::RunCommand(absl::StrCat(sluice, " read '", pipeline, "' --restore '", state, "'"));
  REQUIRE(second.exit_code == 0);
  const std::vector<std::string> rest = Lines(second.out);
  const size_t saved = 2000000 - rest.size();
  INFO("restored read printed " << rest.size());
  const size_t last_multiple = printed.size() - printed.size() % kEvery;
  CHECK((saved == last_multiple || saved + kEvery == last_multiple));
  std::vector<std::string> all(printed.begin(),
                               printed.begin() + static_cast<int64_t>(std::min(saved, printed.size())));
  all.insert(all.end(), rest.begin(), rest.end());
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
  CHECK(all.size() == 2000000);

  // Several consumers: merged, then resumed by one of two.
  const std::string s0 = dir.File("s0"), s1 = dir.File("s1"), job = dir.File("job");
  const std::string shared = absl::StrCat(sluice, " read '", pipeline, "' --job-name cli-elastic");
  const testing::CommandResult a =
      testing::RunCommand(absl::StrCat(shared, " --limit 1500 --save-state '", s0, "'"));
  const testing::CommandResult b =
      testing::RunCommand(absl::StrCat(shared, " --limit 2500 --save-state '", s1, "'"));
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  const testing::CommandResult merged =
      testing::RunCommand(absl::StrCat(sluice, " checkpoint merge '", s0, "' '", s1, "' -o '", job, "'"));
  CHECK(merged.exit_code == 0);
  CHECK(merged.out == absl::StrCat("merged 2 states into ", job, "\n"));
  // The two resume together, sharing what is left.
  testing::CommandResult r0, r1;
  std::thread second_consumer([&] {
    r1 = testing::RunCommand(
        absl::StrCat(shared, " --restore '", job, "' --consumer-index 1 --num-consumers 2"));
  });
  r0 = testing::RunCommand(
      absl::StrCat(shared, " --restore '", job, "' --consumer-index 0 --num-consumers 2"));
  second_consumer.join();
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  std::vector<std::string> union_lines = Lines(a.out);
  for (const std::string* out : std::vector<const std::string*>{&b.out, &r0.out, &r1.out}) {
    for (const std::string& line : Lines(*out)) union_lines.push_back(line);
  }
  std::sort(union_lines.begin(), union_lines.end());
  CHECK(std::adjacent_find(union_lines.begin(), union_lines.end()) == union_lines.end());
  CHECK(union_lines.size() == 2000000);
  const testing::CommandResult bad_merge =
      testing::RunCommand(absl::StrCat(sluice, " checkpoint merge '", pipeline, "' -o '", job, "' 2>&1"));
  CHECK(bad_merge.exit_code == 2);
  CHECK(bad_merge.out ==
        absl::StrCat("sluice: ", pipeline,
                     ": does not parse as a saved iterator state (not Iterator::Save's bytes?)\n"));
}

// Every integer in `text`, in order.
std::vector<int64_t> Integers(const std::string& text) {
  std::vector<int64_t> values;
  int64_t value = 0;
  bool in_number = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      in_number = true;
    } else if (in_number) {
      values.push_back(value);
      value = 0;
      in_number = false;
    }
  }
  if (in_number) values.push_back(value);
  return values;
}

TEST_CASE("service checkpoint: sluice read --replicas saves and resumes as of the last step printed",
          "[service][checkpoint][cli]") {
  AuthCluster cluster({.num_workers = 2, .dispatcher_args = {"--elements-per-split", "16"}});
  testing::TempDir dir;
  const std::string pipeline = dir.File("p.yaml");
  {
    std::ofstream out(pipeline);
    out << "- range: " << kEpoch << "\n- distribute: {service: \"" << cluster.ServiceUrl()
        << "\", processing_mode: distributed_epoch, exactly_once: true}\n- batch: 10\n";
  }
  const std::string read = absl::StrCat(SLUICE_CLI, " read '", pipeline, "' --replicas CPU:0,CPU:1");
  const std::string state = dir.File("state");
  const testing::CommandResult first =
      testing::RunCommand(absl::StrCat(read, " --limit 300 --save-state '", state, "'"));
  REQUIRE(first.exit_code == 0);
  REQUIRE(Lines(first.out).size() == 300);
  const testing::CommandResult second = testing::RunCommand(absl::StrCat(read, " --restore '", state, "'"));
  REQUIRE(second.exit_code == 0);
  std::vector<int64_t> values;
  for (const std::string* out : std::vector<const std::string*>{&first.out, &second.out}) {
    for (const std::string& line : Lines(*out)) {
      // {"CPU:0": [..], "CPU:1": [..]}: the device names are not values.
      const std::vector<int64_t> rows =
          Integers(absl::StrReplaceAll(line, {{"\"CPU:0\"", ""}, {"\"CPU:1\"", ""}}));
      values.insert(values.end(), rows.begin(), rows.end());
    }
  }
  CheckExactlyOnce(values);
}

}  // namespace
}  // namespace sluice
