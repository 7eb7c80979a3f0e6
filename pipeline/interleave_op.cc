// interleave: cycles over up to cycle_length sub-pipelines, one per input
// element, taking block_length elements from each in turn, in tf.data's
// order; with num_parallel_calls each sub-pipeline reads ahead on a
// background thread. flat_map is the same with cycle_length 1.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/definition_limits.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"

namespace sluice {
namespace {

// A parallel interleave reads each sub-pipeline up to two blocks ahead, but
// no more than twice this many elements (a block_length near 2^63 doubled
// overflowed into a buffer that never had room: a hang).
constexpr int64_t kMaxBlockAhead = int64_t{1} << 12;

// Interleave: cycles over up to cycle_length sub-iterators, taking
// block_length elements from each in turn, in tf.data's order.
class InterleaveDataset : public DatasetBase {
 public:
  InterleaveDataset(std::string name, DatasetPtr input, ElementSpec spec, SubDatasetFactory factory,
                    int64_t cycle_length, int64_t block_length, int64_t num_parallel_calls)
      : name_(std::move(name)),
        input_(std::move(input)),
        spec_(std::move(spec)),
        factory_(std::move(factory)),
        cycle_length_(cycle_length),
        block_length_(block_length),
        num_parallel_calls_(num_parallel_calls) {}

  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override { return input_->Cardinality() == 0 ? 0 : kUnknownCardinality; }
  std::string DebugName() const override { return name_; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    absl::StatusOr<std::unique_ptr<IteratorBase>> input = input_->MakeIterator(context);
    if (!input.ok()) return input.status();
    return std::make_unique<Iterator>(this, *std::move(input));
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const InterleaveDataset* dataset, std::unique_ptr<IteratorBase> input)
        : dataset_(dataset), input_(std::move(input)), cycle_(dataset->cycle_length_) {}

    absl::Status GetNext(Element* element, bool* end) override {
      while (true) {
        auto& current = cycle_[cycle_index_];
        if (current == nullptr && !input_done_) {
          if (absl::Status status = OpenNext(&current); !status.ok()) return status;
        }
        if (current != nullptr) {
          bool sub_end = false;
          if (absl::Status status = current->GetNext(element, &sub_end); !status.ok()) return status;
          if (!sub_end) {
            if (++block_index_ == dataset_->block_length_) Advance();
            *end = false;
            return absl::OkStatus();
          }
          current.reset();
          sub_datasets_[cycle_index_].reset();
          --open_;
        }
        if (input_done_ && open_ == 0) {
          *end = true;
          return absl::OkStatus();
        }
        Advance();
      }
    }

    // Per cycle slot: the input element that opened it and its
    // sub-iterator's state; then the position in the cycle and the input's.
    absl::Status Save(proto::IteratorState* state) override {
      for (size_t i = 0; i < cycle_.size(); ++i) {
        proto::IteratorState* slot = state->add_inputs();
        (*slot->mutable_ints())["open"] = cycle_[i] != nullptr ? 1 : 0;
        if (cycle_[i] == nullptr) continue;
        SaveElement(slot_inputs_[i], slot);
        if (absl::Status s = SaveInput(*cycle_[i], slot); !s.ok()) return s;
      }
      (*state->mutable_ints())["cycle_index"] = static_cast<int64_t>(cycle_index_);
      (*state->mutable_ints())["block_index"] = block_index_;
      (*state->mutable_ints())["input_done"] = input_done_ ? 1 : 0;
      return SaveInput(*input_, state);
    }

    absl::Status Restore(const proto::IteratorState& state) override {
      const int slots = static_cast<int>(cycle_.size());
      absl::StatusOr<int64_t> cycle_index = StateInt(state, "cycle_index");
      absl::StatusOr<int64_t> block_index = StateInt(state, "block_index");
      absl::StatusOr<int64_t> input_done = StateInt(state, "input_done");
      if (!cycle_index.ok()) return cycle_index.status();
      if (!block_index.ok()) return block_index.status();
      if (!input_done.ok()) return input_done.status();
      if (state.inputs_size() != slots + 1 || *cycle_index < 0 || *cycle_index >= slots) {
        return MalformedState("the interleave's cycle does not match");
      }
      for (int i = 0; i < slots; ++i) {
        const proto::IteratorState& slot = state.inputs(i);
        absl::StatusOr<int64_t> open = StateInt(slot, "open");
        if (!open.ok()) return open.status();
        if (*open == 0) continue;
        absl::StatusOr<Element> input = RestoreElement(slot, 0);
        if (!input.ok()) return input.status();
        cycle_index_ = static_cast<size_t>(i);
        if (absl::Status s = OpenFrom(*std::move(input), &cycle_[i], /*restoring=*/true); !s.ok()) return s;
        if (absl::Status s = RestoreInput(*cycle_[i], slot); !s.ok()) return s;
      }
      cycle_index_ = static_cast<size_t>(*cycle_index);
      block_index_ = *block_index;
      input_done_ = *input_done != 0;
      return RestoreInput(*input_, state, slots);
    }

