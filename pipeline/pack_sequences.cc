// pack_sequences: variable-length token vectors packed into rows of
// `length` tokens, as T5 and Grain pack for language-model training. Each
// row carries three components: `tokens` (padded with padding_value),
// `segment_ids` (1, 2, ... per sequence in the row, 0 on padding) and
// `positions` (0, 1, ... within each sequence, 0 on padding), so that
// attention can be masked per sequence.
//
// Up to num_bins rows are open at once. Each sequence goes to the first
// open row it fits in (first_fit) or to the one it fills best (best_fit,
// the first of equals); when none has room and num_bins are open, the
// fullest is emitted (the oldest of equals) to make room. A sequence
// longer than `length` is cut into pieces of `length` tokens, each its own
// segment with positions from 0, so no token is lost. At the input's end
// the open rows follow, oldest first. The output is a function of the
// input alone, and a checkpoint holds the open rows.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

using internal::MakeUnaryIterator;
using internal::RequirePositive;
using internal::UnaryDataset;
using internal::UnaryIterator;

constexpr int64_t kDefaultBins = 8;
// A row's length, and the bins open at once, past which memory is the
// limit rather than the packing.
constexpr int64_t kMaxLength = int64_t{1} << 24;
constexpr int64_t kMaxBins = 4096;

struct Bin {
  std::vector<int64_t> tokens;
  std::vector<int64_t> segment_lengths;
};

class PackSequencesDataset : public UnaryDataset {
 public:
  PackSequencesDataset(DatasetPtr input, ElementSpec spec, const proto::PackSequencesOp& op, DType dtype)
      : UnaryDataset(std::move(input), std::move(spec), "pack_sequences"),
        length_(op.length()),
        best_fit_(op.method() == "best_fit"),
        component_(static_cast<int>(op.component())),
        padding_value_(op.padding_value()),
        num_bins_(op.num_bins() == 0 ? kDefaultBins : op.num_bins()),
        dtype_(dtype),
        names_(MakeNames({"tokens", "segment_ids", "positions"})) {}
  int64_t Cardinality() const override { return kUnknownCardinality; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const PackSequencesDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset) {}

    absl::Status GetNext(Element* element, bool* end) override {
      while (ready_.empty() && !input_ended_) {
        Element next;
        bool input_end = false;
        if (absl::Status s = input_->GetNext(&next, &input_end); !s.ok()) return s;
        if (input_end) {
          input_ended_ = true;
          for (Bin& bin : bins_) ready_.push_back(dataset_->Row(bin));
          bins_.clear();
          break;
        }
        if (absl::Status s = Add(next.components[dataset_->component_]); !s.ok()) return s;
      }
      *end = ready_.empty();
      if (*end) return absl::OkStatus();
      *element = std::move(ready_.front());
      ready_.pop_front();
      return absl::OkStatus();
    }

    // The rows ready, the open bins (tokens and segment lengths), and the
    // input's state.
    absl::Status Save(proto::IteratorState* state) override {
      (*state->mutable_ints())["ready"] = static_cast<int64_t>(ready_.size());
      (*state->mutable_ints())["bins"] = static_cast<int64_t>(bins_.size());
      (*state->mutable_ints())["input_ended"] = input_ended_ ? 1 : 0;
      for (const Element& row : ready_) SaveElement(row, state);
      for (const Bin& bin : bins_) {
        SaveElement(Element({Tensor::FromVector(bin.tokens), Tensor::FromVector(bin.segment_lengths)}),
                    state);
      }
      return SaveInput(*input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<int64_t> ready = StateInt(state, "ready");
      absl::StatusOr<int64_t> bins = StateInt(state, "bins");
      absl::StatusOr<int64_t> ended = StateInt(state, "input_ended");
      if (!ready.ok() || !bins.ok() || !ended.ok())
        return MalformedState("pack_sequences: a count is missing");
      absl::StatusOr<std::vector<Element>> elements = RestoreElements(state);
      if (!elements.ok()) return elements.status();
      if (*ready < 0 || *bins < 0 || *bins > dataset_->num_bins_ ||
          static_cast<int64_t>(elements->size()) != *ready + *bins) {
        return MalformedState("pack_sequences: the rows and bins do not match their counts");
      }
      for (int64_t i = 0; i < *ready; ++i) ready_.push_back(std::move((*elements)[i]));
      for (int64_t i = *ready; i < *ready + *bins; ++i) {
        const Element& saved = (*elements)[i];
        if (saved.components.size() != 2 || saved.components[0].dtype() != DType::kInt64 ||
            saved.components[1].dtype() != DType::kInt64) {
          return MalformedState("pack_sequences: an open bin");
        }
        Bin bin;
        const auto tokens = saved.components[0].values<int64_t>();
        const auto lengths = saved.components[1].values<int64_t>();
        bin.tokens.assign(tokens.begin(), tokens.end());
        bin.segment_lengths.assign(lengths.begin(), lengths.end());
        int64_t total = 0;
        for (int64_t length : bin.segment_lengths) total += length;
        if (total != static_cast<int64_t>(bin.tokens.size()) || total > dataset_->length_) {
          return MalformedState("pack_sequences: an open bin's segments");
        }
        bins_.push_back(std::move(bin));
      }
      input_ended_ = *ended != 0;
      return RestoreInput(*input_, state);
    }

   private:
    absl::Status Add(const Tensor& sequence) {
      if (sequence.shape().size() != 1 || sequence.dtype() != dataset_->dtype_) {
        return absl::InvalidArgumentError(absl::StrCat("pack_sequences: component ", dataset_->component_,
                                                       " must be a vector of ", DTypeName(dataset_->dtype_),
                                                       ", got ", DTypeName(sequence.dtype()), " of shape ",
                                                       ShapeDebugString(sequence.shape())));
      }
      std::vector<int64_t> values(static_cast<size_t>(sequence.num_elements()));
      if (sequence.dtype() == DType::kInt32) {
        const auto in = sequence.values<int32_t>();
        std::copy(in.begin(), in.end(), values.begin());
      } else {
        const auto in = sequence.values<int64_t>();
        std::copy(in.begin(), in.end(), values.begin());
      }
      const auto length = static_cast<size_t>(dataset_->length_);
      for (size_t begin = 0; begin < values.size(); begin += length) {
        const size_t end = std::min(values.size(), begin + length);
        Place(values.data() + begin, values.data() + end);
      }
      return absl::OkStatus();
    }

    void Place(const int64_t* begin, const int64_t* end) {
      const auto size = static_cast<int64_t>(end - begin);
      const auto room = [&](const Bin& bin) {
        return dataset_->length_ - static_cast<int64_t>(bin.tokens.size());
      };
      int chosen = -1;
      for (int i = 0; i < static_cast<int>(bins_.size()); ++i) {
        if (room(bins_[i]) < size) continue;
        if (chosen < 0 || (dataset_->best_fit_ && room(bins_[i]) < room(bins_[chosen]))) chosen = i;
        if (!dataset_->best_fit_) break;
      }
      if (chosen < 0) {
        if (static_cast<int64_t>(bins_.size()) == dataset_->num_bins_) {
          int fullest = 0;
          for (int i = 1; i < static_cast<int>(bins_.size()); ++i) {
            if (room(bins_[i]) < room(bins_[fullest])) fullest = i;
          }
          ready_.push_back(dataset_->Row(bins_[fullest]));
          bins_.erase(bins_.begin() + fullest);
        }
        bins_.emplace_back();
        chosen = static_cast<int>(bins_.size()) - 1;
      }
      Bin& bin = bins_[chosen];
      bin.tokens.insert(bin.tokens.end(), begin, end);
      bin.segment_lengths.push_back(size);
    }

    const PackSequencesDataset* const dataset_;
    std::vector<Bin> bins_;
    std::deque<Element> ready_;
    bool input_ended_ = false;
  };

