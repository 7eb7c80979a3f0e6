// Tensor literals in pipeline YAML (the arguments of from_tensors and
// from_tensor_slices): a scalar, nested lists, or {values: ..., dtype: ...}.
// Integers become int64 and numbers with a fraction float32, as tf.constant
// does for Python's; `dtype` casts. Errors are InvalidArgument
// "SOURCE:LINE:COLUMN: WHAT: ..." (mixed kinds, ragged lists, values that
// do not fit the dtype).
#ifndef SLUICE_PIPELINE_YAML_TENSORS_H_
#define SLUICE_PIPELINE_YAML_TENSORS_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/statusor.h"
#include "sluice/tensor.h"

namespace sluice {

// True for a map of `values` and, optionally, `dtype`, and nothing else.
bool IsTypedTensorLiteral(const YAML::Node& node);

// The tensor `node` writes. `what` names it in errors ("from_tensors:
// component 'x'"); `source` is the file.
absl::StatusOr<Tensor> ParseYamlTensor(const YAML::Node& node, const std::string& what,
                                       const std::string& source);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_YAML_TENSORS_H_
