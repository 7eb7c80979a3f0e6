// trainer_loop: a minimal training loop on the Sluice SDK.
//
// Reads Range(64).Batch(8) from the data service in distributed_epoch mode
// on two replicas, GPU:0 and GPU:1 when the process sees two GPUs, else
// CPU:0 and CPU:1, so each step gives every replica 4 of the batch's 8
// rows. The "training step" sums a replica's rows; the loop prints the sums
// of each epoch, which with one worker are always the same:
//
//   $ dispatcherd --port 5000 &
//   $ workerd --dispatcher localhost:5000 --port 0 &
//   $ trainer_loop --service grpc://localhost:5000 --epochs 2
//   epoch 1: 8 steps, CPU:0 944, CPU:1 1072, total 2016
//   epoch 2: 8 steps, CPU:0 944, CPU:1 1072, total 2016
//
// The Sluice build makes build/client/examples/trainer_loop; a project of
// your own builds it against an installed Sluice as
// tests/find_package_consumer does.
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "sluice/dataset.h"
#include "sluice/distribute.h"

namespace {

constexpr char kUsage[] = R"(usage: trainer_loop --service grpc://HOST:PORT [--epochs N] [--job-name NAME]

Reads Range(64).Batch(8) from the Sluice data service in distributed_epoch
mode on two replicas (GPU:0,GPU:1 when there are two GPUs, else CPU:0,CPU:1)
and prints each replica's sum per epoch.

  --service   the dispatcher, grpc://HOST:PORT (required)
  --epochs    passes over the data (default 1)
  --job-name  share the job of this name with other trainers (default: a job of its own)
)";

struct Flags {
  std::string service;
  int epochs = 1;
  std::string job_name;
};

// Reads "--flag value" and "--flag=value". An exit code when the program
// should stop here: 0 after --help, 2 for a bad command line.
std::optional<int> ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    const size_t eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    std::string value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    if (name == "--service" && !value.empty()) {
      flags.service = value;
    } else if (name == "--job-name") {
      flags.job_name = value;
    } else if (!(name == "--epochs" && absl::SimpleAtoi(value, &flags.epochs) && flags.epochs >= 1)) {
      std::cerr << "trainer_loop: bad argument " << arg << "\n" << kUsage;
      return 2;
    }
  }
  if (flags.service.empty()) {
    std::cerr << "trainer_loop: --service is required\n" << kUsage;
    return 2;
  }
  return std::nullopt;
}

// The training step: the sum of the replica's rows, read on the host.
absl::StatusOr<int64_t> TrainStep(const sluice::ReplicaValue& value) {
  absl::StatusOr<sluice::Tensor> rows = value.components[0].ToHostTensor();
  if (!rows.ok()) return rows.status();
  if (rows->dtype() != sluice::DType::kInt64) return absl::InvalidArgumentError("expected int64 rows");
  int64_t sum = 0;
  for (int64_t x : rows->values<int64_t>()) sum += x;
  return sum;
}

int Fail(const absl::Status& status) {
  std::cerr << "trainer_loop: " << status << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (std::optional<int> exit_code = ParseFlags(argc, argv, flags)) return *exit_code;

  absl::StatusOr<sluice::ReplicaSet> replicas =
      sluice::ReplicaSet::Create(sluice::NumLocalGpus() >= 2 ? std::vector<std::string>{"GPU:0", "GPU:1"}
                                                             : std::vector<std::string>{"CPU:0", "CPU:1"});
  if (!replicas.ok()) return Fail(replicas.status());
  // The workers run the steps before ReadFromService; DistributeDataset splits
  // each global batch of 8 rows into 4 rows per replica.
  const sluice::Dataset dataset = sluice::Dataset::Range(64).Batch(8).ReadFromService(
      {.service = flags.service,
       .processing_mode = sluice::ProcessingMode::kDistributedEpoch,
       .job_name = flags.job_name});
  absl::StatusOr<sluice::DistributedDataset> distributed = sluice::DistributeDataset(dataset, *replicas);
  if (!distributed.ok()) return Fail(distributed.status());

  for (int epoch = 1; epoch <= flags.epochs; ++epoch) {
    std::vector<int64_t> sums(replicas->num_local_replicas(), 0);
    int steps = 0;
    for (const sluice::PerReplica& step : *distributed) {  // one epoch: a new repetition of the job
      for (size_t r = 0; r < step.size(); ++r) {
        absl::StatusOr<int64_t> sum = TrainStep(step[r]);
        if (!sum.ok()) return Fail(sum.status());
        sums[r] += *sum;
      }
      ++steps;
    }
    if (!distributed->loop_status().ok()) return Fail(distributed->loop_status());

    int64_t total = 0;
    std::cout << "epoch " << epoch << ": " << steps << " steps";
    for (size_t r = 0; r < sums.size(); ++r) {
      std::cout << ", " << replicas->devices()[r].name() << " " << sums[r];
      total += sums[r];
    }
    std::cout << ", total " << total << std::endl;
  }
  return 0;
}
