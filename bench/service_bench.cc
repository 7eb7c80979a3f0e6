// service_bench: distributed_epoch against parallel_epochs with one worker,
// on the same pipelines, through a real dispatcherd and workerd on
// 127.0.0.1. With one worker both modes produce every element once; they
// differ in that a distributed_epoch worker reads its source positions as
// splits fetched from the dispatcher (GetSplits), while a parallel_epochs
// worker runs its source by itself. Pipelines, before `distribute`:
//
//   range(N) -> batch(256)
//   range(N) -> map(multiply 3) -> batch(256)
//
// For each it prints elements per second of both modes and the overhead of
// distributed_epoch, (parallel_epochs rate / distributed_epoch rate - 1),
// plus the same pipeline run locally for scale. Each figure is the best of
// R epochs; the modes take turns (order swapped every round). Rates run
// from the first element to the last, so that neither the start of an
// iteration (the dispatcher's task push) nor its end (the client asking
// whether the iteration finished) is counted; the whole epoch, start and
// end included, is printed too, with its own overhead. Every epoch is
// checked: N rows whose values add up to what they must.
//
//   service_bench [--elements N] [--repeats R] [--elements-per-split K]
//
// --elements-per-split passes dispatcherd's setting (default 64) through.
// Every process it starts is killed when it exits, on error paths too, and
// also if it is killed itself; a watchdog alarm ends a run that hangs.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_daemons.h"
#include "client/dataset_internal.h"
#include "service/daemon.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"

