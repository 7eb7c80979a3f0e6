// What Sluice's own code needs of the SDK's Dataset and Iterator beyond the
// public API: the definition as a proto, datasets made from one, and the
// built pipeline. Not installed.
#ifndef SLUICE_CLIENT_DATASET_INTERNAL_H_
#define SLUICE_CLIENT_DATASET_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice::internal {

struct DatasetDefinition {
  proto::DatasetDef def;
  // "file:line:column" of each top-level step of a YAML pipeline, for
  // errors; empty otherwise.
  std::vector<std::string> step_locations;
  // The distribute step's repetition counter (BuildOptions::read_repetitions):
  // a dataset's copies and the datasets made from it by adding steps share
  // it; a deserialized definition starts a counter of its own.
  std::shared_ptr<std::atomic<int64_t>> read_repetitions = std::make_shared<std::atomic<int64_t>>(0);
};

struct FunctionArgValue {
  proto::AttrValue proto;
};

// The one door into the public types' private parts.
struct DatasetAccess {
  static const proto::DatasetDef& Definition(const Dataset& dataset) { return dataset.definition_->def; }
  static const DatasetDefinition& State(const Dataset& dataset) { return *dataset.definition_; }
  static Dataset FromState(DatasetDefinition state);
  static Dataset FromDefinition(proto::DatasetDef def);
  static const proto::AttrValue& Proto(const FunctionArg& arg) { return arg.value_->proto; }
  // An Iterator over `input`, which `dataset` outlives; `fingerprint` is
  // the definition's, which Iterator::Save records.
  static Iterator MakeIterator(DatasetPtr dataset, std::unique_ptr<IteratorBase> input,
                               std::string fingerprint = "");
};

inline const proto::DatasetDef& DefinitionOf(const Dataset& dataset) {
  return DatasetAccess::Definition(dataset);
}
inline Dataset DatasetFromDefinition(proto::DatasetDef def) {
  return DatasetAccess::FromDefinition(std::move(def));
}
// `dataset` with a distribute step of exactly `op` (tests send options that
// ServiceOptions cannot express, such as an unknown mode).
Dataset ReadFromService(const Dataset& dataset, const proto::DistributeOp& op);
// The distribute step that `options` describe.
proto::DistributeOp DistributeOpFromOptions(const ServiceOptions& options);
// Builds the pipeline (the runtime dataset that iterators read).
absl::StatusOr<DatasetPtr> BuildPipeline(const Dataset& dataset);

}  // namespace sluice::internal

#endif  // SLUICE_CLIENT_DATASET_INTERNAL_H_
