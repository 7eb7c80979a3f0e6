// Journal: the dispatcher's durable record of its state, in a work
// directory. Every update is appended (checksummed) as it is applied, and
// synced before any answer that tells of it (group commit: JournalSync);
// now and then a snapshot of the whole state
// replaces the records before it. The format is in docs/design.md, "The
// journal".
//
//   DIR/snapshot-NNNNNNNNNN.pb  the state after every journal file < N
//   DIR/journal-NNNNNNNNNN.log  updates after that snapshot, in order
//
// Both are sequences of records: a 4-byte little-endian payload length, its
// masked CRC-32C, the payload (a serialized proto, or a chunk of one), and
// the payload's masked CRC-32C, after an 8-byte magic. A snapshot is a
// size record and then chunks, so no record exceeds what recovery reads.
// Every file is created 0600: it holds the datasets' definitions.
#ifndef SLUICE_DISPATCHER_JOURNAL_H_
#define SLUICE_DISPATCHER_JOURNAL_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dispatcher/journal_sync.h"
#include "sluice/proto/journal.pb.h"

namespace sluice::dispatcher {

// Bounds shared by the writer and recovery, so that whatever is written is
// read back: the writer refuses what recovery would refuse. Tests make them
// small.
struct JournalLimits {
  // The largest record payload: one update, or one chunk of a snapshot.
  uint32_t max_record_bytes = uint32_t{1} << 30;
  // The largest serialized snapshot: protobuf parses no message over 2 GiB.
  int64_t max_snapshot_bytes = std::numeric_limits<int32_t>::max();
};

class Journal {
 public:
  // What a work directory held.
  struct Recovered {
    std::optional<proto::StateSnapshot> snapshot;
    // Updates after the snapshot, each with where it was read from, so a
    // failure to apply it can name the place.
    struct Record {
      proto::Update update;
      std::string file;
      int64_t offset = 0;
    };
    std::vector<Record> updates;
    // A torn tail record that was cut off, said as "FILE: ...".
    std::vector<std::string> warnings;
  };

  // Locks DIR (created when missing) for this process, reads it and
  // prepares to append. A last record cut short (a crash mid-write) is
  // truncated and reported in warnings; any other damage, a complete last
  // record that fails its checksum included, is DataLoss naming the file
  // and byte offset. A DIR another live process holds is FailedPrecondition
  // naming its pid, before anything in DIR is read or changed: two
  // dispatchers on one work dir would delete each other's journal files.
  // Limits out of range (a record under 8 bytes; either above its
  // default) are InvalidArgument.
  static absl::StatusOr<Journal> Open(const std::string& dir, Recovered* recovered,
                                      const JournalLimits& limits = {});

  Journal(Journal&&) noexcept;
  Journal& operator=(Journal&&) noexcept;
  ~Journal();

  // Appends one update without waiting for the disk: sync() makes it
  // durable (group commit, journal_sync.h). An update larger than
  // limits().max_record_bytes is ResourceExhausted and nothing is written:
  // the journal stays whole and usable. Any other error may leave part of
  // a record behind, and the journal must not be appended to again.
  absl::Status Write(const proto::Update& update);
  // Write, then waits until it is on disk.
  absl::Status Append(const proto::Update& update);
  // Makes what was written durable; callable without the lock the
  // writer holds, and alive as long as its holders.
  std::shared_ptr<JournalSync> sync() const { return sync_; }
  // Writes `snapshot` (the state after every update appended so far),
  // starts a new journal file and deletes the files it replaces. A snapshot
  // larger than limits().max_snapshot_bytes is ResourceExhausted, checked
  // before anything is written: the previous snapshot and the journal since
  // stay in place, appends may go on, and recovery replays them.
  // BeginSnapshot, then WriteSnapshotFile.
  absl::Status WriteSnapshot(const proto::StateSnapshot& snapshot);
  // Compaction in two steps, so that the writer's lock is held for the
  // first only. BeginSnapshot, with the state after every update appended
  // so far: syncs the file being appended to, starts the next and returns
  // its number; later updates go there. WriteSnapshotFile then writes the
  // snapshot for that number from any thread, without the lock. Until the
  // snapshot is renamed into place recovery reads the previous one and
  // every journal file since, so a crash or a failure between the steps
  // loses nothing. An error from BeginSnapshot leaves the journal unusable,
  // as one from Write.
  absl::StatusOr<int64_t> BeginSnapshot();
  // Writes `snapshot` as DIR/snapshot-SEQUENCE.pb (written to a temporary
  // file, synced, renamed, the directory synced), then deletes the files it
  // replaces: the journal files and snapshots numbered below SEQUENCE. One
  // larger than limits.max_snapshot_bytes is ResourceExhausted, and nothing
  // is written or deleted.
  static absl::Status WriteSnapshotFile(const std::string& dir, int64_t sequence,
                                        const proto::StateSnapshot& snapshot, const JournalLimits& limits);
  // Updates appended since the last snapshot.
  int64_t records_since_snapshot() const { return records_since_snapshot_; }
  // Bytes appended since the last snapshot (large LeaseSplits records
  // make a journal long in few records).
  int64_t bytes_since_snapshot() const { return bytes_since_snapshot_; }
  const std::string& dir() const { return dir_; }
  const JournalLimits& limits() const { return limits_; }

 private:
  Journal(std::string dir, const JournalLimits& limits) : dir_(std::move(dir)), limits_(limits) {}
  absl::Status StartFile(int64_t sequence);
  void Close();

  std::string dir_;
  JournalLimits limits_;
  int lock_fd_ = -1;                   // DIR/LOCK, flock()ed while this journal lives
  std::shared_ptr<JournalFile> file_;  // appended to
  std::shared_ptr<JournalSync> sync_ = std::make_shared<JournalSync>();
  int64_t sequence_ = 0;  // of the journal file being appended to
  int64_t records_since_snapshot_ = 0;
  int64_t bytes_since_snapshot_ = 0;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_JOURNAL_H_
