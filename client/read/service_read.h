// ServiceRead: one consumer's read of one iteration of a service job. A
// heartbeat thread learns the tasks, and either a fetch thread per request
// slot of each task (task_reader.h) or, for a coordinated read, one round
// thread (coordinated_reader.h) pulls elements into one buffer
// (read_state.h). Buffered plus requested elements never exceed
// max_outstanding, which bounds memory. The `distribute` iterator
// (data_service_dataset.cc) starts one once it has its iteration.
#ifndef SLUICE_CLIENT_READ_SERVICE_READ_H_
#define SLUICE_CLIENT_READ_SERVICE_READ_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "client/read/coordinated_reader.h"
#include "client/read/element_transport.h"
#include "client/read/epoch_losses.h"
#include "client/read/iteration_heartbeat.h"
#include "client/read/read_state.h"
#include "client/read/split_deliveries.h"
#include "client/read/task_reader.h"
#include "service/dispatcher_client.h"
#include "sluice/element.h"

namespace sluice::reader {

struct ServiceReadOptions {
  // The dispatcher's consumer id for this read, and the secret that lets
  // this client release it.
  int64_t iteration_client_id = 0;
  std::string client_secret;
  int64_t max_outstanding = 0;  // 0 adapts (read_state.h)
  proto::WireCompression compression = proto::COMPRESSION_NONE;
  int64_t consumer_index = -1;  // coordinated reads; -1 otherwise
  // No other consumer shares the job (it has no name).
  bool sole_reader = true;
  bool exactly_once = false;
  // Set for a parallel_epochs read, whose lost tasks cut it short.
  std::optional<EpochLosses> losses;
  // Losses end the read with a warning, not DataLoss.
  bool allow_partial = false;
  // How long the dispatcher may go unheard before the read fails.
  std::chrono::milliseconds dispatcher_deadline{60000};
  TransportOptions transport;
  // A restored read: what was delivered before the save (exactly_once).
  SplitDeliveries restored;
  // Hand elements out in split order (exactly_once, sole consumer).
  bool deterministic = false;
  // A parallel_epochs read that can be saved: record the (worker, position)
  // of what GetNext hands out; `restored` holds what a restore skipped.
  bool track_worker_positions = false;
  // A distributed_epoch read without exactly_once: a lost task's
  // unfinished splits are read again, so what it delivered may repeat,
  // which the reader says (how many at most) when it hears of the loss.
  bool lost_splits_repeat = false;
  // DistributeOp.cross_trainer_cache.trainer_id: sent with every
  // GetElements, so that each worker serves this trainer its own stream.
  std::string trainer_id;
};

// Gives the dispatcher back an iteration client, best effort (one not
// released is released after client_timeout_ms).
// `taken`: a shared exactly_once read's positions taken of splits that may
// still be out (SplitPositionFilter::Taken), and whether some did not fit.
void ReleaseIterationClient(DispatcherClient& service, int64_t client_id, const std::string& client_secret,
                            const std::vector<std::pair<int64_t, IntRanges>>& taken = {},
                            bool taken_cut = false);

class ServiceRead {
 public:
  ServiceRead(std::shared_ptr<DispatcherClient> service, ServiceReadOptions options);
  // Stops the threads and releases the consumer at the dispatcher.
  ~ServiceRead();

  absl::Status GetNext(Element* element, bool* end);
  // What GetNext has handed out, with what the restore had delivered; an
  // exactly_once read that is not coordinated tracks it.
  SplitDeliveries Delivered();

 private:
  // Constant after construction.
  const std::shared_ptr<DispatcherClient> service_;
  const bool allow_partial_;
  const int64_t client_id_;
  const std::string client_secret_;

  ReadState state_;
  TaskReader fetches_;
  CoordinatedReader rounds_;
  IterationHeartbeat heartbeat_;
  // A restored parallel_epochs read: OK when every worker whose epoch the
  // save left unfinished served this read; DataLoss naming the others (a
  // warning with allow_partial).
  absl::Status RestoredWorkersServed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_.mu);

  // How the read ends, once judged.
  std::optional<absl::Status> end_status_ ABSL_GUARDED_BY(state_.mu);
  // Started last, joined first: they use everything above.
  std::thread heartbeat_thread_;
  std::thread rounds_thread_;  // coordinated reads only
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_SERVICE_READ_H_
