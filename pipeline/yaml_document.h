// One YAML document read from text, checked for what yaml-cpp lets through:
// aliases that loop or multiply, and repeated keys. Pipelines and daemon
// configs both load through here.
//
// yaml-cpp builds an alias as a second reference to the anchored node, so
// `a: &x [*x]` is a node that holds itself, and ten anchors that each list
// the previous one twice are 2^10 nodes to every walk. Either makes a walk
// over the document recurse without end or run for hours. The text is read
// once as events first, where both show in one pass, and refused.
#ifndef SLUICE_PIPELINE_YAML_DOCUMENT_H_
#define SLUICE_PIPELINE_YAML_DOCUMENT_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sluice {

// yaml-cpp's parser refuses text nested deeper than this; aliases may not
// build deeper nesting than it either.
inline constexpr int kMaxYamlNesting = 500;
// How many nodes the aliases of one document may repeat in all, counting
// what an alias inside an anchored node repeats again.
inline constexpr std::uint64_t kMaxYamlAliasedNodes = 100'000;

// The first document of `text` (a null node for empty text), or
// InvalidArgument "SOURCE:LINE:COLUMN: ..." for: invalid YAML; nesting past
// kMaxYamlNesting, followed by ": " and `nesting_hint` when it is not empty;
// an alias inside the node it names; aliases that repeat more than
// kMaxYamlAliasedNodes nodes; a key set twice in one map.
absl::StatusOr<YAML::Node> LoadYamlDocument(std::string_view text, const std::string& source,
                                            std::string_view nesting_hint = "");

}  // namespace sluice

#endif  // SLUICE_PIPELINE_YAML_DOCUMENT_H_
