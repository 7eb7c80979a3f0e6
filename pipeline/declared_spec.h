// Output specs that a pipeline declares for a function whose output is
// known only when it runs (a py: function, a Python callable shipped to the
// workers, a local C++ or Python function): the function's `output_spec`
// argument, so that the steps after it find its components when the
// pipeline is built (issue 49). Written as Sluice's YAML writes types:
//
//   output_spec: {image: "float32[?,?,3]", label: int64}   # named components
//   output_spec: [uint8[?,?,3], int64]                     # a tuple
//   output_spec: "float32[...]"                            # one of any rank
//
// A type is a dtype, with [d, ...] for a shape (? for an unknown size, []
// for a vector of any length, [...] for any rank). Named components follow
// the names' sorted order: a map in a definition keeps no order.
#ifndef SLUICE_PIPELINE_DECLARED_SPEC_H_
#define SLUICE_PIPELINE_DECLARED_SPEC_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pipeline/function.h"
#include "sluice/element.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

// The function argument that declares the output.
inline constexpr char kOutputSpecArg[] = "output_spec";

// The spec `value` declares; InvalidArgument naming `function` (if not
// empty) and the type that does not parse.
absl::StatusOr<ElementSpec> ParseDeclaredSpec(const proto::AttrValue& value, const std::string& function);
// `spec` as an output_spec argument (ParseDeclaredSpec's inverse).
proto::AttrValue DeclaredSpecToAttr(const ElementSpec& spec);
// "float32[?,?,3]", "int64", "string[...]".
std::string DeclaredTypeName(const TensorSpec& spec);

// `function` made to declare `spec`: OutputSpec returns it, and each
// output is checked against it (count, names, dtypes and shapes; named
// components put in its order), an element that breaks it being the
// function's InvalidArgument, named `name`.
std::unique_ptr<ElementFunction> WithDeclaredSpec(std::unique_ptr<ElementFunction> function, ElementSpec spec,
                                                  std::string name);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_DECLARED_SPEC_H_
