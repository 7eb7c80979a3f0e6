// GPU replicas on a real CUDA device. Built where the CUDA toolkit is;
// each test skips, saying so, on a machine without a GPU.
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>

#include <catch2/catch.hpp>
#include <numeric>

#include "sluice/distribute.h"

namespace sluice {
namespace {

bool SkipWithoutGpu() {
  if (NumLocalGpus() > 0) return false;
  WARN("skipped: no CUDA GPU on this machine (cudaGetDeviceCount found none)");
  return true;
}

// 64 steps of 1024 float rows of 256 columns (1 MiB per step), row r
// holding the value r in every column.
Dataset Rows() {
  std::vector<float> values(65536 * 256);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i / 256);
  return Dataset::FromTensorSlices({*Tensor::FromVector<float>(std::move(values), {65536, 256})}).Batch(1024);
}

TEST_CASE("GPU replicas receive each batch in device memory, in order", "[client][gpu]") {
  if (SkipWithoutGpu()) return;
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(Rows(), *ReplicaSet::Create({"GPU:0"}));
  REQUIRE(distributed.ok());
  absl::StatusOr<DistributedIterator> iterator = distributed->MakeIterator();
  REQUIRE(iterator.ok());
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  std::vector<float> host(1024 * 256);
  for (int step_index = 0; step_index < 64; ++step_index) {
    absl::StatusOr<PerReplica> step = iterator->GetNext();
    REQUIRE(step.ok());
    const ReplicaValue& value = (*step)[0];
    CHECK(value.device.name() == "GPU:0");
    REQUIRE(value.ready->native_event() != nullptr);
    cudaPointerAttributes attributes;
    REQUIRE(cudaPointerGetAttributes(&attributes, value.components[0].data()) == cudaSuccess);
    CHECK(attributes.type == cudaMemoryTypeDevice);
    // The trainer's stream waits for the prefetch copy, then reads.
    REQUIRE(value.WaitOnStream(stream).ok());
    REQUIRE(cudaMemcpyAsync(host.data(), value.components[0].data(), host.size() * sizeof(float),
                            cudaMemcpyDeviceToHost, stream) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    CHECK(host.front() == static_cast<float>(step_index * 1024));
    CHECK(host.back() == static_cast<float>(step_index * 1024 + 1023));
  }
  CHECK(iterator->GetNext().status().code() == absl::StatusCode::kOutOfRange);
  cudaStreamDestroy(stream);
}

TEST_CASE("GPU values export to DLPack as CUDA tensors and copy back to the host", "[client][gpu]") {
  if (SkipWithoutGpu()) return;
  absl::StatusOr<DistributedDataset> distributed = DistributeDataset(Rows(), *ReplicaSet::Create({"GPU:0"}));
  REQUIRE(distributed.ok());
  absl::StatusOr<DistributedIterator> iterator = distributed->MakeIterator();
  REQUIRE(iterator.ok());
  absl::StatusOr<PerReplica> step = iterator->GetNext();
  REQUIRE(step.ok());
  REQUIRE((*step)[0].Wait().ok());
  absl::StatusOr<DLManagedTensor*> view = (*step)[0].components[0].ToDLPack();
  REQUIRE(view.ok());
  CHECK((*view)->dl_tensor.device.device_type == kDLCUDA);
  CHECK((*view)->dl_tensor.device.device_id == 0);
  CHECK((*view)->dl_tensor.ndim == 2);
  CHECK((*view)->dl_tensor.shape[0] == 1024);
  CHECK((*view)->dl_tensor.shape[1] == 256);
  (*view)->deleter(*view);
  absl::StatusOr<Tensor> host = (*step)[0].components[0].ToHostTensor();
  REQUIRE(host.ok());
  CHECK(host->values<float>()[256 * 5] == 5.0f);
}

TEST_CASE("A missing GPU index is a FailedPrecondition with the count", "[client][gpu]") {
  if (SkipWithoutGpu()) return;
  const int count = NumLocalGpus();
  absl::StatusOr<DistributedDataset> distributed =
      DistributeDataset(Rows(), *ReplicaSet::Create({"GPU:" + std::to_string(count)}));
  REQUIRE(distributed.ok());
  CHECK(distributed->MakeIterator().status().message() ==
        "GPU:" + std::to_string(count) + " is not available: this machine has " + std::to_string(count) +
            (count == 1 ? " GPU" : " GPUs"));
}

}  // namespace
}  // namespace sluice
