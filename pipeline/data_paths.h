// Data paths in a pipeline loaded from a file are relative to that file's
// folder, as its plugin paths are: the pipeline means the same files
// whichever process reads it (the reader, the dispatcher that expands
// list_files, a worker started elsewhere), not each one's current
// directory.
#ifndef SLUICE_PIPELINE_DATA_PATHS_H_
#define SLUICE_PIPELINE_DATA_PATHS_H_

#include <string>

#include "sluice/proto/dataset.pb.h"

namespace sluice {

// Makes every relative file name and list_files pattern in `def`, nested
// pipelines included, absolute against `base_dir`. Absolute paths and
// URLs ("scheme://...") are left as they are.
void ResolveDataPaths(const std::string& base_dir, proto::DatasetDef* def);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_DATA_PATHS_H_
