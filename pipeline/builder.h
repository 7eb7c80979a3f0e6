// From a DatasetDef to a runnable dataset, and what the dispatcher needs to
// know of a definition: its fingerprint and how its source splits.
//
//   proto::DatasetDef def = internal::DefinitionOf(Dataset::Range(10).Map("square").Batch(4));
//   absl::StatusOr<DatasetPtr> dataset = BuildDataset(def);
//
// Errors name the step: "step 3 (batch): batch_size must be > 0, got 0",
// prefixed with "file:line:column: " when the definition came from YAML.
#ifndef SLUICE_PIPELINE_BUILDER_H_
#define SLUICE_PIPELINE_BUILDER_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/dataset.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

struct BuildOptions {
  // For interleave's sub-pipelines: the element being mapped. A file source
  // without `files` reads the file names in it.
  const Element* input = nullptr;
  // One "file:line:column" per top-level step, for error messages.
  const std::vector<std::string>* step_locations = nullptr;
  // The `distribute` step's repetition counter: each iterator of its read
  // takes the job's next repetition. A dataset object and its copies share
  // one, so that iterating it again reads the next repetition, as in
  // tf.data; null gives the build a counter of its own.
  std::shared_ptr<std::atomic<int64_t>> read_repetitions;
};

absl::StatusOr<DatasetPtr> BuildDataset(const proto::DatasetDef& def, const BuildOptions& options = {});

// How a `distribute` step becomes a dataset: the client library registers
// a factory that reads `worker_part` from the service. Without one, a
// pipeline with `distribute` fails to build, saying so.
using DistributeFactory = std::function<absl::StatusOr<DatasetPtr>(
    const proto::DatasetDef& worker_part, const proto::DistributeOp& op,
    std::shared_ptr<std::atomic<int64_t>> repetitions)>;
void SetDistributeFactory(DistributeFactory factory);

// The steps before the first `distribute` (with the plugins), or the whole
// definition when there is none.
proto::DatasetDef WorkerPart(const proto::DatasetDef& def);

// The op name of a step ("range", "map", ...), or "" if none is set.
std::string StepOpName(const proto::Step& step);
// The sub-pipelines a step holds (interleave's `pipeline`, zip's
// `datasets`, ...), each with what messages call it ("pipeline",
// "datasets 2", counting from 1), found by reflection so that a later op's
// are not missed.
struct SubPipeline {
  std::string name;
  const proto::DatasetDef* def = nullptr;
};
std::vector<SubPipeline> SubPipelines(const proto::Step& step);
// Every op name, sources first.
std::vector<std::string> AllOpNames();

// A step of `op` with tf.data's defaults filled in (range step 1, repeat
// count -1, shuffle reshuffle_each_iteration, map deterministic, ...), so
// YAML and the C++ builder give identical definitions and fingerprints.
// InvalidArgument for an unknown op, naming the closest one.
absl::StatusOr<proto::Step> NewStep(std::string_view op);

// A stable fingerprint of a definition: the same on every process and
// machine for the same definition (32 hex digits of a SHA-256 over the
// deterministic serialization).
std::string DatasetFingerprint(const proto::DatasetDef& def);

// What the split provider of a source step needs.
struct SourceSplitInfo {
  int64_t num_positions = 0;
  bool per_file = false;  // positions are files: one per split
  std::optional<uint64_t> shuffle_seed;
  // list_files or image_folder over objects: their keys' and sizes' digest.
  std::string object_listing;
};
// FailedPrecondition when the source cannot be split.
absl::StatusOr<SourceSplitInfo> DescribeSourceSplits(const proto::Step& source);
// Whether the source lists objects (list_files or image_folder over URLs).
bool SourceListsObjects(const proto::Step& source);

// Loads a plugin library once per process; its static initializers
// register its element functions. Errors name the path.
absl::Status LoadPlugin(const std::string& path);
// The paths LoadPlugin has loaded in this process.
std::vector<std::string> LoadedPlugins();

}  // namespace sluice

#endif  // SLUICE_PIPELINE_BUILDER_H_
