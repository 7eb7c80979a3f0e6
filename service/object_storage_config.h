// The daemons' `object_storage.*` settings (endpoint, region, addressing
// style, credentials file and profile, CA file, the reading knobs and the
// local cache), and setting up the process's object storage from them and
// the environment (pipeline/io/object_storage_settings.h).
#ifndef SLUICE_SERVICE_OBJECT_STORAGE_CONFIG_H_
#define SLUICE_SERVICE_OBJECT_STORAGE_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "config/config_schema.h"
#include "pipeline/io/object_storage_settings.h"

namespace sluice {

void AddObjectStorageSettings(ConfigSchema* schema, io::ObjectStorageSettings* settings);

// Resolves `settings` against the environment and makes them the
// process's; logs where the credentials came from (never the keys).
// InvalidArgument naming the setting.
absl::Status SetUpObjectStorage(const io::ObjectStorageSettings& settings);

}  // namespace sluice

#endif  // SLUICE_SERVICE_OBJECT_STORAGE_CONFIG_H_
