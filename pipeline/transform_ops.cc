// Element-order transforms that run on the caller's thread. Prefetch,
// which runs its input on a background thread, is in prefetch_op.cc; the
// transforms that regroup batch rows are in batching_ops.cc.
#include <atomic>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/random.h"
#include "pipeline/sharding.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

using internal::MakeUnaryIterator;
using internal::RequirePositive;
using internal::UnaryDataset;
using internal::UnaryIterator;

// filter, and take_while (which ends at the first element its predicate
// refuses): both call a predicate of one bool scalar on each element.
class FilterDataset : public UnaryDataset {
 public:
  enum class Mode { kFilter, kTakeWhile };
  FilterDataset(DatasetPtr input, std::unique_ptr<ElementFunction> predicate, std::string name, Mode mode)
      : UnaryDataset(input, input->element_spec(), std::move(name)),
        predicate_(std::move(predicate)),
        mode_(mode) {}
  int64_t Cardinality() const override {
    return input()->Cardinality() == kInfiniteCardinality && mode_ == Mode::kFilter ? kInfiniteCardinality
                                                                                    : kUnknownCardinality;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const FilterDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset) {}
    absl::Status GetNext(Element* element, bool* end) override {
      while (true) {
        if (taken_all_) {
          *end = true;
          return absl::OkStatus();
        }
        if (absl::Status status = input_->GetNext(element, end); !status.ok() || *end) return status;
        absl::StatusOr<Element> keep = dataset_->predicate_->Call(*element);
        if (!keep.ok()) return keep.status();
        if (keep->size() != 1 || keep->components[0].dtype() != DType::kBool ||
            keep->components[0].num_elements() != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(dataset_->OpName(), ": the predicate must return one bool scalar"));
        }
        if (keep->components[0].data<bool>()[0]) return absl::OkStatus();
        taken_all_ = dataset_->mode_ == Mode::kTakeWhile;
      }
    }
    absl::Status Save(proto::IteratorState* state) override {
      if (dataset_->mode_ == Mode::kTakeWhile) (*state->mutable_ints())["taken_all"] = taken_all_ ? 1 : 0;
      return SaveInput(*input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      if (dataset_->mode_ == Mode::kTakeWhile) {
        absl::StatusOr<int64_t> taken_all = StateInt(state, "taken_all");
        if (!taken_all.ok()) return taken_all.status();
        taken_all_ = *taken_all != 0;
      }
      return RestoreInput(*input_, state);
    }

   private:
    const FilterDataset* const dataset_;
    bool taken_all_ = false;  // take_while has seen its first refused element
  };

  const char* OpName() const { return mode_ == Mode::kFilter ? "filter" : "take_while"; }

  const std::unique_ptr<ElementFunction> predicate_;
  const Mode mode_;
};

class TakeDataset : public UnaryDataset {
 public:
  TakeDataset(DatasetPtr input, int64_t count)
      : UnaryDataset(input, input->element_spec(), "take"), count_(count) {}
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    if (count_ < 0) return n;
    if (n == kInfiniteCardinality) return count_;
    if (n == kUnknownCardinality) return kUnknownCardinality;
    return std::min(n, count_);
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const TakeDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), remaining_(dataset->count_) {}
    absl::Status GetNext(Element* element, bool* end) override {
      if (remaining_ == 0) {
        *end = true;
        return absl::OkStatus();
      }
      absl::Status status = input_->GetNext(element, end);
      if (status.ok() && !*end && remaining_ > 0) --remaining_;
      return status;
    }
    absl::Status Save(proto::IteratorState* state) override {
      return SaveCounter(*input_, "remaining", remaining_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      return RestoreCounter(*input_, "remaining", &remaining_, state);
    }

   private:
    int64_t remaining_;  // negative: unlimited
  };

  const int64_t count_;
};

class SkipDataset : public UnaryDataset {
 public:
  SkipDataset(DatasetPtr input, int64_t count)
      : UnaryDataset(input, input->element_spec(), "skip"), count_(count) {}
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    if (n < 0) return n;  // as tf.data: skipping from an infinite input leaves it infinite
    return count_ < 0 ? 0 : std::max<int64_t>(0, n - count_);
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const SkipDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), to_skip_(dataset->count_) {}
    absl::Status GetNext(Element* element, bool* end) override {
      while (to_skip_ != 0) {  // negative skips everything
        if (absl::Status status = input_->GetNext(element, end); !status.ok() || *end) return status;
        if (to_skip_ > 0) --to_skip_;
      }
      return input_->GetNext(element, end);
    }
    absl::Status Save(proto::IteratorState* state) override {
      return SaveCounter(*input_, "to_skip", to_skip_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      return RestoreCounter(*input_, "to_skip", &to_skip_, state);
    }

   private:
    int64_t to_skip_;
  };

  const int64_t count_;
};

