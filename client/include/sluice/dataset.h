// sluice::Dataset: a fluent builder of pipeline definitions.
//
// Builds the same DatasetDef as the equivalent YAML pipeline (same
// defaults, same fingerprint), without running anything:
//
//   sluice::Dataset ds = sluice::Dataset::Range(10).Map("square").Batch(4);
//   absl::StatusOr<std::vector<sluice::Element>> batches = ds.Collect();
//   // [0 1 4 9], [16 25 36 49], [64 81]
//
// Invalid arguments are reported when the pipeline is built (Build,
// Collect), with the step they belong to.
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_DATASET_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_DATASET_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/element.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.pb.h"

namespace sluice {

// An argument value of an element function: a number, bool, string, or a
// list or map of them.
class FunctionArg {
 public:
  FunctionArg(int value) { proto_.set_i(value); }
  FunctionArg(int64_t value) { proto_.set_i(value); }
  FunctionArg(double value) { proto_.set_f(value); }
  FunctionArg(bool value) { proto_.set_b(value); }
  FunctionArg(const char* value) { proto_.set_s(value); }
  FunctionArg(std::string value) { proto_.set_s(std::move(value)); }
  FunctionArg(std::vector<FunctionArg> values);
  FunctionArg(std::map<std::string, FunctionArg> entries);
  const proto::AttrValue& proto() const { return proto_; }

 private:
  proto::AttrValue proto_;
};
using FunctionArgMap = std::map<std::string, FunctionArg>;

struct MapOptions {
  int64_t num_parallel_calls = 0;  // 0 or 1: sequential; -1: one per core
  bool deterministic = true;
};

class Dataset {
 public:
  // Sources.
  static Dataset Range(int64_t stop);
  static Dataset Range(int64_t start, int64_t stop, int64_t step = 1);
  static Dataset FromTensors(std::vector<Tensor> components, std::vector<std::string> names = {});
  static Dataset FromTensorSlices(std::vector<Tensor> components, std::vector<std::string> names = {});
  static Dataset ListFiles(std::vector<std::string> patterns, bool shuffle = true,
                           std::optional<int64_t> seed = std::nullopt);
  static Dataset TextLine(std::vector<std::string> files, std::string compression_type = "");
  static Dataset TFRecord(std::vector<std::string> files, std::string compression_type = "");
  static Dataset FixedLengthRecord(std::vector<std::string> files, int64_t record_bytes,
                                   int64_t header_bytes = 0, int64_t footer_bytes = 0,
                                   std::string compression_type = "");
  static Dataset Zip(const std::vector<Dataset>& datasets);
  // Wraps an existing definition (for example one loaded from YAML).
  static Dataset FromDef(proto::DatasetDef def);

  // Transforms, each returning a new Dataset.
  Dataset Map(const std::string& fn, const FunctionArgMap& args = {}, MapOptions options = {}) const;
  Dataset Filter(const std::string& fn, const FunctionArgMap& args = {}) const;
  Dataset Batch(int64_t batch_size, bool drop_remainder = false, int64_t num_parallel_calls = 0,
                bool deterministic = true) const;
  // padded_shapes: one per component, -1 for "longest in the batch"; empty
  // pads every dimension that way. padding_values: one scalar per component.
  Dataset PaddedBatch(int64_t batch_size, const std::vector<std::vector<int64_t>>& padded_shapes = {},
                      const std::vector<Tensor>& padding_values = {}, bool drop_remainder = false) const;
  Dataset Unbatch() const;
  Dataset Rebatch(int64_t batch_size, bool drop_remainder = false) const;
  Dataset Shuffle(int64_t buffer_size, std::optional<int64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;
  Dataset Repeat(int64_t count = -1) const;
  Dataset Take(int64_t count) const;
  Dataset Skip(int64_t count) const;
  Dataset Shard(int64_t num_shards, int64_t index) const;
  Dataset Enumerate(int64_t start = 0) const;
  // `per_element` is the sub-pipeline for each input element; its file
  // source lists no files and reads them from the element.
  Dataset Interleave(const Dataset& per_element, int64_t cycle_length = 4, int64_t block_length = 1,
                     int64_t num_parallel_calls = 0) const;
  Dataset Prefetch(int64_t buffer_size = -1) const;
  // Runs the steps so far on the data service at `service`
  // (grpc://HOST:PORT); the steps after run in this process. `mode` is
  // "parallel_epochs" or "distributed_epoch"; consumers of the same
  // `job_name` share its elements. `timeout_ms` bounds how long to keep
  // trying to reach the dispatcher (0: 60 s).
  Dataset Distribute(const std::string& service, const std::string& mode = "parallel_epochs",
                     const std::string& job_name = "", int64_t max_outstanding_requests = 0,
                     int64_t timeout_ms = 0) const;
  // The same with every option of the step (sharding_policy, exactly_once,
  // compression...; see docs/pipeline.md).
  Dataset Distribute(const proto::DistributeOp& op) const;
  // Loads element functions from a plugin library when built.
  Dataset WithPlugin(const std::string& library_path) const;

  const proto::DatasetDef& def() const { return def_; }
  std::string Fingerprint() const;
  absl::StatusOr<DatasetPtr> Build() const;
  // Runs the pipeline locally and returns its elements (at most `limit`
  // when limit >= 0).
  absl::StatusOr<std::vector<Element>> Collect(int64_t limit = -1) const;

 private:
  explicit Dataset(proto::DatasetDef def) : def_(std::move(def)) {}
  // A copy with one more step, `op` with its defaults, edited by `edit`.
  template <typename Edit>
  Dataset With(const char* op, Edit edit) const;

  proto::DatasetDef def_;
};

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_DATASET_H_
