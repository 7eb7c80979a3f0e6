// The webdataset source (pipeline/webdataset.cc) on any shard: samples, or
// DataLoss naming the shard and offset, never a crash. The shard is read
// twice: with the keys taken from its first sample, and with fixed ones.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "pipeline/ops.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice {
namespace {

void ReadAll(const proto::WebDatasetOp& op) {
  absl::StatusOr<DatasetPtr> dataset = MakeWebDatasetDataset(op);
  if (!dataset.ok()) return;
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*dataset)->MakeIterator(IteratorContext{});
  if (!iterator.ok()) return;
  Element element;
  bool end = false;
  for (int i = 0; i < 1000 && !end; ++i) {
    if (!(*iterator)->GetNext(&element, &end).ok()) return;
  }
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sluice::fuzz::WriteScratchFile(
      "shard.tar", std::string_view(reinterpret_cast<const char*>(data), size));
  sluice::proto::WebDatasetOp op;
  op.add_files(path);
  sluice::ReadAll(op);
  op.add_keys("txt");
  op.add_keys("cls");
  sluice::ReadAll(op);
  return 0;
}
