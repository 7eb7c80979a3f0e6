// map and batch, which may run their work on a thread pool (interleave is
// in interleave_op.cc).
//
// map and batch share ParallelIterator: a unit of input (one element for
// map, up to batch_size for batch) is pulled under the input lock, so units
// keep input order, and transformed on the pool. At most
// num_parallel_calls units are in flight, and at most twice that many are in
// flight or waiting to be consumed, which bounds memory. The slack keeps the
// threads busy while the consumer waits on a slow unit ahead of finished
// ones (images of different sizes), and a finished unit starts the next
// without waiting for the consumer. With deterministic, results come out in
// input order; without, in the order they finish.
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/exceptions.h"
#include "common/thread_pool.h"
#include "pipeline/batch_util.h"
#include "pipeline/definition_limits.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/sandbox.h"

namespace sluice {
namespace {

// A bulk read asks a source for at most this many rows at once, since the
// source allocates them all first.
constexpr int64_t kMaxBulkBatchRows = int64_t{1} << 20;

// What one pull takes from the input: the elements of one map call or one
// batch, or a batch that the input already stacked (its bulk path).
struct Unit {
  std::vector<Element> elements;
  bool stacked = false;
};
// Pulls the next unit from the input; *end when there is none.
using PullFn = std::function<absl::Status(IteratorBase* input, Unit* unit, bool* end)>;
// Transforms a pulled unit, which it may consume; the caller reuses it.
using TransformFn = std::function<absl::StatusOr<Element>(Unit& unit)>;

class SequentialIterator : public IteratorBase {
 public:
  SequentialIterator(std::unique_ptr<IteratorBase> input, PullFn pull, TransformFn transform)
      : input_(std::move(input)), pull_(std::move(pull)), transform_(std::move(transform)) {}
  absl::Status GetNext(Element* element, bool* end) override {
    if (absl::Status status = pull_(input_.get(), &unit_, end); !status.ok() || *end) return status;
    absl::StatusOr<Element> out = transform_(unit_);
    if (!out.ok()) return out.status();
    *element = *std::move(out);
    return absl::OkStatus();
  }
  // A unit is pulled and transformed within one call: only the input has
  // a position.
  absl::Status Save(proto::IteratorState* state) override { return SaveInput(*input_, state); }
  absl::Status Restore(const proto::IteratorState& state) override { return RestoreInput(*input_, state); }

 private:
  std::unique_ptr<IteratorBase> input_;
  const PullFn pull_;
  const TransformFn transform_;
  Unit unit_;  // reused, so its vector keeps its capacity
};

class ParallelIterator : public IteratorBase {
 public:
  ParallelIterator(std::unique_ptr<IteratorBase> input, std::string name, PullFn pull, TransformFn transform,
                   int parallelism, bool deterministic)
      : input_(std::move(input)),
        name_(std::move(name)),
        pull_(std::move(pull)),
        transform_(std::move(transform)),
        parallelism_(parallelism),
        deterministic_(deterministic),
        pool_(std::make_unique<ThreadPool>(parallelism)) {}

  ~ParallelIterator() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    mu_.Await(absl::Condition(
        +[](int* in_flight) { return *in_flight == 0; }, &in_flight_));
  }

  // Lets the units in flight finish (none starts meanwhile) and saves their
  // results, in order, with the input's position after them: a restored
  // iterator hands out those results first, so nothing is lost or repeated.
  absl::Status Save(proto::IteratorState* state) override {
    {
      absl::MutexLock lock(&mu_);
      saving_ = true;
      mu_.Await(absl::Condition(
          +[](int* in_flight) { return *in_flight == 0; }, &in_flight_));
      for (const std::shared_ptr<Slot>& slot : slots_) {
        proto::IteratorState* saved = state->add_inputs();
        SaveStatus(slot->status, saved);
        (*saved->mutable_ints())["end"] = slot->end ? 1 : 0;
        if (slot->status.ok() && !slot->end) SaveElement(slot->result, saved);
      }
      (*state->mutable_ints())["slots"] = static_cast<int64_t>(slots_.size());
      (*state->mutable_ints())["input_done"] = input_done_ ? 1 : 0;
    }
    absl::Status status;
    {
      // No unit runs now, so the input stands right after the saved ones.
      absl::MutexLock input_lock(&input_mu_);
      status = SaveInput(*input_, state);
    }
    absl::MutexLock lock(&mu_);
    saving_ = false;
    return status;
  }

