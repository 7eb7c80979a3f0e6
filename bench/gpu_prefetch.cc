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
//   e. the whole path: dispatcherd and one workerd on 127.0.0.1 run
//      from_tensors -> repeat; DistributeDataset reads it through the
//      distribute step (decoding into the pinned buffer cache) onto GPU:0.
//   f. the same read with one CPU:0 replica: the network alone, so e / f
//      says what the GPU stage costs on top of it.
//
// GB is 10^9 bytes. Each figure is the best of R rounds, the cases taking
// turns within a round.
//
//   gpu_prefetch [--mib M] [--steps N] [--repeats R] [--packing-threads 0,1,4]
//                [--service-mib M] [--service-steps N] [--no-service]
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

#include "bench/bench_daemons.h"
#include "common/large_buffer_allocator.h"
#include "service/daemon.h"
#include "sluice/distribute.h"

namespace {

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

// GB/s of `steps` steps of `dataset` (one batch of `batch_bytes` per step)
// read through DistributeDataset onto one replica on `device`, after a
// warm-up of 8 steps; the trainer waits for each step's value and drops it.
double DistributedRate(const sluice::Dataset& dataset, int64_t batch_rows, int64_t batch_bytes, int steps,
                       const std::string& device, sluice::DistributeOptions options) {
  options.global_batch_size = batch_rows;
  const int warmup = 8;
  absl::StatusOr<sluice::DistributedDataset> distributed =
      sluice::DistributeDataset(dataset, *sluice::ReplicaSet::Create({device}), options);
  if (!distributed.ok()) Fail(distributed.status().ToString());
  absl::StatusOr<sluice::DistributedIterator> iterator = distributed->MakeIterator();
  if (!iterator.ok()) Fail(iterator.status().ToString());
  Clock::time_point start;
  for (int i = 0; i < steps + warmup; ++i) {
    if (i == warmup) start = Clock::now();
    absl::StatusOr<sluice::PerReplica> step = iterator->GetNext();
    if (!step.ok()) Fail("step " + std::to_string(i) + ": " + step.status().ToString());
    if (absl::Status waited = (*step)[0].Wait(); !waited.ok())
      Fail("step " + std::to_string(i) + ": " + waited.ToString());
  }
  return static_cast<double>(batch_bytes) * steps / Seconds(start) / 1e9;
}

// packing_threads 0: the batch lands in pinned memory and is copied
// directly; otherwise it stays pageable and is packed into staging.
double SluicePrefetch(const sluice::Tensor& batch, int steps, int packing_threads) {
  sluice::DistributeOptions options;
  options.packing_threads = packing_threads;
  options.pin_host_buffers = packing_threads == 0;
  if (!options.pin_host_buffers) sluice::SetLargeBufferAllocator(nullptr);
  return DistributedRate(sluice::Dataset::FromTensors({batch}).Repeat(steps + 8), batch.dim(0),
                         static_cast<int64_t>(batch.ByteSize()), steps, "GPU:0", options);
}

// The same batch served by the cluster's worker: from_tensors -> repeat ->
// distribute (parallel_epochs, one worker), read onto `device`.
double ServiceRate(const Cluster& cluster, const sluice::Tensor& batch, int steps,
                   const std::string& device) {
  const sluice::Dataset dataset =
      sluice::Dataset::FromTensors({batch}).Repeat().ReadFromService({.service = cluster.url()});
  return DistributedRate(dataset, batch.dim(0), static_cast<int64_t>(batch.ByteSize()), steps, device,
                         sluice::DistributeOptions{});
}

sluice::Tensor OnesBatch(int64_t mib) {
  const int64_t rows = (mib << 20) / static_cast<int64_t>(1024 * sizeof(float));
  sluice::Tensor batch = sluice::Tensor::Uninitialized(sluice::DType::kFloat32, {rows, 1024});
  std::memset(batch.mutable_raw_data(), 1, batch.ByteSize());
  return batch;
}

}  // namespace