class RepeatDataset : public UnaryDataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count)
      : UnaryDataset(input, input->element_spec(), "repeat"), count_(count) {}
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    if (count_ == 0 || n == 0) return 0;
    if (count_ < 0) return n == kUnknownCardinality ? kUnknownCardinality : kInfiniteCardinality;
    if (n < 0) return n;
    return n * count_;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return std::make_unique<Iterator>(this, context);
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const RepeatDataset* dataset, IteratorContext context) : dataset_(dataset), context_(context) {}
    absl::Status GetNext(Element* element, bool* end) override {
      while (dataset_->count_ < 0 || repetition_ < dataset_->count_) {
        if (input_ == nullptr) {
          absl::StatusOr<std::unique_ptr<IteratorBase>> input = dataset_->input()->MakeIterator(context_);
          if (!input.ok()) return input.status();
          input_ = *std::move(input);
          epoch_empty_ = true;
        }
        if (absl::Status status = input_->GetNext(element, end); !status.ok()) return status;
        if (!*end) {
          epoch_empty_ = false;
          return absl::OkStatus();
        }
        input_.reset();
        ++repetition_;
        // An empty epoch would repeat forever, as in tf.data it ends instead.
        if (epoch_empty_) break;
      }
      *end = true;
      return absl::OkStatus();
    }
    // The repetition, and the current one's input if it has started.
    absl::Status Save(proto::IteratorState* state) override {
      (*state->mutable_ints())["repetition"] = repetition_;
      (*state->mutable_ints())["epoch_empty"] = epoch_empty_ ? 1 : 0;
      return input_ == nullptr ? absl::OkStatus() : SaveInput(*input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<int64_t> repetition = StateInt(state, "repetition");
      absl::StatusOr<int64_t> epoch_empty = StateInt(state, "epoch_empty");
      if (!repetition.ok()) return repetition.status();
      if (!epoch_empty.ok()) return epoch_empty.status();
      repetition_ = *repetition;
      epoch_empty_ = *epoch_empty != 0;
      input_.reset();
      if (state.inputs_size() == 0) return absl::OkStatus();
      absl::StatusOr<std::unique_ptr<IteratorBase>> input = dataset_->input()->MakeIterator(context_);
      if (!input.ok()) return input.status();
      input_ = *std::move(input);
      return RestoreInput(*input_, state);
    }

   private:
    const RepeatDataset* const dataset_;
    const IteratorContext context_;
    std::unique_ptr<IteratorBase> input_;
    int64_t repetition_ = 0;
    bool epoch_empty_ = true;
  };

  const int64_t count_;
};

class ShardDataset : public UnaryDataset {
 public:
  ShardDataset(DatasetPtr input, int64_t num_shards, int64_t index)
      : UnaryDataset(input, input->element_spec(), "shard"), num_shards_(num_shards), index_(index) {}
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    if (n < 0) return n;
    return n / num_shards_ + (index_ < n % num_shards_ ? 1 : 0);
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const ShardDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset) {}
    absl::Status GetNext(Element* element, bool* end) override {
      while (true) {
        if (absl::Status status = input_->GetNext(element, end); !status.ok() || *end) return status;
        if (position_++ % dataset_->num_shards_ == dataset_->index_) return absl::OkStatus();
      }
    }
    absl::Status Save(proto::IteratorState* state) override {
      return SaveCounter(*input_, "position", position_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      return RestoreCounter(*input_, "position", &position_, state);
    }

   private:
    const ShardDataset* const dataset_;
    int64_t position_ = 0;
  };

  const int64_t num_shards_, index_;
};