  Element Row(const Bin& bin) const {
    Tensor tokens(dtype_, {length_});
    Tensor segment_ids(DType::kInt32, {length_});
    Tensor positions(DType::kInt32, {length_});
    int32_t* segments = segment_ids.mutable_data<int32_t>();
    int32_t* position = positions.mutable_data<int32_t>();
    std::fill(segments, segments + length_, 0);
    std::fill(position, position + length_, 0);
    int64_t at = 0;
    for (size_t segment = 0; segment < bin.segment_lengths.size(); ++segment) {
      for (int64_t i = 0; i < bin.segment_lengths[segment]; ++i, ++at) {
        segments[at] = static_cast<int32_t>(segment + 1);
        position[at] = static_cast<int32_t>(i);
      }
    }
    const auto fill = [&](auto* out) {
      using T = std::remove_pointer_t<decltype(out)>;
      for (int64_t i = 0; i < length_; ++i) {
        out[i] = static_cast<T>(i < static_cast<int64_t>(bin.tokens.size()) ? bin.tokens[i] : padding_value_);
      }
    };
    if (dtype_ == DType::kInt32) {
      fill(tokens.mutable_data<int32_t>());
    } else {
      fill(tokens.mutable_data<int64_t>());
    }
    return Element({std::move(tokens), std::move(segment_ids), std::move(positions)}, names_);
  }

  const int64_t length_;
  const bool best_fit_;
  const int component_;
  const int64_t padding_value_;
  const int64_t num_bins_;
  const DType dtype_;
  const ComponentNames names_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakePackSequencesDataset(DatasetPtr input, const proto::PackSequencesOp& op) {
  if (absl::Status s = RequirePositive(op.length(), "pack_sequences", "length"); !s.ok()) return s;
  if (op.length() > kMaxLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("pack_sequences: length must be at most ", kMaxLength, ", got ", op.length()));
  }
  if (op.method() != "first_fit" && op.method() != "best_fit" && !op.method().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pack_sequences: method must be first_fit or best_fit, got '", op.method(), "'"));
  }
  if (op.num_bins() < 0 || op.num_bins() > kMaxBins) {
    return absl::InvalidArgumentError(absl::StrCat("pack_sequences: num_bins must be between 1 and ",
                                                   kMaxBins, " (0: ", kDefaultBins, "), got ",
                                                   op.num_bins()));
  }
  const ElementSpec& in = input->element_spec();
  const auto components = static_cast<int64_t>(in.components.size());
  if (op.component() < 0 || op.component() >= components) {
    return absl::InvalidArgumentError(absl::StrCat("pack_sequences: component ", op.component(),
                                                   " is out of range for elements of ", components,
                                                   " components (", in.DebugString(), ")"));
  }
  const TensorSpec& sequence = in.components[op.component()];
  if ((sequence.dtype != DType::kInt32 && sequence.dtype != DType::kInt64) ||
      (!sequence.shape.unknown_rank && sequence.shape.dims.size() != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("pack_sequences: component ", op.component(),
                                                   " must be a vector of int32 or int64 token ids, got ",
                                                   sequence.DebugString()));
  }
  ElementSpec spec;
  spec.components = {TensorSpec{PartialShape::Known({op.length()}), sequence.dtype},
                     TensorSpec{PartialShape::Known({op.length()}), DType::kInt32},
                     TensorSpec{PartialShape::Known({op.length()}), DType::kInt32}};
  spec.names = {"tokens", "segment_ids", "positions"};
  return std::make_shared<PackSequencesDataset>(std::move(input), std::move(spec), op, sequence.dtype);
}

}  // namespace sluice