  absl::Status Restore(const proto::IteratorState& state) override {
    absl::StatusOr<int64_t> slots = StateInt(state, "slots");
    absl::StatusOr<int64_t> input_done = StateInt(state, "input_done");
    if (!slots.ok()) return slots.status();
    if (!input_done.ok()) return input_done.status();
    if (*slots < 0 || state.inputs_size() != *slots + 1) return MalformedState("the slots do not match");
    {
      absl::MutexLock input_lock(&input_mu_);
      if (absl::Status s = RestoreInput(*input_, state, static_cast<int>(*slots)); !s.ok()) return s;
    }
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < *slots; ++i) {
      const proto::IteratorState& saved = state.inputs(i);
      auto slot = std::make_shared<Slot>();
      slot->done = true;
      absl::StatusOr<absl::Status> status = RestoreStatus(saved);
      absl::StatusOr<int64_t> end = StateInt(saved, "end");
      if (!status.ok()) return status.status();
      if (!end.ok()) return end.status();
      slot->end = *end != 0;
      slot->status = *status;
      if (slot->status.ok() && !slot->end) {
        absl::StatusOr<Element> element = RestoreElement(saved, 0);
        if (!element.ok()) return element.status();
        slot->result = *std::move(element);
      }
      slots_.push_back(std::move(slot));
    }
    input_done_ = *input_done != 0;
    return absl::OkStatus();
  }

  absl::Status GetNext(Element* element, bool* end) override {
    absl::MutexLock lock(&mu_);
    while (true) {
      ScheduleMore();
      mu_.Await(absl::Condition(this, &ParallelIterator::ConsumerCanProceed));
      std::shared_ptr<Slot> ready = TakeReadySlot();
      if (ready != nullptr) {
        // An error belongs to its unit; the next call goes on with the
        // next one, as the sequential iterator and tf.data do.
        if (!ready->status.ok()) return ready->status;
        if (ready->end) continue;  // the unit that found the end of input
        *element = std::move(ready->result);
        *end = false;
        return absl::OkStatus();
      }
      if (slots_.empty() && in_flight_ == 0 && input_done_) {
        *end = true;
        return absl::OkStatus();
      }
    }
  }

 private:
  struct Slot {
    bool done = false;
    bool end = false;
    absl::Status status;
    Element result;
  };

  // May throw (an allocation), leaving the slots as they were: a slot
  // without its Run would keep the consumer waiting for ever.
  void ScheduleMore() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!input_done_ && !cancelled_ && !saving_ && in_flight_ < parallelism_ &&
           static_cast<int>(slots_.size()) < kUnitsPerCall * parallelism_) {
      auto slot = std::make_shared<Slot>();
      slots_.push_back(slot);
      try {
        unassigned_.push_back(slot);
        try {
          pool_->Schedule([this] {
            ScopedPipelineSandbox scope(sandbox_);
            Run();
          });
        } catch (...) {
          unassigned_.pop_back();
          throw;
        }
      } catch (...) {
        slots_.pop_back();
        throw;
      }
      ++in_flight_;
    }
  }

  // Pulls and transforms one unit. The unit takes the oldest unassigned
  // slot while holding the input lock, so slot order is input order.
  void Run() {
    Unit unit;
    bool end = false;
    absl::Status status;
    std::shared_ptr<Slot> slot;
    {
      absl::MutexLock input_lock(&input_mu_);
      bool skip;
      {
        absl::MutexLock lock(&mu_);
        slot = unassigned_.front();
        unassigned_.pop_front();
        skip = cancelled_ || input_done_;
      }
      if (skip) {
        end = true;
      } else {
        // On a pool thread, where nothing else would catch what the input
        // or the function throws.
        status = CallContained(name_, [&] { return pull_(input_.get(), &unit, &end); });
        if (status.ok() && end) {
          absl::MutexLock lock(&mu_);
          input_done_ = true;
        }
      }
    }
    Element result;
    if (status.ok() && !end) {
      absl::StatusOr<Element> out = CallContained(name_, [&] { return transform_(unit); });
      if (out.ok()) {
        result = *std::move(out);
      } else {
        status = out.status();
      }
    }
    absl::MutexLock lock(&mu_);
    slot->done = true;
    slot->end = end;
    slot->status = status;
    slot->result = std::move(result);
    --in_flight_;
    try {
      ScheduleMore();
    } catch (...) {
      // Out of memory on a pool thread, where a throw would end the
      // process: the consumer's next GetNext schedules again, and there a
      // failure is its error.
    }
  }

  bool ConsumerCanProceed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Every unit in flight has a slot, so no slots means nothing to wait for.
    if (slots_.empty()) return true;
    if (deterministic_) return slots_.front()->done;
    for (const auto& slot : slots_) {
      if (slot->done) return true;
    }
    return false;
  }

  std::shared_ptr<Slot> TakeReadySlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if ((*it)->done) {
        std::shared_ptr<Slot> slot = *it;
        slots_.erase(it);
        return slot;
      }
      // Deterministic mode, and the first slot too when an error is
      // waiting, keep input order.
      if (deterministic_) break;
    }
    return nullptr;
  }

  // Units in flight or waiting, per parallel call.
  static constexpr int kUnitsPerCall = 2;

  absl::Mutex input_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<IteratorBase> input_ ABSL_GUARDED_BY(input_mu_);
  const std::string name_;  // the op's, for errors
  const PullFn pull_;
  const TransformFn transform_;
  const int parallelism_;
  const bool deterministic_;

  absl::Mutex mu_;
  std::deque<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);       // in input order
  std::deque<std::shared_ptr<Slot>> unassigned_ ABSL_GUARDED_BY(mu_);  // not yet pulled
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool saving_ ABSL_GUARDED_BY(mu_) = false;  // no unit starts while Save runs

  // Last, so that it is destroyed (and its threads joined) first.
  std::unique_ptr<ThreadPool> pool_;
  // The tenant's sandbox of the thread that made the iterator: the pool's
  // threads run the input under it.
  const std::shared_ptr<const PipelineSandbox> sandbox_ = ThreadPipelineSandbox();
};