int main(int argc, char** argv) {
  g_program = "gpu_prefetch";
  sluice::TurnOffMutexDeadlockDetection();
  int64_t mib = 64;
  int steps = 100;
  int repeats = 3;
  int64_t service_mib = 8;
  int service_steps = 400;
  bool service = true;
  std::vector<int> packing_threads = {0, 1, 4};
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--no-service") {
      service = false;
      --i;
      continue;
    }
    const bool takes_value = flag == "--mib" || flag == "--steps" || flag == "--repeats" ||
                             flag == "--packing-threads" || flag == "--service-mib" ||
                             flag == "--service-steps";
    if (!takes_value) {
      std::fprintf(stderr, "gpu_prefetch: unknown flag %s\n", flag.c_str());
      return 2;
    }
    if (i + 1 == argc) {
      std::fprintf(stderr, "gpu_prefetch: %s needs a value\n", flag.c_str());
      return 2;
    }
    if (flag == "--service-mib") {
      service_mib = std::atoll(argv[i + 1]);
    } else if (flag == "--service-steps") {
      service_steps = std::atoi(argv[i + 1]);
    } else if (flag == "--mib") {
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
    }
  }
  if (mib <= 0 || steps <= 0 || repeats <= 0 || service_mib <= 0 || service_steps <= 0) {
    std::fprintf(stderr, "gpu_prefetch: --mib, --steps, --repeats and the service flags must be positive\n");
    return 2;
  }
  if (sluice::NumLocalGpus() == 0) {
    std::fprintf(stderr, "gpu_prefetch: no CUDA GPU on this machine\n");
    return 1;
  }
  const size_t bytes = static_cast<size_t>(mib) << 20;
  const sluice::Tensor batch = OnesBatch(mib);
  const sluice::Tensor service_batch = OnesBatch(service_mib);
  void* pinned = nullptr;
  Check(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
  std::memset(pinned, 1, bytes);

  cudaDeviceProp properties;
  Check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  std::printf("device: %s; %lld MiB per step, %d steps, best of %d; load average at start %s (%u cores)\n",
              properties.name, static_cast<long long>(mib), steps, repeats, LoadAverage().c_str(),
              std::thread::hardware_concurrency());
  std::optional<Cluster> cluster;
  std::string dir;
  if (service) {
    InstallHandlers(600);
    char dir_template[] = "/tmp/sluice_gpu_prefetch.XXXXXX";
    if (mkdtemp(dir_template) == nullptr) Fail(std::string("mkdtemp: ") + strerror(errno));
    dir = dir_template;
    cluster = StartCluster(dir);
  }
  double bare = 0;
  double pageable = 0;
  double service_gpu = 0;
  double service_cpu = 0;
  std::vector<double> sluice_rates(packing_threads.size(), 0.0);
  for (int round = 0; round < repeats; ++round) {
    bare = std::max(bare, BareCopy(pinned, bytes, steps));
    pageable = std::max(pageable, BareCopy(batch.raw_data(), bytes, steps));
    if (service) {
      // Alternate which goes first, so that neither always follows the other.
      const bool gpu_first = round % 2 == 0;
      for (int k = 0; k < 2; ++k) {
        if ((k == 0) == gpu_first) {
          service_gpu = std::max(service_gpu, ServiceRate(*cluster, service_batch, service_steps, "GPU:0"));
        } else {
          service_cpu = std::max(service_cpu, ServiceRate(*cluster, service_batch, service_steps, "CPU:0"));
        }
      }
    }
    // Last: the pageable cases turn the pinned buffer cache off.
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
  if (service) {
    std::printf("e. Sluice service -> GPU:0, %lld MiB steps %7.2f GB/s  (%.1f%% of a, %.1f%% of f)\n",
                static_cast<long long>(service_mib), service_gpu, 100 * service_gpu / bare,
                100 * service_gpu / service_cpu);
    std::printf("f. Sluice service -> CPU:0, %lld MiB steps %7.2f GB/s\n",
                static_cast<long long>(service_mib), service_cpu);
    std::printf("   worker at the end: %s\n", WorkerSummary(*cluster).c_str());
    Stop(cluster->worker);
    Stop(cluster->dispatcher);
    std::filesystem::remove_all(dir);
  }
  cudaFreeHost(pinned);
  return 0;
}
