// The files of the cache op's file cache (cache_op.cc), written by the
// first complete pass and read by every later one:
//
//   FILENAME.data      the elements, each a TFRecord (record_io.h) holding
//                      a serialized ElementProto, in the pass's order
//   FILENAME.index     one line, "sluice-cache 2 elements=N data_bytes=S
//                      fingerprint=F", written last and atomically: the
//                      cache is complete exactly when it exists. F is the
//                      fingerprint of the steps before the cache, and a
//                      reader of other steps is refused, naming both
//   FILENAME.lockfile  while a pass writes: "pid=P host=H writer=W
//                      time=T"; a second writer is refused while P lives
//
// A writer takes the lock with O_CREAT|O_EXCL, writes the elements to
// FILENAME.data.W.tmp beside it, and at its input's end fsyncs it, renames
// it to FILENAME.data, writes the index, and removes the lock. A writer
// destroyed before that removes its temp file and its lock, so that a
// partial pass never looks whole.
//
//   absl::StatusOr<std::unique_ptr<CacheFileWriter>> writer = CacheFileWriter::Start(path, fingerprint);
//   for (each element) (*writer)->Add(element);
//   (*writer)->Finish();
//   absl::StatusOr<std::unique_ptr<CacheFileReader>> reader = CacheFileReader::Open(path, fingerprint);
#ifndef SLUICE_PIPELINE_CACHE_FILES_H_
#define SLUICE_PIPELINE_CACHE_FILES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/record_io.h"
#include "sluice/element.h"

namespace sluice {

// Whether FILENAME.index exists: a complete cache (or a damaged one, which
// CacheFileReader::Open reports).
bool CacheFilesComplete(const std::string& filename);

// Reads a complete cache from its start.
class CacheFileReader {
 public:
  // DataLoss naming the file when the index does not parse or disagrees
  // with the data file's size; NotFound when there is no index;
  // FailedPrecondition naming both fingerprints when another pipeline's
  // steps (or an earlier release, which recorded none) wrote it.
  static absl::StatusOr<std::unique_ptr<CacheFileReader>> Open(const std::string& filename,
                                                               const std::string& fingerprint);

  // The next element, or false after the index's count. DataLoss naming
  // the data file when it ends early or a record is damaged.
  absl::StatusOr<bool> Next(Element* element);
  // Reads past the first `count` elements (a restore), DataLoss when the
  // cache holds fewer.
  absl::Status Skip(int64_t count);
  // Elements and data bytes read so far.
  int64_t position() const { return position_; }
  int64_t offset() const { return offset_; }

 private:
  CacheFileReader(std::string filename, std::unique_ptr<TFRecordReader> records, int64_t elements,
                  int64_t data_bytes)
      : filename_(std::move(filename)),
        data_path_(filename_ + ".data"),
        records_(std::move(records)),
        elements_(elements),
        data_bytes_(data_bytes) {}

  const std::string filename_;
  const std::string data_path_;
  const std::unique_ptr<TFRecordReader> records_;
  const int64_t elements_;
  const int64_t data_bytes_;
  int64_t position_ = 0;
  int64_t offset_ = 0;
};

// Where a writing pass stood at a save: enough for a restored pass to copy
// what it had written and go on.
struct CacheWriterCheckpoint {
  std::string writer_id;
  std::string temp_path;
  int64_t elements = 0;
  int64_t bytes = 0;
};

// Writes one pass: holds the lock from Start until Finish or destruction.
class CacheFileWriter {
 public:
  // Takes FILENAME.lockfile, replacing a stale one (a dead process on this
  // host) with a warning; FailedPrecondition quoting the lock when a live
  // writer holds it. Creates the directory when it is missing.
  static absl::StatusOr<std::unique_ptr<CacheFileWriter>> Start(const std::string& filename,
                                                                const std::string& fingerprint);
  // A writer that goes on from `saved` with a temp file of its own holding
  // the saved prefix, taking over the lock when it names the saved writer
  // (or is stale) or is gone. nullptr, with a warning naming the file, when
  // it cannot (the temp file is missing or shorter, another live writer
  // holds the lock): the restored pass then goes on without writing, and a
  // later one writes the cache. Also nullptr, silently, when the cache is
  // complete by now.
  static absl::StatusOr<std::unique_ptr<CacheFileWriter>> Resume(const std::string& filename,
                                                                 const CacheWriterCheckpoint& saved,
                                                                 const std::string& fingerprint);
  // Unless finished: removes the temp file, and the lock if still ours.
  ~CacheFileWriter();
  CacheFileWriter(const CacheFileWriter&) = delete;
  CacheFileWriter& operator=(const CacheFileWriter&) = delete;

  absl::Status Add(const Element& element);
  // Flushes what was written, so that the checkpoint's bytes are on file.
  absl::StatusOr<CacheWriterCheckpoint> Checkpoint();
  // The input's end: makes the cache complete, unless another writer did
  // first (or took the lock over), in which case this one's file is
  // dropped. Either way the pass is whole and the lock released.
  absl::Status Finish();

 private:
  CacheFileWriter(std::string filename, std::string fingerprint, std::string writer_id);
  absl::Status Open();
  // Copies the saved prefix from `saved`'s temp file; false when it is not
  // all there.
  absl::StatusOr<bool> CopyPrefix(const CacheWriterCheckpoint& saved);
  void Abandon();

  const std::string filename_;
  const std::string fingerprint_;  // of the steps before the cache, for the index
  const std::string writer_id_;
  const std::string temp_path_;
  std::unique_ptr<TFRecordWriter> records_;
  int64_t elements_ = 0;
  int64_t bytes_ = 0;
  bool holds_lock_ = false;
  bool finished_ = false;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_CACHE_FILES_H_