class EnumerateDataset : public UnaryDataset {
 public:
  EnumerateDataset(DatasetPtr input, ElementSpec spec, int64_t start)
      : UnaryDataset(input, std::move(spec), "enumerate"), start_(start) {
    if (!element_spec().names.empty()) names_ = MakeNames(element_spec().names);
  }
  int64_t Cardinality() const override { return input()->Cardinality(); }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const EnumerateDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset), next_(dataset->start_) {}
    absl::Status GetNext(Element* element, bool* end) override {
      Element input;
      if (absl::Status status = input_->GetNext(&input, end); !status.ok() || *end) return status;
      Element out;
      out.names = dataset_->names_;
      out.components.reserve(input.size() + 1);
      out.components.push_back(Tensor::Scalar<int64_t>(next_++));
      for (Tensor& t : input.components) out.components.push_back(std::move(t));
      *element = std::move(out);
      return absl::OkStatus();
    }
    absl::Status Save(proto::IteratorState* state) override {
      return SaveCounter(*input_, "next", next_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      return RestoreCounter(*input_, "next", &next_, state);
    }

   private:
    const EnumerateDataset* const dataset_;
    int64_t next_;
  };

  const int64_t start_;
  ComponentNames names_;
};

class ShuffleDataset : public UnaryDataset {
 public:
  ShuffleDataset(DatasetPtr input, int64_t buffer_size, std::optional<int64_t> seed, bool reshuffle)
      : UnaryDataset(input, input->element_spec(), "shuffle"),
        buffer_size_(buffer_size),
        seed_(seed),
        reshuffle_(reshuffle),
        fixed_random_seed_(RandomSeed()) {}
  int64_t Cardinality() const override { return input()->Cardinality(); }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  // Each iterator (each epoch, under repeat) draws from its own stream: a
  // fixed one without reshuffling, a new one per iterator with it.
  uint64_t NextSeed() const {
    const uint64_t base = seed_.has_value() ? static_cast<uint64_t>(*seed_) : fixed_random_seed_;
    const uint64_t iteration = reshuffle_ ? iterations_.fetch_add(1) : 0;
    return MixSeed(base, iteration);
  }

  class Iterator : public UnaryIterator {
   public:
    Iterator(const ShuffleDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset), rng_(dataset->NextSeed()) {}
    absl::Status GetNext(Element* element, bool* end) override {
      while (!input_done_ && static_cast<int64_t>(buffer_.size()) < dataset_->buffer_size_) {
        Element next;
        bool input_end = false;
        if (absl::Status status = input_->GetNext(&next, &input_end); !status.ok()) return status;
        if (input_end) {
          input_done_ = true;
          break;
        }
        buffer_.push_back(std::move(next));
      }
      if (buffer_.empty()) {
        *end = true;
        return absl::OkStatus();
      }
      const size_t pick = UniformBelow(rng_, buffer_.size());
      *element = std::move(buffer_[pick]);
      buffer_[pick] = std::move(buffer_.back());
      buffer_.pop_back();
      *end = false;
      return absl::OkStatus();
    }
    // The buffer, the generator, and how many iterators the dataset has
    // made (the next epoch's seed under repeat).
    absl::Status Save(proto::IteratorState* state) override {
      std::ostringstream rng;
      rng << rng_;
      (*state->mutable_blobs())["rng"] = rng.str();
      (*state->mutable_ints())["input_done"] = input_done_ ? 1 : 0;
      (*state->mutable_ints())["iterations"] = static_cast<int64_t>(dataset_->iterations_.load());
      for (const Element& e : buffer_) SaveElement(e, state);
      return SaveInput(*input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<int64_t> input_done = StateInt(state, "input_done");
      absl::StatusOr<int64_t> iterations = StateInt(state, "iterations");
      if (!input_done.ok()) return input_done.status();
      if (!iterations.ok()) return iterations.status();
      auto rng = state.blobs().find("rng");
      if (rng == state.blobs().end()) return MalformedState("the shuffle's generator is missing");
      std::istringstream in(rng->second);
      in >> rng_;
      if (in.fail()) return MalformedState("the shuffle's generator does not parse");
      absl::StatusOr<std::vector<Element>> elements = RestoreElements(state);
      if (!elements.ok()) return elements.status();
      buffer_ = *std::move(elements);
      input_done_ = *input_done != 0;
      dataset_->iterations_.store(static_cast<uint64_t>(*iterations));
      return RestoreInput(*input_, state);
    }

   private:
    const ShuffleDataset* const dataset_;
    std::mt19937_64 rng_;
    std::vector<Element> buffer_;
    bool input_done_ = false;
  };

