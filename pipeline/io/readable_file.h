// ReadableFile: what every file source reads bytes from, whether the file
// is local or an object in S3 or on a web server. OpenReadableFile picks
// the one the path names, with the checks each makes (data roots, regular
// files only, credentials from the daemon, never from the pipeline).
#ifndef SLUICE_PIPELINE_IO_READABLE_FILE_H_
#define SLUICE_PIPELINE_IO_READABLE_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::io {

struct ObjectInfo;

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Up to `n` bytes into `buffer`; 0 only at the end.
  virtual absl::StatusOr<size_t> Read(char* buffer, size_t n) = 0;
  // Starts fetching the first bytes now, before the first Read (an object's
  // first parts); nothing for a local file.
  virtual void StartReading() {}
  // Moves to byte `offset` before the first Read: a restore goes on inside
  // a file without reading what came before (an object's ranged GETs start
  // there). DataLoss (ChangedSinceSave) when the file is shorter.
  virtual absl::Status SeekBeforeReading(uint64_t offset) = 0;
};

// DataLoss: `path` is `size` bytes, short of a saved `offset`.
absl::Status ChangedSinceSave(const std::string& path, uint64_t size, uint64_t offset);

// A local path (pipeline/sandbox.h's OpenDataFile) or an s3:// or
// http(s):// URL (a HEAD for its size and ETag; then ranged GETs in
// parallel, or the worker's local cache). `op` ("image_folder") starts the
// local open's messages.
absl::StatusOr<std::unique_ptr<ReadableFile>> OpenReadableFile(const std::string& path,
                                                               const std::string& op = "");

// An object whose size and ETag are known (from a listing): no HEAD.
absl::StatusOr<std::unique_ptr<ReadableFile>> OpenObject(const ObjectInfo& info);

// A file opened on the fetch threads, its first bytes under way: the next
// file of a source, opened while the current one is read (an object's HEAD
// and first parts cost round trips that reading need not wait for).
class FileOpenedAhead {
 public:
  // Starts opening `path` (a URL; local files gain nothing).
  static std::shared_ptr<FileOpenedAhead> Start(std::string path);
  const std::string& path() const { return path_; }
  // The opened file, or why it could not be opened; waits for the open.
  absl::StatusOr<std::unique_ptr<ReadableFile>> Take();
  // Waits for an open still under way (one not started is skipped), so that
  // no fetch outlives the source that asked for it.
  ~FileOpenedAhead();

 private:
  struct State;
  FileOpenedAhead(std::string path, std::shared_ptr<State> state)
      : path_(std::move(path)), state_(std::move(state)) {}
  const std::string path_;
  const std::shared_ptr<State> state_;
};

// The whole file; InvalidArgument naming `op`, the path and the limit when
// it is larger than `max_bytes`.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& op, size_t max_bytes);
absl::StatusOr<std::string> ReadWholeObject(const ObjectInfo& info, const std::string& op, size_t max_bytes);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_READABLE_FILE_H_
