// What a pipeline's first step will read from object storage, for
// `sluice inspect`: the objects its URLs name (a listing for
// image_folder's root and list_files' patterns) and their bytes.
#ifndef SLUICE_PIPELINE_IO_SOURCE_OBJECTS_H_
#define SLUICE_PIPELINE_IO_SOURCE_OBJECTS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice::io {

struct SourceObjects {
  int64_t urls = 0;     // URLs the source names (0: it reads local files, or none)
  int64_t objects = 0;  // objects they come to
  uint64_t bytes = 0;
};

// The first step's object URLs (its `files`, `root` and `pattern`
// fields), stat'ed and listed; an error names the URL that failed.
absl::StatusOr<SourceObjects> CountSourceObjects(const proto::DatasetDef& def);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_SOURCE_OBJECTS_H_