   private:
    void Advance() {
      block_index_ = 0;
      cycle_index_ = (cycle_index_ + 1) % cycle_.size();
    }

    absl::Status OpenNext(std::unique_ptr<IteratorBase>* slot) {
      Element input;
      bool input_end = false;
      if (absl::Status status = input_->GetNext(&input, &input_end); !status.ok()) return status;
      if (input_end) {
        input_done_ = true;
        return absl::OkStatus();
      }
      return OpenFrom(std::move(input), slot, /*restoring=*/false);
    }

    // Opens the current cycle slot's sub-pipeline for `input`. A restored
    // one's background reader starts at its first read, after its Restore.
    absl::Status OpenFrom(Element input, std::unique_ptr<IteratorBase>* slot, bool restoring) {
      absl::StatusOr<DatasetPtr> sub = dataset_->factory_(input);
      if (!sub.ok()) return sub.status();
      // The iterator points into its dataset, which must live as long.
      sub_datasets_[cycle_index_] = *sub;
      // Sub-pipelines read whole inputs: splits belong to the outer source.
      absl::StatusOr<std::unique_ptr<IteratorBase>> it = (*sub)->MakeIterator(IteratorContext{});
      if (!it.ok()) return it.status();
      *slot =
          dataset_->num_parallel_calls_ > 1 || dataset_->num_parallel_calls_ == -1
              ? MakeBackgroundIterator(*std::move(it), 2 * std::min(dataset_->block_length_, kMaxBlockAhead),
                                       /*start_at_first_read=*/restoring)
              : *std::move(it);
      slot_inputs_[cycle_index_] = std::move(input);
      ++open_;
      return absl::OkStatus();
    }

    const InterleaveDataset* const dataset_;
    std::unique_ptr<IteratorBase> input_;
    std::vector<DatasetPtr> sub_datasets_ = std::vector<DatasetPtr>(dataset_->cycle_length_);
    std::vector<std::unique_ptr<IteratorBase>> cycle_;
    std::vector<Element> slot_inputs_ = std::vector<Element>(dataset_->cycle_length_);  // for Save
    size_t cycle_index_ = 0;
    int64_t block_index_ = 0;
    int64_t open_ = 0;
    bool input_done_ = false;
  };

  const std::string name_;
  const DatasetPtr input_;
  const ElementSpec spec_;
  const SubDatasetFactory factory_;
  const int64_t cycle_length_;
  const int64_t block_length_;
  const int64_t num_parallel_calls_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeInterleaveDataset(DatasetPtr input, const proto::InterleaveOp& op,
                                                 SubDatasetFactory make_sub_dataset, ElementSpec sub_spec) {
  if (op.cycle_length() > kMaxCycleLength) {
    return absl::InvalidArgumentError(absl::StrCat("interleave: cycle_length must be at most ",
                                                   kMaxCycleLength, " (sub-pipelines open at once), got ",
                                                   op.cycle_length()));
  }
  if (op.cycle_length() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("interleave: cycle_length must be > 0, got ", op.cycle_length()));
  }
  if (op.block_length() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("interleave: block_length must be > 0, got ", op.block_length()));
  }
  if (absl::Status s = CheckParallelCalls(op.num_parallel_calls(), "interleave"); !s.ok()) return s;
  return std::make_shared<InterleaveDataset>("interleave", std::move(input), std::move(sub_spec),
                                             std::move(make_sub_dataset), op.cycle_length(),
                                             op.block_length(), op.num_parallel_calls());
}

absl::StatusOr<DatasetPtr> MakeFlatMapDataset(DatasetPtr input, SubDatasetFactory make_sub_dataset,
                                              ElementSpec sub_spec) {
  return std::make_shared<InterleaveDataset>("flat_map", std::move(input), std::move(sub_spec),
                                             std::move(make_sub_dataset), /*cycle_length=*/1,
                                             /*block_length=*/1, /*num_parallel_calls=*/0);
}

}  // namespace sluice
