#include "dispatcher/journal_sync.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/metrics.h"

namespace sluice::dispatcher {

JournalFile::~JournalFile() {
  if (fd_ >= 0) ::close(fd_);
}

void JournalSync::SetFile(std::shared_ptr<JournalFile> file) {
  absl::MutexLock lock(&mu_);
  file_ = std::move(file);
}

void JournalSync::Written() {
  absl::MutexLock lock(&mu_);
  ++written_;
}

int64_t JournalSync::unsynced() const {
  absl::MutexLock lock(&mu_);
  return written_ - durable_;
}

int64_t JournalSync::syncs() const {
  absl::MutexLock lock(&mu_);
  return syncs_;
}

absl::Status JournalSync::SyncWritten() {
  static Histogram& sync_seconds =
      ProcessMetrics()
          .AddHistogram("sluice_journal_fsync_duration_seconds", "time one fdatasync of the journal took", {})
          .Get();
  static Counter& records_synced =
      ProcessMetrics()
          .AddCounter("sluice_journal_records_synced_total",
                      "journal records made durable; over the fsync count, the records each sync covered")
          .Get();
  mu_.Lock();
  const int64_t target = written_;
  // A sync already running may not cover `target`: wait for it, then
  // sync again if still needed (or let a waiter that woke first do it).
  while (failure_.ok() && durable_ < target && syncing_) {
    mu_.Await(absl::Condition(
        +[](JournalSync* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) { return !self->syncing_; }, this));
  }
  if (!failure_.ok() || durable_ >= target) {
    absl::Status status = failure_;
    mu_.Unlock();
    return status;
  }
  syncing_ = true;
  const int64_t covering = written_;
  const std::shared_ptr<JournalFile> file = file_;
  mu_.Unlock();

  const auto start = std::chrono::steady_clock::now();
  const int result = ::fdatasync(file->fd());
  const int error = errno;
  sync_seconds.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  absl::MutexLock lock(&mu_);
  syncing_ = false;
  ++syncs_;
  if (result != 0) {
    failure_ = absl::InternalError(absl::StrCat("cannot sync ", file->path(), ": ", std::strerror(error)));
  } else if (covering > durable_) {
    records_synced.Increment(static_cast<double>(covering - durable_));
    durable_ = covering;
  }
  return failure_;
}

}  // namespace sluice::dispatcher
