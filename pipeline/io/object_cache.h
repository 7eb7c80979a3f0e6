// A worker's local copy of whole objects (object_storage.cache): written
// once, atomically (a temporary file renamed into place), named by the
// object's URL and ETag so that a changed object is never served from an
// old copy, evicted least recently used past max_bytes. Several readers
// and several workers may share the directory: a reader holds its file
// open, so an eviction never takes bytes from under it.
#ifndef SLUICE_PIPELINE_IO_OBJECT_CACHE_H_
#define SLUICE_PIPELINE_IO_OBJECT_CACHE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "pipeline/io/object_client.h"

namespace sluice::io {

// The file that holds `info` in `cache_dir` (which may not exist yet).
std::string CachedObjectPath(const std::string& cache_dir, const ObjectInfo& info);

// A descriptor open on the cached copy of `info`, fetched first when it is
// not there (its parts in parallel). Eviction makes room first; an object
// larger than max_bytes is not cached (FailedPrecondition, and the caller
// streams it).
absl::StatusOr<int> OpenCachedObject(const std::string& cache_dir, int64_t max_bytes, const ObjectInfo& info,
                                     uint64_t part_bytes, int parts_in_flight);

// Removes the least recently used copies until `incoming` more bytes fit
// under `max_bytes`. Files being written (".tmp") are left alone.
void EvictObjects(const std::string& cache_dir, int64_t max_bytes, int64_t incoming);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_OBJECT_CACHE_H_
