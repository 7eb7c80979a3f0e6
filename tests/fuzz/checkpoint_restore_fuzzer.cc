// Checkpoint restore (pipeline/pipeline_restore.h): an iterator restored
// from untrusted checkpoint bytes, then read a little. The first byte picks
// one of a few pipelines that between them save every kind of state (a
// source's position, shuffle buffers and seeds, batches held, interleave's
// open cycle, zip, window and scan state, read-ahead elements); the rest is
// the checkpoint. Any bytes give an iterator or an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/builder.h"
#include "pipeline/pipeline_restore.h"
#include "pipeline/yaml_loader.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice {
namespace {

constexpr const char* kPipelines[] = {
    "pipeline: [{range: 50}, {shuffle: {buffer_size: 8, seed: 3}}, {batch: {batch_size: 4}}]",
    "pipeline: [{range: 60}, {map: {fn: add, value: 1}}, {filter: {fn: less, value: 40}}, {repeat: 2}, "
    "{skip: 3}, {take: 70}, {enumerate: {start: 5}}]",
    "pipeline: [{range: 7}, {interleave: {pipeline: [{range: 5}, {shuffle: {buffer_size: 3, seed: 1}}], "
    "cycle_length: 3, block_length: 2}}]",
    "pipeline: [{zip: [[{range: 20}], [{range: 30}, {shuffle: {buffer_size: 4, seed: 1}}]]}, "
    "{prefetch: 2}]",
    "pipeline: [{range: 40}, {batch: {batch_size: 7}}, {unbatch: {}}, {window: {size: 4, shift: 3}}, "
    "{flat_map: [from_tensor_slices, {batch: {batch_size: 2}}]}]",
    "pipeline: [{from_tensor_slices: {a: [1, 2, 3, 4, 5, 6], b: [x, y, z, u, v, w]}}, {shard: {num_shards: "
    "2, "
    "index: 1}}, {repeat: {}}, {take: 9}]",
    "pipeline: [{range: 60}, {map: {fn: mod, value: 17}}, {unique: {}}, {repeat: 2}, {scan: {fn: accumulate, "
    "initial_state: [0]}}]",
};
constexpr int kNumPipelines = sizeof(kPipelines) / sizeof(kPipelines[0]);

struct Pipeline {
  DatasetPtr dataset;
  std::string fingerprint;
};

const std::vector<Pipeline>& Pipelines() {
  static const std::vector<Pipeline>* pipelines = [] {
    auto* built = new std::vector<Pipeline>;
    for (const char* text : kPipelines) {
      absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text, "checkpoint_restore_fuzzer");
      absl::StatusOr<DatasetPtr> dataset =
          loaded.ok() ? BuildDataset(loaded->def) : absl::StatusOr<DatasetPtr>(loaded.status());
      if (!dataset.ok()) {
        std::fprintf(stderr, "%s: %s\n", text, std::string(dataset.status().message()).c_str());
        std::abort();
      }
      built->push_back({*std::move(dataset), CheckpointFingerprint(loaded->def)});
    }
    return built;
  }();
  return *pipelines;
}

void WriteSeeds(const std::string& dir) {
  for (int p = 0; p < kNumPipelines; ++p) {
    const Pipeline& pipeline = Pipelines()[p];
    for (int steps : {0, 3, 11}) {
      absl::StatusOr<std::unique_ptr<IteratorBase>> iterator =
          pipeline.dataset->MakeIterator(IteratorContext{});
      if (!iterator.ok()) std::exit(1);
      Element element;
      bool end = false;
      for (int i = 0; i < steps && !end; ++i) {
        if (!(*iterator)->GetNext(&element, &end).ok()) std::exit(1);
      }
      // With read-ahead elements too (what a client's prefetch holds).
      std::vector<Element> ahead;
      if (steps == 11 && !end) ahead.push_back(element);
      absl::StatusOr<std::string> saved = SaveWithReadAhead(**iterator, pipeline.fingerprint, ahead);
      if (!saved.ok()) std::exit(1);
      fuzz::WriteSeed(dir, "pipeline" + std::to_string(p) + "-after" + std::to_string(steps),
                      std::string(1, static_cast<char>(p)) + *saved);
    }
  }
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return sluice::fuzz::WriteSeedsIfAsked(sluice::WriteSeeds);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (size_t{1} << 20)) return 0;
  const sluice::Pipeline& pipeline = sluice::Pipelines()[data[0] % sluice::kNumPipelines];
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  for (int64_t consumers : {1, 2}) {
    absl::StatusOr<sluice::RestoredIterator> restored =
        sluice::RestoreParts(*pipeline.dataset, pipeline.fingerprint, bytes, {consumers, consumers - 1});
    if (!restored.ok()) continue;
    sluice::Element element;
    bool end = false;
    for (int i = 0; i < 20 && !end; ++i) {
      if (!restored->iterator->GetNext(&element, &end).ok()) break;
    }
  }
  return 0;
}