namespace {

// ---------------------------------------------------------------------------
// Measurements.

struct Epoch {
  double rate = 0;           // rows per second, first element to last
  double total_seconds = 0;  // MakeIterator to end of sequence
  double tail_seconds = 0;   // last element to end of sequence
};

// Reads one epoch (a new repetition of the job) and checks it: `rows` rows
// in all, whose int64 values add up to `sum`.
Epoch ReadEpoch(const sluice::DatasetPtr& dataset, int64_t rows, int64_t sum, const std::string& what) {
  const auto begin = Clock::now();
  auto iterator = dataset->MakeIterator(sluice::IteratorContext{});
  if (!iterator.ok()) Fail(what + ": " + std::string(iterator.status().message()));
  Clock::time_point first, last;
  int64_t first_rows = 0;
  int64_t got_rows = 0;
  int64_t got_sum = 0;
  while (true) {
    sluice::Element batch;
    bool end = false;
    absl::Status status = (*iterator)->GetNext(&batch, &end);
    if (!status.ok()) Fail(what + ": " + std::string(status.message()));
    if (end) break;
    last = Clock::now();
    const sluice::Tensor& t = batch.components.at(0);
    if (t.dtype() != sluice::DType::kInt64 || t.rank() != 1) Fail(what + ": expected int64 vectors");
    const int64_t* values = t.data<int64_t>();
    for (int64_t i = 0; i < t.dim(0); ++i) got_sum += values[i];
    if (got_rows == 0) {
      first = last;
      first_rows = t.dim(0);
    }
    got_rows += t.dim(0);
  }
  const auto done = Clock::now();
  if (got_rows != rows || got_sum != sum) {
    Fail(what + ": expected " + std::to_string(rows) + " rows adding up to " + std::to_string(sum) +
         ", got " + std::to_string(got_rows) + " adding up to " + std::to_string(got_sum));
  }
  const double seconds = std::chrono::duration<double>(last - first).count();
  if (got_rows == first_rows || seconds <= 0) Fail(what + ": one batch only; use more --elements");
  return {(got_rows - first_rows) / seconds, std::chrono::duration<double>(done - begin).count(),
          std::chrono::duration<double>(done - last).count()};
}

sluice::DatasetPtr BuildOrDie(const sluice::Dataset& dataset) {
  auto built = sluice::internal::BuildPipeline(dataset);
  if (!built.ok()) Fail("building the pipeline: " + std::string(built.status().message()));
  return *built;
}

// CPU seconds (user + system) a process has used so far, from /proc.
double CpuSeconds(pid_t pid) {
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/stat"));
  std::string field;
  // The command name (field 2) may hold spaces; it ends at the last ')'.
  std::getline(in, field, ')');
  double user_and_system = 0;
  for (int index = 3; index <= 15 && in >> field; ++index) {
    if (index >= 14) user_and_system += std::atof(field.c_str());
  }
  return user_and_system / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU used by each process of the cluster and by this reader.
struct CpuUse {
  double dispatcher = 0, worker = 0, reader = 0;
  static CpuUse Now(const Cluster& cluster) {
    return {CpuSeconds(cluster.dispatcher), CpuSeconds(cluster.worker), CpuSeconds(getpid())};
  }
};

struct Best {
  double rate = 0, worst_rate = 1e100, total = 1e100, tail = 1e100;
  CpuUse cpu;  // summed over all epochs
  int64_t rows = 0;
  void Add(const Epoch& e, const CpuUse& before, const CpuUse& after, int64_t epoch_rows) {
    rate = std::max(rate, e.rate);
    worst_rate = std::min(worst_rate, e.rate);
    total = std::min(total, e.total_seconds);
    tail = std::min(tail, e.tail_seconds);
    cpu.dispatcher += after.dispatcher - before.dispatcher;
    cpu.worker += after.worker - before.worker;
    cpu.reader += after.reader - before.reader;
    rows += epoch_rows;
  }
};

void Compare(const char* name, const sluice::Dataset& pipeline, int64_t rows, int64_t sum, int repeats,
             const Cluster& cluster) {
  const sluice::DatasetPtr parallel =
      BuildOrDie(pipeline.ReadFromService({.service = cluster.url(), .timeout_ms = 20000}));
  const sluice::DatasetPtr distributed =
      BuildOrDie(pipeline.ReadFromService({.service = cluster.url(),
                                           .processing_mode = sluice::ProcessingMode::kDistributedEpoch,
                                           .timeout_ms = 20000}));
  const sluice::DatasetPtr local = BuildOrDie(pipeline);
  Best pe, de, lo;
  // Each round's overhead, from its two back-to-back epochs: a fast or slow
  // spell of the machine falls on both, where the best of R can pair one
  // mode's lucky epoch with the other's ordinary one.
  std::vector<double> round_overheads;
  for (int round = 0; round < repeats; ++round) {
    double round_rates[2] = {0, 0};  // parallel, distributed
    for (int turn = 0; turn < 2; ++turn) {
      const bool distributed_turn = (turn == 0) == (round % 2 == 1);
      const CpuUse before = CpuUse::Now(cluster);
      const Epoch e =
          ReadEpoch(distributed_turn ? distributed : parallel, rows, sum,
                    std::string(name) + (distributed_turn ? " distributed_epoch" : " parallel_epochs"));
      (distributed_turn ? de : pe).Add(e, before, CpuUse::Now(cluster), rows);
      round_rates[distributed_turn ? 1 : 0] = e.rate;
    }
    round_overheads.push_back((round_rates[0] / round_rates[1] - 1.0) * 100.0);
    const CpuUse before = CpuUse::Now(cluster);
    lo.Add(ReadEpoch(local, rows, sum, std::string(name) + " local"), before, CpuUse::Now(cluster), rows);
  }
  std::printf("%s\n", name);
  for (const auto& [mode, best] : {std::pair<const char*, const Best&>{"parallel_epochs", pe},
                                   std::pair<const char*, const Best&>{"distributed_epoch", de}}) {
    std::printf(
        "  %-26s %12.0f elem/s   (worst %.0f); whole epoch %.3f s, of which %.3f s after the last element\n",
        mode, best.rate, best.worst_rate, best.total, best.tail);
  }
  for (const auto& [mode, best] : {std::pair<const char*, const Best&>{"parallel_epochs", pe},
                                   std::pair<const char*, const Best&>{"distributed_epoch", de}}) {
    const double per_million = 1e6 / static_cast<double>(best.rows);
    std::printf("  %-26s CPU per million elements: dispatcherd %.1f ms, workerd %.1f ms, reader %.1f ms\n",
                mode, best.cpu.dispatcher * 1e3 * per_million, best.cpu.worker * 1e3 * per_million,
                best.cpu.reader * 1e3 * per_million);
  }
  std::printf("  %-26s %11.1f%%          (goal <= 5%%); whole epochs: %.1f%%\n", "distributed_epoch overhead",
              (pe.rate / de.rate - 1.0) * 100.0, (de.total / pe.total - 1.0) * 100.0);
  std::sort(round_overheads.begin(), round_overheads.end());
  const size_t middle = round_overheads.size() / 2;
  const double median = round_overheads.size() % 2 == 1
                            ? round_overheads[middle]
                            : (round_overheads[middle - 1] + round_overheads[middle]) / 2;
  std::printf("  %-26s %11.1f%%          (rounds: %.1f%% to %.1f%%)\n", "median of rounds' overhead", median,
              round_overheads.front(), round_overheads.back());
  std::printf("  %-26s %12.0f elem/s   (same pipeline run locally, no service)\n", "local", lo.rate);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "service_bench";
  sluice::TurnOffMutexDeadlockDetection();
  int64_t elements = 2'000'000;
  int repeats = 3;
  int64_t elements_per_split = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--elements")
      elements = value;
    else if (flag == "--repeats")
      repeats = static_cast<int>(value);
    else if (flag == "--elements-per-split")
      elements_per_split = value;
    else
      argc = -1;
  }
  if (argc < 0 || argc % 2 == 0 || elements <= 0 || repeats <= 0 || elements_per_split < 0) {
    std::fprintf(stderr, "usage: service_bench [--elements N] [--repeats R] [--elements-per-split K]\n");
    return 2;
  }
  // Generous: an epoch at 100k elements/s, five epochs per round per
  // pipeline, plus start-up.
  const unsigned watchdog = static_cast<unsigned>(2 * repeats * 5 * (1 + elements / 100'000) + 90);
  InstallHandlers(watchdog);
  signal(SIGPIPE, SIG_IGN);

  char dir_template[] = "/tmp/sluice_service_bench.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) Fail("mkdtemp failed");
  const std::string dir = dir_template;
  std::vector<std::string> dispatcher_args;
  if (elements_per_split > 0) dispatcher_args = {"--elements-per-split", std::to_string(elements_per_split)};
  std::printf(
      "service_bench: %lld elements, best of %d epochs, elements per split %s; load average at start %s "
      "(%u cores)\n",
      static_cast<long long>(elements), repeats,
      elements_per_split > 0 ? std::to_string(elements_per_split).c_str() : "64 (default)",
      LoadAverage().c_str(), std::thread::hardware_concurrency());
  std::fflush(stdout);
  Cluster cluster = StartCluster(dir, dispatcher_args);

  const int64_t sum = elements * (elements - 1) / 2;  // of 0 .. N-1
  Compare("range(N) -> batch(256)", sluice::Dataset::Range(elements).Batch(256), elements, sum, repeats,
          cluster);
  Compare("range(N) -> map(multiply 3) -> batch(256)",
          sluice::Dataset::Range(elements).Map("multiply", {{"value", 3}}).Batch(256), elements, 3 * sum,
          repeats, cluster);
  std::printf("workerd at the end: %s; load average at end %s\n", WorkerSummary(cluster).c_str(),
              LoadAverage().c_str());
  std::fflush(stdout);
  Stop(cluster.worker);
  Stop(cluster.dispatcher);
  std::filesystem::remove_all(dir);
  return 0;
}
