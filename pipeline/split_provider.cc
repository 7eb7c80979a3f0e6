#include "pipeline/split_provider.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "pipeline/builder.h"
#include "pipeline/iterator_state.h"
#include "pipeline/random.h"

namespace sluice {

IndexSplitProvider::IndexSplitProvider(int64_t num_positions, int64_t positions_per_split,
                                       std::optional<uint64_t> shuffle_seed)
    : num_positions_(num_positions),
      positions_per_split_(std::max<int64_t>(1, positions_per_split)),
      shuffle_seed_(shuffle_seed) {
  MakeOrder();
}

void IndexSplitProvider::MakeOrder() {
  if (!shuffle_seed_.has_value()) return;
  const int64_t num_splits = (num_positions_ + positions_per_split_ - 1) / positions_per_split_;
  order_.resize(num_splits);
  std::iota(order_.begin(), order_.end(), 0);
  std::mt19937_64 rng(MixSeed(*shuffle_seed_, static_cast<uint64_t>(epoch_)));
  for (int64_t i = num_splits - 1; i > 0; --i) {
    std::swap(order_[i], order_[UniformBelow(rng, static_cast<uint64_t>(i) + 1)]);
  }
}

absl::Status IndexSplitProvider::GetNext(Split* split, bool* end_of_splits) {
  const int64_t num_splits = (num_positions_ + positions_per_split_ - 1) / positions_per_split_;
  if (next_split_ >= num_splits) {
    *end_of_splits = true;
    return absl::OkStatus();
  }
  const int64_t index = shuffle_seed_.has_value() ? order_[next_split_] : next_split_;
  ++next_split_;
  split->begin = index * positions_per_split_;
  split->end = std::min(num_positions_, split->begin + positions_per_split_);
  *end_of_splits = false;
  return absl::OkStatus();
}

absl::Status IndexSplitProvider::Reset() {
  next_split_ = 0;
  ++epoch_;
  MakeOrder();
  return absl::OkStatus();
}

std::string IndexSplitProvider::Save() const { return absl::StrCat(next_split_, ":", epoch_); }

absl::Status IndexSplitProvider::Restore(const std::string& state) {
  std::vector<std::string> parts = absl::StrSplit(state, ':');
  int64_t next = 0;
  int64_t epoch = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &next) || !absl::SimpleAtoi(parts[1], &epoch) ||
      next < 0 || epoch < 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed split provider state '", state, "'"));
  }
  next_split_ = next;
  epoch_ = epoch;
  MakeOrder();
  return absl::OkStatus();
}

RepeatSplitProvider::RepeatSplitProvider(std::unique_ptr<SplitProvider> input, int64_t count)
    : input_(std::move(input)), count_(count) {}

absl::Status RepeatSplitProvider::GetNext(Split* split, bool* end_of_splits) {
  while (count_ < 0 || repetition_ < count_) {
    bool end = false;
    if (absl::Status status = input_->GetNext(split, &end); !status.ok()) return status;
    if (!end) {
      repetition_empty_ = false;
      *end_of_splits = false;
      return absl::OkStatus();
    }
    // An empty input would otherwise repeat forever.
    if (repetition_empty_) break;
    ++repetition_;
    repetition_empty_ = true;
    if (absl::Status status = input_->Reset(); !status.ok()) return status;
  }
  *end_of_splits = true;
  return absl::OkStatus();
}

absl::Status RepeatSplitProvider::Reset() {
  repetition_ = 0;
  repetition_empty_ = true;
  return input_->Reset();
}

std::string RepeatSplitProvider::Save() const {
  return absl::StrCat(repetition_, ":", repetition_empty_ ? 1 : 0, "/", input_->Save());
}

absl::Status RepeatSplitProvider::Restore(const std::string& state) {
  const size_t slash = state.find('/');
  std::vector<std::string> own = absl::StrSplit(state.substr(0, slash), ':');
  int64_t repetition = 0;
  int empty = 0;
  if (slash == std::string::npos || own.size() != 2 || !absl::SimpleAtoi(own[0], &repetition) ||
      !absl::SimpleAtoi(own[1], &empty)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed repeat split state '", state, "'"));
  }
  repetition_ = repetition;
  repetition_empty_ = empty != 0;
  return input_->Restore(state.substr(slash + 1));
}

