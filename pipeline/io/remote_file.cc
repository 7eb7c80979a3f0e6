#include "pipeline/io/remote_file.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/exceptions.h"
#include "common/thread_pool.h"
#include "pipeline/io/object_storage_settings.h"
#include "pipeline/sandbox.h"

namespace sluice::io {
namespace {

// At least enough for several files' parts at once, and as many as the
// settings let one source keep in flight (objects_in_flight, for many small
// objects over a slow link), within a bound.
constexpr int64_t kMinFetchThreads = 16;
constexpr int64_t kMaxFetchThreads = 256;

int FetchThreadsWanted() {
  int64_t wanted = kMinFetchThreads;
  absl::StatusOr<std::shared_ptr<const ObjectStorageContext>> context = CurrentObjectStorage();
  if (context.ok())
    wanted = std::max(wanted, int64_t{(*context)->objects_in_flight} + (*context)->parts_in_flight);
  return static_cast<int>(std::min(wanted, kMaxFetchThreads));
}

}  // namespace

void RunOnFetchThreads(std::function<void()> task) {
  static absl::Mutex mu(absl::kConstInit);
  static ThreadPool* pool ABSL_GUARDED_BY(mu) = nullptr;
  static pid_t owner ABSL_GUARDED_BY(mu) = 0;
  ThreadPool* current = nullptr;
  {
    absl::MutexLock lock(&mu);
    // Never destroyed: a pool joined at exit could wait on a stalled
    // server. In a forked child the old pool's threads do not exist; it is
    // left as it is and a new one started.
    if (pool == nullptr || owner != getpid()) {
      try {
        pool = new ThreadPool(FetchThreadsWanted());
        owner = getpid();
      } catch (const std::exception&) {
        // No threads to be had (a worker at its address-space limit): the
        // caller's thread fetches, one part at a time.
        pool = nullptr;
      }
    }
    current = pool;
  }
  if (current == nullptr) {
    task();
    return;
  }
  // The pool serves every tenant: each task runs under the sandbox of the
  // thread that asked for it, so that what it opens is checked for the
  // tenant whose read it is.
  current->Schedule([sandbox = ThreadPipelineSandbox(), task = std::move(task)] {
    ScopedPipelineSandbox scope(sandbox);
    task();
  });
}

struct RemoteFile::Part {
  uint64_t offset = 0;
  uint64_t length = 0;
  // Set when the file is closed: a part not yet started is not fetched.
  std::atomic<bool> abandoned{false};
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  std::string bytes;  // written before done, read after
};

RemoteFile::RemoteFile(ObjectInfo info, uint64_t part_bytes, int parts_in_flight)
    : info_(std::move(info)),
      part_bytes_(std::max<uint64_t>(part_bytes, 1)),
      parts_in_flight_(std::max(parts_in_flight, 1)) {}

// Parts in flight end before the file does: none outlives its reader (a
// process exiting while a fetch thread is inside libcurl and OpenSSL would
// crash in their teardown). Parts not yet started are skipped.
RemoteFile::~RemoteFile() {
  for (const std::shared_ptr<Part>& part : parts_) part->abandoned.store(true);
  for (const std::shared_ptr<Part>& part : parts_) {
    absl::MutexLock lock(&part->mu);
    part->mu.Await(absl::Condition(&part->done));
  }
}

void RemoteFile::ScheduleParts() {
  while (static_cast<int>(parts_.size()) < parts_in_flight_ && next_offset_ < info_.size) {
    auto part = std::make_shared<Part>();
    part->offset = next_offset_;
    part->length = std::min(part_bytes_, info_.size - next_offset_);
    next_offset_ += part->length;
    parts_.push_back(part);
    if (parts_.size() == 1 && position_ == 0 && part->offset + part->length >= info_.size &&
        !started_fetching_) {
      // The whole object in one part: fetched here, no thread hop.
      absl::Status status = ReadObjectRange(info_, part->offset, part->length, &part->bytes);
      absl::MutexLock lock(&part->mu);
      part->status = std::move(status);
      part->done = true;
      continue;
    }
    started_fetching_ = true;
    RunOnFetchThreads([info = info_, part] {
      absl::Status status = part->abandoned.load()
                                ? absl::CancelledError("the file was closed")
                                : CallContained("fetching a part", [&] {
                                    return ReadObjectRange(info, part->offset, part->length, &part->bytes);
                                  });
      absl::MutexLock lock(&part->mu);
      part->status = std::move(status);
      part->done = true;
    });
  }
}

absl::Status RemoteFile::SeekBeforeReading(uint64_t offset) {
  if (offset > info_.size) return ChangedSinceSave(info_.url, info_.size, offset);
  if (!parts_.empty() || next_offset_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat("'", info_.url, "': a seek after reading began"));
  }
  next_offset_ = offset;
  return absl::OkStatus();
}

absl::StatusOr<size_t> RemoteFile::Read(char* buffer, size_t n) {
  size_t copied = 0;
  while (copied < n) {
    if (parts_.empty()) ScheduleParts();
    if (parts_.empty()) break;  // the end
    Part& part = *parts_.front();
    {
      absl::MutexLock lock(&part.mu);
      part.mu.Await(absl::Condition(&part.done));
      if (!part.status.ok()) return part.status;
    }
    const size_t take = std::min(n - copied, part.bytes.size() - position_);
    std::memcpy(buffer + copied, part.bytes.data() + position_, take);
    copied += take;
    position_ += take;
    if (position_ == part.bytes.size()) {
      parts_.pop_front();
      position_ = 0;
      ScheduleParts();
    }
    // One part's bytes at a time: the caller asked for a buffer's worth.
    if (copied > 0) break;
  }
  return copied;
}

}  // namespace sluice::io
