// WorkerImpl::Task: one task of a worker. Its pipeline runs on its own
// thread into a buffer bounded by count and bytes; GetElements requests
// take from the buffer or are parked until it has elements (or, for
// coordinated reads, until a round is assembled: worker/round_assembler.h).
// A pipeline that fails, throws or cannot start ends the task with that
// status, which readers get after the elements already buffered. The
// thread ends with the pipeline; the task (and its buffer) lives until the
// dispatcher drops it.
#ifndef SLUICE_WORKER_WORKER_TASK_H_
#define SLUICE_WORKER_WORKER_TASK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pipeline/dataset.h"
#include "pipeline/split_provider.h"
#include "worker/cross_trainer_cache.h"
#include "worker/dispatcher_splits.h"
#include "worker/pipeline_load.h"
#include "worker/request_checks.h"
#include "worker/round_assembler.h"
#include "worker/shared_memory_heap.h"
#include "worker/split_prefetcher.h"
#include "worker/worker_impl.h"

namespace sluice::worker {

// How long calls to the dispatcher retry UNAVAILABLE.
inline constexpr auto kDispatcherRetryFor = std::chrono::seconds(60);

// With buffer_elements 0 (the default) a task buffers up to
// kDefaultBufferElements elements, and more small ones: up to
// kMaxSmallElementsBuffered while they take under kSmallElementsBufferBytes,
// so that elements of a few bytes can go a thousand to a response (a round
// trip each 64 of them held 64-byte elements to 100k a second).
inline constexpr int64_t kDefaultBufferElements = 64;
inline constexpr int64_t kMaxSmallElementsBuffered = 8192;
inline constexpr int64_t kSmallElementsBufferBytes = int64_t{16} << 20;

// The heap a task allocates its large tensors from, so that readers on
// this host can be lent them; null when the worker offers no shared memory.
std::shared_ptr<SharedBufferHeap> MakeTaskHeap(const WorkerConfig& config);

// What one response may take: ElementWireBound bytes up to `bytes` (gRPC's
// limit, or a shared-memory region's). For a reader that takes lent tensors
// (`lending`), those lying in the task's heap count only against gRPC's
// limit: they do not go into the region.
struct ResponseFit {
  int64_t bytes = kMaxResponseBytes;
  bool lending = false;
};

class WorkerImpl::Task {
 public:
  Task(proto::TaskDef def, const WorkerConfig& config, DispatcherClient* dispatcher,
       std::function<void(int64_t, const absl::Status&)> on_finished)
      : def_(std::move(def)),
        max_elements_(config.buffer_elements),
        max_bytes_(config.buffer_bytes),
        dispatcher_(dispatcher),
        on_finished_(std::move(on_finished)),
        max_memory_bytes_(config.max_memory_bytes),
        // A cross-trainer task sends each element to several trainers:
        // its tensors are not lent, which lends one reader at a time.
        heap_(def_.cross_trainer_cache_bytes() > 0 ? nullptr : MakeTaskHeap(config)),
        rounds_(def_.task_id(), def_.num_consumers()) {
    if (def_.cross_trainer_cache_bytes() > 0) shared_.emplace(def_.cross_trainer_cache_bytes());
  }

  ~Task();

  int64_t id() const { return def_.task_id(); }
  // The capability a reader must present for this task's elements.
  const std::string& read_secret() const { return def_.read_secret(); }
  const std::string& dispatcher_incarnation() const { return def_.dispatcher_incarnation(); }

  // Builds the pipeline and starts producing. A pipeline that fails to
  // build makes a task whose readers get that error. A task that cannot
  // start (no thread for it) ends at once with its error, which readers
  // get and which is returned, for the caller to report as the task's
  // thread would have.
  absl::Status Start();

  // Answers at once when there are elements or the pipeline has ended;
  // otherwise parks the request until there are, or until `deadline`. A
  // cross-trainer task answers from `trainer`'s position in its stream.
  void Take(int max_elements, proto::WireCompression compression, ResponseFit fit, absl::Time deadline,
            ElementsCallback done, const std::string& trainer = "");

  bool coordinated() const { return def_.num_consumers() > 0; }

  // The worker drains: a parallel_epochs task stops its pipeline before
  // the next element and ends normally, its readers taking what it holds,
  // then the end. Other tasks run on: a distributed_epoch one ends once
  // the dispatcher gives it no more splits.
  void Drain() {
    if (def_.processing_mode() != proto::PARALLEL_EPOCHS) return;
    stop_for_drain_.store(true, std::memory_order_relaxed);
  }

  // Coordinated reads: consumer `consumer`'s element of `round`, parked
  // until the round is assembled (RoundAssembler) or until `deadline`.
  void TakeRound(int64_t round, int64_t consumer, bool others_past_round, proto::WireCompression compression,
                 absl::Time deadline, ElementsCallback done);

  // Answers, empty, the parked requests whose wait is over.
  void ExpireWaiters(absl::Time now);

