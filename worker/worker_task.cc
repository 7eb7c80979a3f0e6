#include "worker/worker_task.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/element_cost.h"
#include "common/exceptions.h"
#include "common/host_buffer_cache.h"
#include "common/large_buffer_allocator.h"
#include "pipeline/builder.h"
#include "pipeline/sandbox.h"
#include "pipeline/sharding.h"
#include "service/element_wire.h"
#include "service/metrics.h"
#include "service/shared_memory.h"
#include "service/worker_positions.h"
#include "worker/dispatcher_splits.h"
#include "worker/request_checks.h"

namespace sluice::worker {
namespace {

// Hands out one split, then says end: an exactly_once task runs its
// pipeline once per split, so it knows where each element came from.
class OneSplitProvider : public SplitProvider {
 public:
  explicit OneSplitProvider(Split split) : split_(split) {}
  absl::Status GetNext(Split* split, bool* end_of_splits) override {
    *end_of_splits = given_;
    *split = split_;
    given_ = true;
    return absl::OkStatus();
  }
  absl::Status Reset() override {
    given_ = false;
    return absl::OkStatus();
  }
  std::string Save() const override { return given_ ? "1" : "0"; }
  absl::Status Restore(const std::string& state) override {
    given_ = state == "1";
    return absl::OkStatus();
  }

 private:
  const Split split_;
  bool given_ = false;
};

}  // namespace

WorkerImpl::Task::~Task() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (splits_ != nullptr) splits_->Cancel();
  }
  {
    absl::MutexLock lock(&run_->mu);
    run_->mu.Await(absl::Condition(&run_->done));
  }
  // Every parked request gets its answer: an empty one, as for a task
  // this worker does not have.
  ExpireWaiters(absl::InfiniteFuture());
}

absl::Status WorkerImpl::Task::Start() {
  {
    absl::MutexLock lock(&run_->mu);
    run_->done = false;
  }
  try {
    if (def_.processing_mode() == proto::DISTRIBUTED_EPOCH) {
      // Started now, so the first splits arrive while the pipeline builds.
      splits_ = std::make_unique<SplitPrefetcher>(
          FetchSplitsFrom(dispatcher_, def_.iteration_id(), def_.task_id(), rerun_skips_),
          SplitPrefetcher::Options{});
    }
    // Detached, so that its stack goes when its pipeline ends rather than
    // when the task is dropped (at job GC, minutes later: a worker serving
    // many short reads ran out of threads). The destructor waits on
    // `run_`, which the thread shares, so nothing of the task is touched
    // after it says it is done.
    std::thread([this, run = run_] {
      Run();
      absl::MutexLock lock(&run->mu);
      run->done = true;
    }).detach();
    return absl::OkStatus();
  } catch (...) {
    // Out of threads (or of memory for a stack): this task fails, the
    // worker goes on.
    const absl::Status status = StatusFromCurrentException("the worker cannot start the task");
    splits_.reset();
    {
      absl::MutexLock lock(&mu_);
      status_ = status;
      done_ = true;
    }
    try {
      ServeWaiters();
    } catch (...) {
      // Out of memory too: a waiter not answered now is at its deadline.
    }
    absl::MutexLock lock(&run_->mu);
    run_->done = true;
    return status;
  }
}

void WorkerImpl::Task::Take(int max_elements, proto::WireCompression compression, ResponseFit fit,
                            absl::Time deadline, ElementsCallback done, const std::string& trainer) {
  ElementsReply reply;
  {
    absl::MutexLock lock(&mu_);
    Waiter waiter{max_elements, compression, fit, deadline, std::move(done), trainer};
    if (shared_.has_value() ? !HasOutputFor(trainer) : !HasOutput()) {
      waiters_.push_back(std::move(waiter));
      return;
    }
    reply = TakeFor(waiter);
    done = std::move(waiter.done);
  }
  done(std::move(reply));
}

bool WorkerImpl::Task::HasOutputFor(const std::string& trainer) {
  if (HasOutput()) return true;
  absl::StatusOr<CrossTrainerCache::Cursor*> cursor = shared_->Find(trainer);
  return !cursor.ok() || (*cursor)->position < shared_->end();
}

WorkerImpl::ElementsReply WorkerImpl::Task::TakeFor(const Waiter& waiter) {
  if (shared_.has_value())
    return TakeShared(waiter.trainer, waiter.max_elements, waiter.compression, waiter.fit);
  return TakeLocked(waiter.max_elements, waiter.compression, waiter.fit);
}

