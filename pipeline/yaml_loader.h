// Loading pipelines from YAML.
//
//   pipeline:
//     - range: 10                 # shorthand for {start: 0, stop: 10, step: 1}
//     - map: {fn: square}
//     - batch: {batch_size: 4}
//
// Each step is a one-key map from op name to its arguments (or a bare op
// name). Argument names are the fields of the op's message in
// proto/sluice/proto/dataset.proto. Every error is InvalidArgument and starts with
// "file:line:column: ", and unknown names come with the closest valid one.
// yaml-cpp's exceptions never leave this module.
#ifndef SLUICE_PIPELINE_YAML_LOADER_H_
#define SLUICE_PIPELINE_YAML_LOADER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

struct LoadedPipeline {
  proto::DatasetDef def;
  // "file:line:column" of each top-level step.
  std::vector<std::string> step_locations;
};

struct YamlLoadOptions {
  // Builds the dataset after parsing, so that argument values are checked
  // at load time too. Off where the files a pipeline reads are elsewhere.
  bool validate = true;
};

// `source_name` names the text in messages; relative plugin paths are
// resolved against `base_dir`.
absl::StatusOr<LoadedPipeline> ParsePipelineYaml(std::string_view text, const std::string& source_name,
                                                 const std::string& base_dir = ".",
                                                 const YamlLoadOptions& options = {});
absl::StatusOr<LoadedPipeline> LoadPipelineFile(const std::string& path, const YamlLoadOptions& options = {});

}  // namespace sluice

#endif  // SLUICE_PIPELINE_YAML_LOADER_H_
