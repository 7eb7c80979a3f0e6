// FileListDataset: the base of the sources over a list of files fixed when
// the pipeline is built (list_files, image_folder). Each iteration visits
// the files in an order (the list's, or shuffled per repetition with the
// seed: FileSourceOrder), takes its positions from the split provider in
// distributed_epoch (splittable by file), and saves the order and position.
// A source says only what element a file becomes.
#ifndef SLUICE_PIPELINE_FILE_LIST_SOURCE_H_
#define SLUICE_PIPELINE_FILE_LIST_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "pipeline/dataset.h"

namespace sluice {

// What one iterator's files read ahead may hold at once: 128 photos of
// 100 KB are 13 MB, where a tenant's 128 objects of 1 GiB would be 128 GiB.
inline constexpr uint64_t kReadAheadBytes = uint64_t{64} << 20;

class FileListDataset : public DatasetBase {
 public:
  // `count` files, whose elements have `spec`.
  FileListDataset(int64_t count, bool shuffle, std::optional<int64_t> seed, ElementSpec spec);

  const ElementSpec& element_spec() const final { return spec_; }
  int64_t Cardinality() const final { return count_; }
  // For a list of objects (an s3:// listing): a digest of their keys and
  // sizes, which a restore's split layout compares, so that split numbers
  // saved over one listing never name the objects of another of the same
  // count. Empty for local files.
  virtual std::string ObjectListingDigest() const { return ""; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const final;

 protected:
  // The element of the file at `index` of the list (not of the order).
  // May be called from several threads at once.
  virtual absl::StatusOr<Element> FileElement(int64_t index) const = 0;
  // How many files past the current one an iterator reads at once, on the
  // fetch threads (pipeline/io/remote_file.h), within the positions it
  // already holds: objects fetched concurrently instead of one round trip
  // each. 0: one at a time, on the iterator's thread (local files).
  virtual int64_t ReadAheadFiles() const { return 0; }
  // The bytes of the file at `index` of the list, where known before it is
  // read (an object's size from its listing); 0 where not. The files read
  // ahead hold at most kReadAheadBytes of them, and always the next one.
  virtual uint64_t FileBytes(int64_t index) const { return 0; }

 private:
  class Iterator;

  const int64_t count_;
  const bool shuffle_;
  const std::optional<int64_t> seed_;
  const ElementSpec spec_;
  // Shuffled orders drawn so far: the next iteration's repetition.
  mutable std::atomic<uint64_t> iterations_{0};
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_FILE_LIST_SOURCE_H_