void WorkerImpl::Task::TakeRound(int64_t round, int64_t consumer, bool others_past_round,
                                 proto::WireCompression compression, absl::Time deadline,
                                 ElementsCallback done) {
  if (consumer < 0 || consumer >= def_.num_consumers()) {
    ElementsReply reply;
    reply.status = absl::InvalidArgumentError(absl::StrCat(
        "consumer_index ", consumer, " is out of range for ", def_.num_consumers(), " consumers"));
    return done(std::move(reply));
  }
  std::vector<std::pair<ElementsCallback, ElementsReply>> ready;
  {
    absl::MutexLock lock(&mu_);
    rounds_.Wait(round, consumer, others_past_round, compression, deadline, std::move(done));
    AssembleRoundsLocked(&ready);
  }
  for (auto& [callback, reply] : ready) callback(std::move(reply));
}

void WorkerImpl::Task::ExpireWaiters(absl::Time now) {
  std::vector<std::pair<ElementsCallback, ElementsReply>> expired;
  {
    absl::MutexLock lock(&mu_);
    rounds_.Expire(now, &expired);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      ElementsReply reply;
      reply.compression = it->compression;
      reply.first_index = handed_out_;
      if (shared_.has_value()) {
        absl::StatusOr<CrossTrainerCache::Cursor*> cursor = shared_->Find(it->trainer);
        if (cursor.ok()) reply.first_index = (*cursor)->sent;
      }
      expired.emplace_back(std::move(it->done), std::move(reply));
      it = waiters_.erase(it);
    }
  }
  for (auto& [done, reply] : expired) done(std::move(reply));
}

void WorkerImpl::Task::Buffered(int64_t* elements, int64_t* bytes) {
  absl::MutexLock lock(&mu_);
  *elements += static_cast<int64_t>(buffer_.size());
  *bytes += bytes_;
  if (shared_.has_value()) {
    *elements += shared_->end() - shared_->begin();
    *bytes += shared_->bytes();
  }
}

void WorkerImpl::Task::AssembleRoundsLocked(std::vector<std::pair<ElementsCallback, ElementsReply>>* ready) {
  const RoundAssembler::Taken taken = rounds_.Assemble(&buffer_, done_, status_, ready);
  bytes_ -= taken.bytes;
  handed_out_ += taken.elements;
}

std::pair<int64_t, size_t> WorkerImpl::Task::Lendable(const Element& element) const {
  std::pair<int64_t, size_t> lendable{0, 0};
  if (heap_ == nullptr) return lendable;
  for (const Tensor& t : element.components) {
    const size_t bytes = t.ByteSize();
    if (t.dtype() == DType::kString || bytes < SharedBufferHeap::kMinBytes) continue;
    if (!heap_->Find(t.raw_data(), bytes).has_value()) continue;
    lendable.first += static_cast<int64_t>(bytes);
    ++lendable.second;
  }
  return lendable;
}

WorkerImpl::ElementsReply WorkerImpl::Task::TakeLocked(int max_elements, proto::WireCompression compression,
                                                       ResponseFit fit) {
  ElementsReply reply;
  reply.compression = compression;
  reply.first_index = handed_out_;
  reply.heap = heap_;
  int64_t reply_bytes = 0;    // all of them: should lending fail, they go inline
  int64_t reply_counted = 0;  // those that go into the region
  std::pair<int64_t, size_t> reply_lendable{0, 0};
  while (!buffer_.empty() && static_cast<int>(reply.elements.size()) < max_elements) {
    const auto encoded_bytes = static_cast<int64_t>(ElementWireBound(buffer_.front()));
    int64_t counted = encoded_bytes;
    if (fit.lending) {
      // A response is lent whole or not at all, within a session's bounds:
      // one that would pass them ends before this element, and an element
      // alone past them is never lent, so its bytes must fit the region.
      const auto [bytes, tensors] = Lendable(buffer_.front());
      if (reply_lendable.second + tensors > kMaxLeases || reply_lendable.first + bytes > kMaxLentBytes) {
        if (!reply.elements.empty()) break;
      } else {
        counted -= bytes;
        reply_lendable.first += bytes;
        reply_lendable.second += tensors;
      }
    }
    // A response stays under gRPC's message limit (and its shared-memory
    // region): a full one goes now, and an element that alone is past it
    // cannot be sent at all (or needs a larger region first).
    if (reply_bytes + encoded_bytes > kMaxResponseBytes || reply_counted + counted > fit.bytes) {
      if (!reply.elements.empty()) break;
      if (encoded_bytes <= kMaxResponseBytes) {
        reply.shared_memory_needed = counted;
      } else {
        reply.status = ElementTooLarge(id(), absl::StrCat("element ", handed_out_), encoded_bytes);
      }
      return reply;
    }
    reply_bytes += encoded_bytes;
    reply_counted += counted;
    bytes_ -= ElementCost(buffer_.front());
    reply.elements.push_back(std::move(buffer_.front()));
    buffer_.pop_front();
    if (!tags_.empty()) {
      reply.tags.split_seqs.push_back(tags_.front().first);
      reply.tags.split_positions.push_back(tags_.front().second);
      tags_.pop_front();
    }
  }
  handed_out_ += static_cast<int64_t>(reply.elements.size());
  // A split is wholly sent once every element produced from it is.
  while (!completions_.empty() && completions_.front().produced <= handed_out_) {
    reply.tags.completed_splits.push_back(completions_.front().seq);
    reply.tags.completed_split_sizes.push_back(completions_.front().size);
    completions_.pop_front();
  }
  if (buffer_.empty() && done_) {
    // A failed pipeline's error comes after its last elements.
    if (!status_.ok() && reply.elements.empty()) reply.status = status_;
    if (status_.ok()) reply.end_of_sequence = true;
  }
  return reply;
}

