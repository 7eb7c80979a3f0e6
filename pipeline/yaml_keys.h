// YAML helpers every loader shares (pipelines, daemon configs): where a node
// is, what reads as a number, and repeated keys.
//
// yaml-cpp accepts a map that sets one key twice and keeps one value
// without a word. A repeated key is almost always a mistake (an edit that
// meant to replace the first), so pipelines and daemon configs refuse it.
#ifndef SLUICE_PIPELINE_YAML_KEYS_H_
#define SLUICE_PIPELINE_YAML_KEYS_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/status.h"

namespace sluice {

// Where `node` (or a mark) is, as errors name it: "SOURCE:LINE:COLUMN", or SOURCE for a
// node without a mark.
std::string YamlLocation(const YAML::Node& node, const std::string& source);
std::string YamlLocation(const YAML::Mark& mark, const std::string& source);

// True for a scalar that starts as a number does (a digit, a sign, a dot)
// or is inf or nan: the scalars a loader reads as a float when SimpleAtod
// takes them, and as a string otherwise.
bool LooksNumeric(const std::string& scalar);

// InvalidArgument "SOURCE:LINE:COLUMN: 'KEY' is set twice (first at line
// N); a key may appear once" for the first repeated key in any map of the
// document, nested ones included.
absl::Status CheckUniqueKeys(const YAML::Node& node, const std::string& source);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_YAML_KEYS_H_
