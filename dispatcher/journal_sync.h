// JournalSync: group commit for the journal. Records are written under the
// dispatcher's lock (Journal::Write) and made durable after it: each
// request, before it answers, waits until every record written so far is
// on disk (SyncWritten). One fdatasync covers all the records written
// before it began, so concurrent requests share it instead of each holding
// the lock through one of their own (docs/design.md, "The journal").
//
// Thread-safe. The file a sync runs on is kept open by the sync even when
// a snapshot replaces it meanwhile.
#ifndef SLUICE_DISPATCHER_JOURNAL_SYNC_H_
#define SLUICE_DISPATCHER_JOURNAL_SYNC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace sluice::dispatcher {

// An open file, closed when the last holder lets it go.
class JournalFile {
 public:
  JournalFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  JournalFile(const JournalFile&) = delete;
  JournalFile& operator=(const JournalFile&) = delete;
  ~JournalFile();
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  const int fd_;
  const std::string path_;
};

class JournalSync {
 public:
  // The journal appends to `file` from now on.
  void SetFile(std::shared_ptr<JournalFile> file);
  // One more record was written to the current file.
  void Written();
  // Returns once every record written before the call is on disk. A failed
  // sync fails this and every later call: what is in memory may be ahead
  // of the disk.
  absl::Status SyncWritten();
  // Records written and not yet known durable.
  int64_t unsynced() const;
  // fdatasync calls made so far (fewer than the records they covered when
  // requests came together).
  int64_t syncs() const;

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<JournalFile> file_ ABSL_GUARDED_BY(mu_);
  int64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t durable_ ABSL_GUARDED_BY(mu_) = 0;
  bool syncing_ ABSL_GUARDED_BY(mu_) = false;
  int64_t syncs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_JOURNAL_SYNC_H_