WorkerImpl::ElementsReply WorkerImpl::Task::TakeShared(const std::string& trainer, int max_elements,
                                                       proto::WireCompression compression, ResponseFit fit) {
  ElementsReply reply;
  reply.compression = compression;
  absl::StatusOr<CrossTrainerCache::Cursor*> found = shared_->Find(trainer);
  if (!found.ok()) {
    reply.status = found.status();
    return reply;
  }
  CrossTrainerCache::Cursor& cursor = **found;
  reply.first_index = cursor.sent;
  // A trainer behind the oldest element kept goes on from it.
  const int64_t skipped = shared_->Behind(cursor);
  cursor.position += skipped;
  int64_t reply_bytes = 0;
  int64_t hits = 0;
  while (static_cast<int>(reply.elements.size()) < max_elements) {
    const bool kept = shared_->HasKept(cursor);
    if (!kept && buffer_.empty()) break;
    const Element& next = kept ? shared_->At(cursor.position) : buffer_.front();
    const auto encoded_bytes = static_cast<int64_t>(ElementWireBound(next));
    // As TakeLocked: under gRPC's limit and the shared-memory region.
    if (reply_bytes + encoded_bytes > std::min(kMaxResponseBytes, fit.bytes)) {
      if (!reply.elements.empty()) break;
      if (encoded_bytes <= kMaxResponseBytes) {
        reply.shared_memory_needed = encoded_bytes;
      } else {
        reply.status = ElementTooLarge(id(), absl::StrCat("element ", cursor.position), encoded_bytes);
      }
      // Nothing was handed out: the skip comes with the next reply.
      cursor.position -= skipped;
      return reply;
    }
    reply_bytes += encoded_bytes;
    if (kept) {
      reply.elements.push_back(next);
      ++hits;
    } else {
      // The trainer at the head takes the stream's next element, which is
      // kept for those behind.
      shared_->Append(buffer_.front());
      bytes_ -= ElementCost(buffer_.front());
      reply.elements.push_back(std::move(buffer_.front()));
      buffer_.pop_front();
      ++handed_out_;
    }
    ++cursor.position;
  }
  cursor.sent += static_cast<int64_t>(reply.elements.size());
  reply.trainer_skipped = skipped;
  if (skipped > 0) CrossTrainerCache::CountSkipped(skipped);
  if (hits > 0) CrossTrainerCache::CountHits(hits);
  if (buffer_.empty() && done_ && !shared_->HasKept(cursor)) {
    if (!status_.ok() && reply.elements.empty()) reply.status = status_;
    if (status_.ok()) reply.end_of_sequence = true;
  }
  return reply;
}

void WorkerImpl::Task::ServeWaiters() {
  std::vector<std::pair<ElementsCallback, ElementsReply>> served;
  {
    absl::MutexLock lock(&mu_);
    if (coordinated()) AssembleRoundsLocked(&served);
    // Cross-trainer: each trainer's waiter is answered when that trainer
    // has something, which elements another took from the buffer may give.
    for (auto it = waiters_.begin(); shared_.has_value() && it != waiters_.end();) {
      if (!HasOutputFor(it->trainer)) {
        ++it;
        continue;
      }
      ElementsReply reply = TakeFor(*it);
      served.emplace_back(std::move(it->done), std::move(reply));
      it = waiters_.erase(it);
    }
    while (!waiters_.empty() && HasOutput()) {
      Waiter waiter = std::move(waiters_.front());
      waiters_.pop_front();
      served.emplace_back(std::move(waiter.done),
                          TakeLocked(waiter.max_elements, waiter.compression, waiter.fit));
    }
  }
  for (auto& [done, reply] : served) done(std::move(reply));
}

