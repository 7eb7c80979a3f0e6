// Checks on a pipeline definition before it is sent to the service, so
// that what the service could not even parse is refused here, with the
// reason, rather than arriving as an empty INTERNAL from gRPC.
#ifndef SLUICE_CLIENT_READ_DEFINITION_CHECKS_H_
#define SLUICE_CLIENT_READ_DEFINITION_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice::reader {

// protobuf refuses to parse messages nested past 100 levels; each zip or
// interleave inside another adds three (step, op, pipeline). Kept below
// that with room for the request around the definition.
inline constexpr int kMaxDefinitionDepth = 90;

// Functions of this process (Dataset::MapLocal, FilterLocal, Python
// callables) are registered under names with this prefix, which no worker
// knows (client/local_functions.h).
inline constexpr char kLocalFunctionPrefix[] = "local:";

bool IsLocalFunctionName(const std::string& name);

// OK, or InvalidArgument naming the first step of `def` (nested pipelines
// included) whose function is local.
absl::Status CheckNoLocalFunctions(const proto::DatasetDef& def);

// How deeply the definition's messages nest (1 for a definition of plain
// steps' scalars).
int DefinitionDepth(const proto::DatasetDef& def);

// InvalidArgument naming the depth and the limit when the service could
// not parse `def`.
absl::Status CheckSendable(const proto::DatasetDef& def);

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_DEFINITION_CHECKS_H_
