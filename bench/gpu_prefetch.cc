// gpu_prefetch: how fast DistributedIterator moves batches from host
// memory onto a GPU, against a bare pinned cudaMemcpyAsync of the same
// bytes measured in the same run.
//
//   a. bare: one pinned host buffer copied to one device buffer with
//      cudaMemcpyAsync on one stream, back to back (the copy engine's rate)
//   b. pageable: the same from ordinary malloc memory (what a naive loader
//      gets)
//   c. Sluice: DistributeDataset over from_tensors([rows, 1024] float32)
//      -> repeat, one GPU replica; the trainer waits for each step's copy
//      and drops it. The batch lands in pinned memory (the pinned buffer
//      cache, as network batches do), so the prefetcher copies it directly.
//   d. the same with pin_host_buffers off: the batch is pageable and the
//      prefetcher packs it into a pooled pinned buffer (with N packing
//      threads) and copies it in 4 MiB chunks, overlapping the two.
//
// GB is 10^9 bytes. Each figure is the best of R rounds, the cases taking
// turns within a round.
//
//   gpu_prefetch [--mib M] [--steps N] [--repeats R] [--packing-threads 0,1,4]
//
// (packing thread count 0 is case c.)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "sluice/distribute.h"

namespace {

using Clock = std::chrono::steady_clock;

void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// GB/s of `steps` back-to-back copies of `bytes` from `host`.
double BareCopy(const void* host, size_t bytes, int steps) {
  void* device = nullptr;
  cudaStream_t stream;
  Check(cudaMalloc(&device, bytes), "cudaMalloc");
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream), "warm-up copy");
  Check(cudaStreamSynchronize(stream), "sync");
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < steps; ++i)
    Check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream), "copy");
  Check(cudaStreamSynchronize(stream), "sync");
  const double seconds = Seconds(start);
  cudaStreamDestroy(stream);
  cudaFree(device);
  return static_cast<double>(bytes) * steps / seconds / 1e9;
}

// packing_threads 0: the batch lands in pinned memory and is copied
// directly; otherwise it stays pageable and is packed into staging.
double SluicePrefetch(const sluice::Tensor& batch, int steps, int packing_threads) {
  sluice::DistributeOptions options;
  options.global_batch_size = batch.dim(0);
  options.packing_threads = packing_threads;
  options.pin_host_buffers = packing_threads == 0;
  if (!options.pin_host_buffers) sluice::SetLargeBufferAllocator(nullptr);
  const int warmup = 8;
  absl::StatusOr<sluice::DistributedDataset> distributed =
      sluice::DistributeDataset(sluice::Dataset::FromTensors({batch}).Repeat(steps + warmup),
                                *sluice::ReplicaSet::Create({"GPU:0"}), options);
  if (!distributed.ok()) {
    std::fprintf(stderr, "%s\n", distributed.status().ToString().c_str());
    std::exit(1);
  }
  absl::StatusOr<sluice::DistributedIterator> iterator = distributed->MakeIterator();
  if (!iterator.ok()) {
    std::fprintf(stderr, "%s\n", iterator.status().ToString().c_str());
    std::exit(1);
  }
  Clock::time_point start;
  for (int i = 0; i < steps + warmup; ++i) {
    if (i == warmup) start = Clock::now();
    absl::StatusOr<sluice::PerReplica> step = iterator->GetNext();
    if (!step.ok() || !(*step)[0].Wait().ok()) {
      std::fprintf(stderr, "step %d: %s\n", i, step.status().ToString().c_str());
      std::exit(1);
    }
  }
  return static_cast<double>(batch.ByteSize()) * steps / Seconds(start) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mib = 64;
  int steps = 100;
  int repeats = 3;
  std::vector<int> packing_threads = {0, 1, 4};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--mib") {
      mib = std::atoll(argv[i + 1]);
    } else if (flag == "--steps") {
      steps = std::atoi(argv[i + 1]);
    } else if (flag == "--repeats") {
      repeats = std::atoi(argv[i + 1]);
    } else if (flag == "--packing-threads") {
      packing_threads.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string item; std::getline(list, item, ',');)
        packing_threads.push_back(std::atoi(item.c_str()));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (sluice::NumLocalGpus() == 0) {
    std::fprintf(stderr, "gpu_prefetch: no CUDA GPU on this machine\n");
    return 1;
  }
  const size_t bytes = static_cast<size_t>(mib) << 20;
  const int64_t rows = static_cast<int64_t>(bytes / (1024 * sizeof(float)));
  sluice::Tensor batch = sluice::Tensor::Uninitialized(sluice::DType::kFloat32, {rows, 1024});
  std::memset(batch.mutable_raw_data(), 1, batch.ByteSize());
  void* pinned = nullptr;
  Check(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  std::memset(pinned, 1, bytes);

  cudaDeviceProp properties;
  Check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  std::printf("device: %s; %lld MiB per step, %d steps, best of %d\n", properties.name,
              static_cast<long long>(mib), steps, repeats);
  double bare = 0;
  double pageable = 0;
  std::vector<double> sluice_rates(packing_threads.size(), 0.0);
  for (int round = 0; round < repeats; ++round) {
    bare = std::max(bare, BareCopy(pinned, bytes, steps));
    pageable = std::max(pageable, BareCopy(batch.raw_data(), bytes, steps));
    for (size_t k = 0; k < packing_threads.size(); ++k) {
      sluice_rates[k] = std::max(sluice_rates[k], SluicePrefetch(batch, steps, packing_threads[k]));
    }
  }
  std::printf("a. bare pinned cudaMemcpyAsync   %7.2f GB/s\n", bare);
  std::printf("b. pageable cudaMemcpyAsync      %7.2f GB/s  (%.1f%% of a)\n", pageable,
              100 * pageable / bare);
  for (size_t k = 0; k < packing_threads.size(); ++k) {
    if (packing_threads[k] == 0) {
      std::printf("c. Sluice prefetch, pinned batch  %7.2f GB/s  (%.1f%% of a)\n", sluice_rates[k],
                  100 * sluice_rates[k] / bare);
    } else {
      std::printf("d. Sluice prefetch, pageable batch, %d packing thread%s %7.2f GB/s  (%.1f%% of a)\n",
                  packing_threads[k], packing_threads[k] == 1 ? "" : "s", sluice_rates[k],
                  100 * sluice_rates[k] / bare);
    }
  }
  cudaFreeHost(pinned);
  return 0;
}