// A dataset whose iterator is a Sequential- or ParallelIterator.
class PullTransformDataset : public DatasetBase {
 public:
  PullTransformDataset(DatasetPtr input, ElementSpec spec, std::string name, int64_t cardinality, PullFn pull,
                       TransformFn transform, int64_t num_parallel_calls, bool deterministic)
      : input_(std::move(input)),
        spec_(std::move(spec)),
        name_(std::move(name)),
        cardinality_(cardinality),
        pull_(std::move(pull)),
        transform_(std::move(transform)),
        num_parallel_calls_(num_parallel_calls),
        deterministic_(deterministic) {}

  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override { return cardinality_; }
  std::string DebugName() const override { return name_; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    absl::StatusOr<std::unique_ptr<IteratorBase>> input = input_->MakeIterator(context);
    if (!input.ok()) return input.status();
    if (num_parallel_calls_ == 0 || num_parallel_calls_ == 1) {
      return std::make_unique<SequentialIterator>(*std::move(input), pull_, transform_);
    }
    return std::make_unique<ParallelIterator>(*std::move(input), name_, pull_, transform_,
                                              ResolveParallelism(num_parallel_calls_), deterministic_);
  }

 private:
  const DatasetPtr input_;
  const ElementSpec spec_;
  const std::string name_;
  const int64_t cardinality_;
  const PullFn pull_;
  const TransformFn transform_;
  const int64_t num_parallel_calls_;
  const bool deterministic_;
};

}  // namespace

absl::Status CheckParallelCalls(int64_t num_parallel_calls, const char* op) {
  if (num_parallel_calls < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": num_parallel_calls must be >= 1, or -1 for autotune, got ", num_parallel_calls));
  }
  return absl::OkStatus();
}