  void Buffered(int64_t* elements, int64_t* bytes);

  // Autoscaling: its pipeline's busy and idle seconds so far.
  PipelineLoad::Seconds Load() {
    absl::MutexLock lock(&mu_);
    return load_.At(PipelineLoad::Clock::now());
  }

 private:
  struct Waiter {
    int max_elements;
    proto::WireCompression compression;
    ResponseFit fit;
    absl::Time deadline;
    ElementsCallback done;
    std::string trainer;  // a cross-trainer task's
  };

  bool HasOutput() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !buffer_.empty() || done_; }
  // A cross-trainer task: whether `trainer` has something to be answered
  // with (kept elements past its position, new ones, the end, or an error
  // for an id it may not use).
  bool HasOutputFor(const std::string& trainer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A reply to `waiter` now, from the cross-trainer cache or the buffer.
  ElementsReply TakeFor(const Waiter& waiter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Assembles the rounds that can be (RoundAssembler::Assemble) from
  // buffer_, and answers their parked requests into `ready`.
  void AssembleRoundsLocked(std::vector<std::pair<ElementsCallback, ElementsReply>>* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Up to max_elements elements that fit `fit`; below kMaxResponseBytes,
  // fit.bytes is a shared-memory region's, and a first element past it is
  // not handed out (shared_memory_needed).
  ElementsReply TakeLocked(int max_elements, proto::WireCompression compression, ResponseFit fit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for a cross-trainer task (worker/cross_trainer_cache.h):
  // `trainer`'s next elements, kept ones first, then new ones from the
  // buffer, which are kept for the trainers behind.
  ElementsReply TakeShared(const std::string& trainer, int max_elements, proto::WireCompression compression,
                           ResponseFit fit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `element`'s tensors that lie in the task's heap, which a lending reader
  // maps rather than receives: their bytes and count.
  std::pair<int64_t, size_t> Lendable(const Element& element) const;

  // Answers parked requests while there is output; the answers are sent
  // (encoded, even) after the lock is released.
  void ServeWaiters();
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void Run();

  // Produce, with what the pipeline throws made this task's error (the
  // builder's wrappers catch what each step throws; this catches the rest):
  // one request must not take the whole worker down. A failed allocation
  // says which setting bounds memory.
  absl::Status ProduceContained();

  // Waits for room in the buffer, before the pipeline is asked for an
  // element, so that it runs no further ahead than the buffer allows.
  absl::Status WaitForRoom();

  // Adds an element (with its tag in exactly_once) and serves parked
  // requests.
  void Push(Element element, std::optional<std::pair<int64_t, int64_t>> tag);

  // exactly_once: the pipeline runs once per split, from the split's
  // start, so a split that a lost worker had begun gives the same elements
  // at the same positions when rerun here.
  absl::Status ProducePerSplit(const DatasetPtr& dataset);

  absl::Status ProduceOneSplit(const DatasetPtr& dataset, const Split& split);

  absl::Status Produce();

  const proto::TaskDef def_;
  const int64_t max_elements_;
  const int64_t max_bytes_;
  DispatcherClient* const dispatcher_;
  const std::function<void(int64_t, const absl::Status&)> on_finished_;
  const int64_t max_memory_bytes_;  // for messages
  const std::shared_ptr<SharedBufferHeap> heap_;
  // Set before the task thread starts; moved out (under mu_) by that
  // thread when the pipeline ends, and cancelled (under mu_) by the
  // destructor.
  std::unique_ptr<SplitPrefetcher> splits_;
  // Positions of rerun splits not to serve (dispatcher_splits.h).
  const std::shared_ptr<RerunSkips> rerun_skips_ = std::make_shared<RerunSkips>();
  // Drain's, read by the pipeline's loop before each element.
  std::atomic<bool> stop_for_drain_{false};

  absl::Mutex mu_;
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // A cross-trainer task's kept elements and trainers' positions.
  std::optional<CrossTrainerCache> shared_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads, by round.
  RoundAssembler rounds_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t handed_out_ ABSL_GUARDED_BY(mu_) = 0;  // elements taken from buffer_ so far
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;    // elements put in buffer_ so far
  // exactly_once: (split seq, position) of each buffered element, and the
  // finished splits not yet reported.
  struct SplitCompletion {
    int64_t produced;  // elements produced when the split ended
    int64_t seq;
    int64_t size;  // elements the split produced
  };
  std::deque<std::pair<int64_t, int64_t>> tags_ ABSL_GUARDED_BY(mu_);
  std::deque<SplitCompletion> completions_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  PipelineLoad load_ ABSL_GUARDED_BY(mu_);
  // Whether the task's thread has finished with the task.
  struct RunState {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = true;  // no thread yet
  };
  const std::shared_ptr<RunState> run_ = std::make_shared<RunState>();
};

}  // namespace sluice::worker

#endif  // SLUICE_WORKER_WORKER_TASK_H_
