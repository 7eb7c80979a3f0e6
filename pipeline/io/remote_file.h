// An object read front to back as ranged GETs of `part_bytes`, up to
// `parts_in_flight` of them at once on the process's fetch threads, so a
// reader is not bound to one TCP stream's speed or one round trip per
// part. Parts are handed to Read in order; a failed part fails the read
// that reaches it, naming the object.
#ifndef SLUICE_PIPELINE_IO_REMOTE_FILE_H_
#define SLUICE_PIPELINE_IO_REMOTE_FILE_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "pipeline/io/object_client.h"
#include "pipeline/io/readable_file.h"

namespace sluice::io {

class RemoteFile : public ReadableFile {
 public:
  RemoteFile(ObjectInfo info, uint64_t part_bytes, int parts_in_flight);
  ~RemoteFile() override;
  absl::StatusOr<size_t> Read(char* buffer, size_t n) override;
  void StartReading() override { ScheduleParts(); }
  absl::Status SeekBeforeReading(uint64_t offset) override;

 private:
  struct Part;
  void ScheduleParts();

  const ObjectInfo info_;
  const uint64_t part_bytes_;
  const int parts_in_flight_;
  uint64_t next_offset_ = 0;                 // the first byte of the next part to schedule
  std::deque<std::shared_ptr<Part>> parts_;  // scheduled, in order
  size_t position_ = 0;                      // bytes of parts_.front() already read
  bool started_fetching_ = false;            // a part went to the fetch threads
};

// Runs `task` on the process's fetch threads (started on first use, and
// anew in a forked child: the parent's threads are not there); on this
// thread when no thread can be started.
void RunOnFetchThreads(std::function<void()> task);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_REMOTE_FILE_H_