  const int64_t buffer_size_;
  const std::optional<int64_t> seed_;
  const bool reshuffle_;
  const uint64_t fixed_random_seed_;
  mutable std::atomic<uint64_t> iterations_{0};
};

}  // namespace

namespace {

absl::StatusOr<DatasetPtr> MakePredicateDataset(DatasetPtr input, const proto::FunctionDef& def,
                                                const char* op, FilterDataset::Mode mode) {
  absl::StatusOr<std::unique_ptr<ElementFunction>> fn = FunctionRegistry::Global().Create(def);
  if (!fn.ok()) return absl::Status(fn.status().code(), absl::StrCat(op, ": ", fn.status().message()));
  absl::StatusOr<ElementSpec> out = (*fn)->OutputSpec(input->element_spec());
  if (!out.ok()) return absl::Status(out.status().code(), absl::StrCat(op, ": ", out.status().message()));
  // No components: a function whose output is known only when it runs (a
  // Python one); each call's is checked then.
  if (!out->components.empty() &&
      (out->components.size() != 1 || out->components[0].dtype != DType::kBool ||
       !(out->components[0].shape.unknown_rank || out->components[0].shape.dims.empty()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": predicate '", def.name(), "' must return one bool scalar, but returns ", out->DebugString()));
  }
  return std::make_shared<FilterDataset>(std::move(input), *std::move(fn),
                                         absl::StrCat(op, "(", def.name(), ")"), mode);
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeFilterDataset(DatasetPtr input, const proto::FilterOp& op) {
  return MakePredicateDataset(std::move(input), op.fn(), "filter", FilterDataset::Mode::kFilter);
}

absl::StatusOr<DatasetPtr> MakeTakeWhileDataset(DatasetPtr input, const proto::TakeWhileOp& op) {
  return MakePredicateDataset(std::move(input), op.predicate(), "take_while",
                              FilterDataset::Mode::kTakeWhile);
}

absl::StatusOr<DatasetPtr> MakeTakeDataset(DatasetPtr input, const proto::TakeOp& op) {
  return std::make_shared<TakeDataset>(std::move(input), op.count());
}

absl::StatusOr<DatasetPtr> MakeSkipDataset(DatasetPtr input, const proto::SkipOp& op) {
  return std::make_shared<SkipDataset>(std::move(input), op.count());
}

absl::StatusOr<DatasetPtr> MakeRepeatDataset(DatasetPtr input, const proto::RepeatOp& op) {
  if (op.count() < -1) return absl::InvalidArgumentError("repeat: count must be >= -1 (-1 repeats forever)");
  return std::make_shared<RepeatDataset>(std::move(input), op.count());
}

absl::StatusOr<DatasetPtr> MakeShardDataset(DatasetPtr input, const proto::ShardOp& op) {
  // SHARD_HINT (-1, -1): a placeholder the service's HINT policy fills in;
  // run as it is, it keeps every element.
  if (op.num_shards() == kShardHint && op.index() == kShardHint) return input;
  if (absl::Status s = RequirePositive(op.num_shards(), "shard", "num_shards"); !s.ok()) return s;
  if (op.index() < 0 || op.index() >= op.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard: index must be in [0, ", op.num_shards(), "), got ", op.index()));
  }
  return std::make_shared<ShardDataset>(std::move(input), op.num_shards(), op.index());
}

absl::StatusOr<DatasetPtr> MakeEnumerateDataset(DatasetPtr input, const proto::EnumerateOp& op) {
  ElementSpec spec;
  spec.components.push_back({PartialShape::Known({}), DType::kInt64});
  const ElementSpec& in = input->element_spec();
  spec.components.insert(spec.components.end(), in.components.begin(), in.components.end());
  if (!in.names.empty()) {
    spec.names.push_back("index");
    spec.names.insert(spec.names.end(), in.names.begin(), in.names.end());
  }
  return std::make_shared<EnumerateDataset>(std::move(input), std::move(spec), op.start());
}

absl::StatusOr<DatasetPtr> MakeShuffleDataset(DatasetPtr input, const proto::ShuffleOp& op) {
  if (absl::Status s = RequirePositive(op.buffer_size(), "shuffle", "buffer_size"); !s.ok()) return s;
  std::optional<int64_t> seed;
  if (op.has_seed()) seed = op.seed();
  return std::make_shared<ShuffleDataset>(std::move(input), op.buffer_size(), seed,
                                          op.reshuffle_each_iteration());
}

}  // namespace sluice