bool WorkerImpl::Task::HasRoom() const {
  if (cancelled_) return true;
  if (bytes_ >= max_bytes_) return false;
  const auto buffered = static_cast<int64_t>(buffer_.size());
  // A coordinated round needs num_consumers elements at once.
  const int64_t rounds = 2 * def_.num_consumers();
  if (max_elements_ > 0) return buffered < std::max(max_elements_, rounds);
  // buffer_elements 0 (the default): kDefaultBufferElements, and small
  // elements past it while they take little memory, so that a response can
  // carry a thousand of them.
  return buffered < std::max(kDefaultBufferElements, rounds) ||
         (buffered < kMaxSmallElementsBuffered && bytes_ < kSmallElementsBufferBytes);
}

std::shared_ptr<SharedBufferHeap> MakeTaskHeap(const WorkerConfig& config) {
  if (!config.shared_memory) return nullptr;
  // As the process's HostBufferCache under a memory limit (worker_config.cc).
  size_t cached = HostBufferCache::kMaxCachedBytes;
  if (config.max_memory_bytes > 0)
    cached = std::min(cached, static_cast<size_t>(config.max_memory_bytes) / 32);
  return std::make_shared<SharedBufferHeap>(cached);
}

void WorkerImpl::Task::Run() {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    load_.Begin(PipelineLoad::Clock::now());
  }
  {
    // Every step of the pipeline allocates its large tensors in the task's
    // heap (threads it starts inherit the scope).
    LargeBufferAllocatorScope scope(heap_);
    // Files are read for the job's tenant, under its data roots and
    // cache_dir (threads the pipeline starts take it too).
    ScopedPipelineSandbox sandbox(TenantPipelineSandbox(def_.tenant()));
    status = ProduceContained();
  }
  // No more buffers to reuse: keep only those still in use (buffered
  // elements, and lent ones).
  if (heap_ != nullptr) heap_->StopCaching();
  // The split prefetcher's thread goes with the pipeline, not with the
  // task (which lives until the reader is done, or until job GC).
  std::unique_ptr<SplitPrefetcher> splits;
  {
    absl::MutexLock lock(&mu_);
    splits = std::move(splits_);
    load_.End(PipelineLoad::Clock::now());
  }
  splits.reset();
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return;
    status_ = status;
    done_ = true;
  }
  // This thread is detached: what throws from here on (memory is likely
  // short, after an allocation failure) would end the process, every
  // tenant's tasks with it.
  try {
    ServeWaiters();
  } catch (...) {
    // A waiter not answered now is answered at its deadline (ExpireWaiters).
  }
  if (!status.ok()) {
    try {
      spdlog::error("task {} failed: {}", id(), std::string(status.message()));
    } catch (...) {
      // Not logged; the task's status still says why.
    }
  }
  try {
    on_finished_(id(), status);
  } catch (...) {
    // The dispatcher is not told of the failure; readers still get it.
  }
}

absl::Status WorkerImpl::Task::ProduceContained() {
  absl::Status status = CallContained("the pipeline", [this] { return Produce(); });
  if (!IsAllocationFailure(status) || max_memory_bytes_ == 0) return status;
  try {
    return absl::ResourceExhaustedError(absl::StrCat(
        status.message(), "; the worker's max_memory_bytes is ", max_memory_bytes_,
        ": lower batch, shuffle or buffer sizes, or raise max_memory_bytes (--max-memory-bytes)"));
  } catch (...) {
    return status;  // no memory for the advice: the error as it is
  }
}

absl::Status WorkerImpl::Task::WaitForRoom() {
  absl::MutexLock lock(&mu_);
  if (!HasRoom()) {  // the clock is read only when the buffer is full
    load_.WaitBegins(PipelineLoad::Clock::now());
    mu_.Await(absl::Condition(this, &Task::HasRoom));
    load_.WaitEnds(PipelineLoad::Clock::now());
  }
  if (cancelled_) return absl::CancelledError("task cancelled");
  return absl::OkStatus();
}