namespace {

// Runs `functions` one after the other on each element, on
// num_parallel_calls threads.
absl::StatusOr<DatasetPtr> MapWithFunctions(DatasetPtr input,
                                            std::vector<std::shared_ptr<const ElementFunction>> functions,
                                            ElementSpec spec, std::string name, int64_t num_parallel_calls,
                                            bool deterministic) {
  PullFn pull = [](IteratorBase* in, Unit* unit, bool* end) {
    unit->elements.resize(1);
    return in->GetNext(&unit->elements[0], end);
  };
  // The functions run one after the other on the same thread, each on what
  // the one before gave up.
  TransformFn transform = [functions = std::move(functions)](Unit& unit) -> absl::StatusOr<Element> {
    Element element = std::move(unit.elements[0]);
    for (const std::shared_ptr<const ElementFunction>& function : functions) {
      absl::StatusOr<Element> out = function->CallOwned(std::move(element));
      if (!out.ok()) return out.status();
      element = *std::move(out);
    }
    return element;
  };
  const int64_t cardinality = input->Cardinality();
  return std::make_shared<PullTransformDataset>(std::move(input), std::move(spec), std::move(name),
                                                cardinality, std::move(pull), std::move(transform),
                                                num_parallel_calls, deterministic);
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeMapDataset(DatasetPtr input, const proto::MapOp& op) {
  return MakeFusedMapDataset(std::move(input), {op});
}

absl::StatusOr<DatasetPtr> MakeFusedMapDataset(DatasetPtr input, const std::vector<proto::MapOp>& ops) {
  if (ops.empty()) return absl::InvalidArgumentError("map: no function");
  const proto::MapOp& first = ops.front();
  if (absl::Status s = CheckParallelCalls(first.num_parallel_calls(), "map"); !s.ok()) return s;
  std::vector<std::shared_ptr<const ElementFunction>> functions;
  ElementSpec spec = input->element_spec();
  std::vector<std::string> names;
  for (const proto::MapOp& op : ops) {
    absl::StatusOr<std::unique_ptr<ElementFunction>> fn = FunctionRegistry::Global().Create(op.fn());
    if (!fn.ok()) return absl::Status(fn.status().code(), absl::StrCat("map: ", fn.status().message()));
    absl::StatusOr<ElementSpec> next_spec = (*fn)->OutputSpec(spec);
    if (!next_spec.ok())
      return absl::Status(next_spec.status().code(), absl::StrCat("map: ", next_spec.status().message()));
    spec = *std::move(next_spec);
    functions.push_back(*std::move(fn));
    names.push_back(op.fn().name());
  }
  return MapWithFunctions(std::move(input), std::move(functions), std::move(spec),
                          absl::StrCat("map(", absl::StrJoin(names, ", "), ")"), first.num_parallel_calls(),
                          first.deterministic());
}

absl::StatusOr<DatasetPtr> MakeFunctionMapDataset(DatasetPtr input,
                                                  std::shared_ptr<const ElementFunction> function,
                                                  ElementSpec spec, std::string name,
                                                  int64_t num_parallel_calls) {
  if (absl::Status s = CheckParallelCalls(num_parallel_calls, name.c_str()); !s.ok()) return s;
  return MapWithFunctions(std::move(input), {std::move(function)}, std::move(spec), std::move(name),
                          num_parallel_calls, /*deterministic=*/true);
}

absl::StatusOr<DatasetPtr> MakeBatchDataset(DatasetPtr input, const proto::BatchOp& op) {
  if (op.batch_size() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch: batch_size must be > 0, got ", op.batch_size()));
  }
  if (absl::Status s = CheckParallelCalls(op.num_parallel_calls(), "batch"); !s.ok()) return s;
  const int64_t batch_size = op.batch_size();
  const bool drop_remainder = op.drop_remainder();
  PullFn pull = [batch_size, drop_remainder](IteratorBase* in, Unit* unit, bool* end) {
    unit->elements.clear();
    unit->stacked = false;
    bool input_end = false;
    // A source's bulk read allocates all the rows it is asked for up front,
    // so a batch is read in chunks of at most kMaxBulkBatchRows rows (the
    // transform joins them): a huge batch_size over a short input costs
    // only what the input has.
    int64_t total = 0;
    absl::Status bulk;
    while (total < batch_size) {
      Element chunk;
      int64_t rows = 0;
      bulk = in->GetNextBatch(std::min(batch_size - total, kMaxBulkBatchRows), &chunk, &rows, &input_end);
      if (!bulk.ok() || rows == 0) break;
      total += rows;
      unit->elements.push_back(std::move(chunk));
      if (input_end) break;
    }
    if (bulk.ok()) {
      *end = total == 0 || (drop_remainder && total < batch_size);
      unit->stacked = true;
      return absl::OkStatus();
    }
    if (!absl::IsUnimplemented(bulk) || !unit->elements.empty()) return bulk;
    while (static_cast<int64_t>(unit->elements.size()) < batch_size) {
      Element element;
      if (absl::Status status = in->GetNext(&element, &input_end); !status.ok()) return status;
      if (input_end) break;
      unit->elements.push_back(std::move(element));
    }
    const auto rows_pulled = static_cast<int64_t>(unit->elements.size());
    *end = rows_pulled == 0 || (drop_remainder && rows_pulled < batch_size);
    return absl::OkStatus();
  };
  TransformFn transform = [](Unit& unit) -> absl::StatusOr<Element> {
    if (unit.stacked)
      return unit.elements.size() == 1 ? std::move(unit.elements[0]) : ConcatBatches(unit.elements);
    return StackElements(unit.elements);
  };
  const int64_t n = input->Cardinality();
  int64_t cardinality = n;
  if (n >= 0) cardinality = drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
  ElementSpec spec = BatchedSpec(input->element_spec(), drop_remainder ? batch_size : kUnknownDim);
  return std::make_shared<PullTransformDataset>(std::move(input), std::move(spec), "batch", cardinality,
                                                std::move(pull), std::move(transform),
                                                op.num_parallel_calls(), op.deterministic());
}

}  // namespace sluice