int64_t PositionsPerSplit(const proto::DatasetDef& def, bool per_file, const SplitOptions& options) {
  int64_t batch = 0;
  for (const proto::Step& step : def.steps()) {
    if (step.has_batch()) batch = step.batch().batch_size();
    if (step.has_padded_batch()) batch = step.padded_batch().batch_size();
    if (batch > 0) break;
  }
  // Record files (tfrecord, text_line, ...) hold many elements each: a
  // split of B of them would be B shards (CheckExactlyOnce refuses a batch
  // over them).
  const bool one_element_per_file = def.steps(0).has_image_folder() || def.steps(0).has_list_files();
  if (!options.batch_aligned || batch <= 0 || (per_file && !one_element_per_file)) {
    return per_file ? 1 : options.elements_per_split;
  }
  if (per_file) return batch;
  return std::max(batch, options.elements_per_split / batch * batch);
}

std::string UnsplittableStep(const proto::DatasetDef& def) {
  for (int i = 1; i < def.steps_size(); ++i) {
    const proto::Step& step = def.steps(i);
    if (step.has_concatenate()) {
      return absl::StrCat("step ", i + 1, " (concatenate) would read its whole pipeline on every worker");
    }
    if (step.has_scan()) {
      return absl::StrCat("step ", i + 1, " (scan) would start its state again on every worker");
    }
    if (step.has_cache()) {
      return absl::StrCat("step ", i + 1,
                          " (cache) would keep one worker's splits of one epoch and serve them as the next");
    }
    if (step.has_take_while()) {
      return absl::StrCat("step ", i + 1,
                          " (take_while) would stop each worker at its own first refused element");
    }
    if (step.has_unique()) {
      return absl::StrCat("step ", i + 1, " (unique) would drop repeats only within each worker's elements");
    }
  }
  return "";
}

absl::StatusOr<std::unique_ptr<SplitProvider>> MakeSplitProvider(const proto::DatasetDef& def,
                                                                 const SplitOptions& options) {
  if (def.steps().empty()) return absl::InvalidArgumentError("the pipeline has no steps");
  absl::StatusOr<SourceSplitInfo> info = DescribeSourceSplits(def.steps(0));
  if (!info.ok()) return info.status();
  if (std::string why = UnsplittableStep(def); !why.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the pipeline cannot be split for distributed_epoch: ", why));
  }
  return MakeSplitProvider(def, options, *info);
}

std::unique_ptr<SplitProvider> MakeSplitProvider(const proto::DatasetDef& def, const SplitOptions& options,
                                                 const SourceSplitInfo& info_in) {
  const SourceSplitInfo* info = &info_in;
  const int64_t per_split = PositionsPerSplit(def, info->per_file, options);
  std::optional<uint64_t> shuffle_seed = info->shuffle_seed;
  if (shuffle_seed.has_value() && options.batch_aligned) {
    shuffle_seed = MixSeed(*shuffle_seed, static_cast<uint64_t>(options.repetition));
  }
  std::unique_ptr<SplitProvider> provider =
      std::make_unique<IndexSplitProvider>(info->num_positions, per_split, shuffle_seed);
  for (int i = 1; i < def.steps_size(); ++i) {
    if (def.steps(i).has_repeat()) {
      provider = std::make_unique<RepeatSplitProvider>(std::move(provider), def.steps(i).repeat().count());
    }
  }
  return provider;
}

absl::Status SourcePositions::Save(proto::IteratorState* state) const {
  if (provider_ != nullptr) return CannotSave();
  (*state->mutable_ints())["next"] = next_;
  return absl::OkStatus();
}

absl::Status SourcePositions::Restore(const proto::IteratorState& state) {
  if (provider_ != nullptr) return CannotSave();
  absl::StatusOr<int64_t> next = StateInt(state, "next");
  if (!next.ok()) return next.status();
  if (*next < 0 || *next > count_) {
    return MalformedState(absl::StrCat("position ", *next, " is out of range for a source of ", count_));
  }
  next_ = *next;
  return absl::OkStatus();
}

absl::Status SourcePositions::Next(int64_t* position, bool* end) {
  int64_t count = 0;
  return NextRun(1, position, &count, end);
}

absl::Status SourcePositions::NextRun(int64_t max, int64_t* begin, int64_t* count, bool* end) {
  while (next_ >= limit_) {
    if (provider_ == nullptr) {
      *end = true;
      return absl::OkStatus();
    }
    Split split;
    bool no_more = false;
    if (absl::Status status = provider_->GetNext(&split, &no_more); !status.ok()) return status;
    if (no_more) {
      *end = true;
      return absl::OkStatus();
    }
    if (split.begin < 0 || split.end > count_ || split.begin > split.end) {
      return absl::InvalidArgumentError(absl::StrCat("split [", split.begin, ", ", split.end,
                                                     ") is out of range for a source of ", count_,
                                                     " positions"));
    }
    next_ = split.begin;
    limit_ = split.end;
  }
  *begin = next_;
  *count = std::min(max, limit_ - next_);
  next_ += *count;
  *end = false;
  return absl::OkStatus();
}

}  // namespace sluice