void WorkerImpl::Task::Push(Element element, std::optional<std::pair<int64_t, int64_t>> tag) {
  static Counter& elements_produced =
      ProcessMetrics()
          .AddCounter("sluice_worker_elements_produced_total", "elements its pipelines produced")
          .Get();
  static Counter& bytes_produced =
      ProcessMetrics()
          .AddCounter("sluice_worker_bytes_produced_total", "bytes of the elements its pipelines produced")
          .Get();
  bytes_produced.Increment(static_cast<double>(element.ByteSize()));
  // The buffer counts what an element really holds, so that elements of
  // no data (empty strings) still fill it.
  const int64_t cost = ElementCost(element);
  elements_produced.Increment();
  bool serve = false;
  {
    absl::MutexLock lock(&mu_);
    // A failed allocation leaves the buffer, its tags and its byte count
    // as they were: the buffered elements still go out before the error.
    buffer_.push_back(std::move(element));
    if (tag.has_value()) {
      try {
        tags_.push_back(*tag);
      } catch (...) {
        buffer_.pop_back();
        throw;
      }
    }
    bytes_ += cost;
    ++produced_;
    serve = !waiters_.empty() || rounds_.has_rounds();
  }
  if (serve) ServeWaiters();
}

absl::Status WorkerImpl::Task::ProducePerSplit(const DatasetPtr& dataset) {
  while (true) {
    Split run;
    bool end = false;
    if (absl::Status s = splits_->GetNext(&run, &end); !s.ok()) return s;
    if (end) return absl::OkStatus();
    for (int64_t index = 0; index < run.count; ++index) {
      if (absl::Status s = ProduceOneSplit(dataset, SplitRunPart(run, index, 1)); !s.ok()) return s;
    }
  }
}

absl::Status WorkerImpl::Task::ProduceOneSplit(const DatasetPtr& dataset, const Split& split) {
  OneSplitProvider one(split);
  IteratorContext context;
  context.split_provider = &one;
  // The dispatcher cut this exactly_once job's splits along its batches.
  context.split_positions_in_seeded_order = true;
  context.split_order_epoch = def_.repetition();
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = dataset->MakeIterator(context);
  if (!iterator.ok()) return iterator.status();
  // A rerun of a shared read's lost split: what its consumers took is
  // made again (positions follow the pipeline's order) but not served.
  const IntRanges taken = rerun_skips_->Take(split.seq);
  int64_t position = 0;
  for (;; ++position) {
    if (absl::Status s = WaitForRoom(); !s.ok()) return s;
    Element element;
    bool end = false;
    if (absl::Status s = (*iterator)->GetNext(&element, &end); !s.ok()) return s;
    if (end) break;
    if (!taken.empty() && InRanges(taken, position)) continue;
    Push(std::move(element), std::make_pair(split.seq, position));
  }
  absl::MutexLock lock(&mu_);
  completions_.push_back({.produced = produced_, .seq = split.seq, .size = position});
  return absl::OkStatus();
}

absl::Status WorkerImpl::Task::Produce() {
  proto::DatasetDef def = def_.dataset();
  if (IsStaticPolicy(def_.sharding_policy())) {
    if (absl::Status s = ShardForWorker(def_.sharding_policy(), def_.num_shards(), def_.shard_index(), &def);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(def);
  if (!dataset.ok()) return dataset.status();
  if (def_.exactly_once() && splits_ != nullptr) return ProducePerSplit(*dataset);
  // A restored parallel_epochs read had these positions of this worker's
  // epoch already: they are computed (the pipeline has no other way to
  // reach what follows) and dropped.
  absl::StatusOr<IntRanges> skip = RangesFromPairs(def_.skip_positions(), 0, "task skip_positions");
  if (!skip.ok()) return skip.status();
  IteratorContext context;
  context.split_provider = splits_.get();  // null in parallel_epochs
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*dataset)->MakeIterator(context);
  if (!iterator.ok()) return iterator.status();
  for (int64_t position = 0;; ++position) {
    const bool skipped = !skip->empty() && InRanges(*skip, position);
    // The reader saw the epoch's end: nothing from here on is wanted.
    if (skipped && std::prev(skip->upper_bound(position))->second == kEpochEnd) return absl::OkStatus();
    if (!skipped) {
      if (absl::Status s = WaitForRoom(); !s.ok()) return s;
    } else if (position % 1024 == 0) {
      // A long skip of costly steps still stops for a deleted task.
      absl::MutexLock lock(&mu_);
      if (cancelled_) return absl::CancelledError("task cancelled");
    }
    // Drained: the epoch ends here, as if the pipeline had.
    if (stop_for_drain_.load(std::memory_order_relaxed)) return absl::OkStatus();
    Element element;
    bool end = false;
    if (absl::Status status = (*iterator)->GetNext(&element, &end); !status.ok()) return status;
    if (end) return absl::OkStatus();
    if (!skipped) Push(std::move(element), std::nullopt);
  }
}

}  // namespace sluice::worker
