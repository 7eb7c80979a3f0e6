// Element functions that live in this process (Dataset::MapLocal and
// FilterLocal). Each is registered in the process's function registry
// under a name that only this process knows ("local:N"), so the engine
// builds and runs it like any registered function, and a definition that
// would send one to the workers is refused before it leaves.
#ifndef SLUICE_CLIENT_LOCAL_FUNCTIONS_H_
#define SLUICE_CLIENT_LOCAL_FUNCTIONS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "sluice/dataset.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice::internal {

// Registers `fn` and returns its name. Registrations last as long as the
// process, since a serialized definition may name them again.
std::string RegisterLocalMap(LocalMapFunction fn);
std::string RegisterLocalPredicate(LocalPredicate predicate);

}  // namespace sluice::internal

#endif  // SLUICE_CLIENT_LOCAL_FUNCTIONS_H_
