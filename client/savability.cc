// Dataset::CheckSavable: whether a pipeline's position can be saved,
// judged from its definition before anything is read.
#include "client/read/savability.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "pipeline/builder.h"
#include "sluice/dataset.h"

namespace sluice {

absl::Status Dataset::CheckSavable() const {
  const internal::DatasetDefinition& state = internal::DatasetAccess::State(*this);
  const proto::DatasetDef& def = state.def;
  // Every built-in op saves its position; only the read of the service
  // has conditions (the steps after it run here and save as local ones).
  for (int i = 0; i < def.steps_size(); ++i) {
    if (!def.steps(i).has_distribute()) continue;
    const absl::Status savable = reader::CheckDistributeSavable(WorkerPart(def), def.steps(i).distribute());
    if (savable.ok()) return savable;
    std::string why(savable.message());
    if (absl::StartsWith(why, "distribute: ")) why.erase(0, sizeof("distribute: ") - 1);
    const std::string location =
        static_cast<size_t>(i) < state.step_locations.size() && !state.step_locations[i].empty()
            ? absl::StrCat(state.step_locations[i], ": ")
            : "";
    return absl::Status(savable.code(), absl::StrCat(location, "step ", i + 1, " (distribute): ", why));
  }
  return absl::OkStatus();
}

}  // namespace sluice
