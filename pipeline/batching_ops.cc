// The transforms that regroup the rows of batches: unbatch, rebatch and
// padded_batch (`batch` itself, which may run in parallel, is in
// parallel_ops.cc).
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "pipeline/batch_util.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

// unbatch's and rebatch's state: the input batch they are splitting (kept
// while rows of it remain), the next row in it, and the input.
absl::Status SavePartial(const std::string& next_key, int64_t next, int64_t rows, const Element& batch,
                         IteratorBase& input, proto::IteratorState* state) {
  (*state->mutable_ints())[next_key] = next;
  (*state->mutable_ints())["rows"] = rows;
  if (next < rows) SaveElement(batch, state);
  return SaveInput(input, state);
}

absl::Status RestorePartial(const proto::IteratorState& state, const std::string& next_key, int64_t* next,
                            int64_t* rows, Element* batch, IteratorBase& input) {
  absl::StatusOr<int64_t> saved_next = StateInt(state, next_key);
  absl::StatusOr<int64_t> saved_rows = StateInt(state, "rows");
  if (!saved_next.ok()) return saved_next.status();
  if (!saved_rows.ok()) return saved_rows.status();
  if (*saved_next < 0 || *saved_rows < 0) {
    return MalformedState(absl::StrCat(next_key, " ", *saved_next, " or rows ", *saved_rows, " is negative"));
  }
  if (*saved_next < *saved_rows) {
    absl::StatusOr<Element> element = RestoreElement(state, 0);
    if (!element.ok()) return element.status();
    // The rows are sliced from the batch without a check: they must be
    // its rows (a checkpoint is untrusted bytes).
    absl::StatusOr<int64_t> rows = BatchRows(*element, "restore");
    if (!rows.ok()) return MalformedState(std::string(rows.status().message()));
    if (*rows != *saved_rows) {
      return MalformedState(absl::StrCat("a batch of ", *rows, " rows saved as one of ", *saved_rows));
    }
    *batch = *std::move(element);
  }
  if (absl::Status s = RestoreInput(input, state); !s.ok()) return s;
  *next = *saved_next;
  *rows = *saved_rows;
  return absl::OkStatus();
}

using internal::MakeUnaryIterator;
using internal::RequirePositive;
using internal::UnaryDataset;
using internal::UnaryIterator;

class UnbatchDataset : public UnaryDataset {
 public:
  UnbatchDataset(DatasetPtr input, ElementSpec spec) : UnaryDataset(input, std::move(spec), "unbatch") {}
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    return n == kInfiniteCardinality || n == 0 ? n : kUnknownCardinality;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const UnbatchDataset*, std::unique_ptr<IteratorBase> input) : UnaryIterator(std::move(input)) {}
    absl::Status GetNext(Element* element, bool* end) override {
      while (next_row_ >= rows_) {
        if (absl::Status status = input_->GetNext(&batch_, end); !status.ok() || *end) return status;
        absl::StatusOr<int64_t> rows = BatchRows(batch_, "unbatch");
        if (!rows.ok()) return rows.status();
        rows_ = *rows;
        next_row_ = 0;
      }
      Element out;
      out.names = batch_.names;
      for (const Tensor& t : batch_.components) out.components.push_back(t.SubTensor(next_row_));
      ++next_row_;
      *element = std::move(out);
      *end = false;
      return absl::OkStatus();
    }

    // The batch being split, while rows of it remain.
    absl::Status Save(proto::IteratorState* state) override {
      return SavePartial("next_row", next_row_, rows_, batch_, *input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      return RestorePartial(state, "next_row", &next_row_, &rows_, &batch_, *input_);
    }

   private:
    Element batch_;
    int64_t rows_ = 0;
    int64_t next_row_ = 0;
  };
};

// Regroups the rows of input batches into batches of `batch_size` rows,
// slicing without a copy when a whole output batch lies in one input batch.
class RebatchDataset : public UnaryDataset {
 public:
  RebatchDataset(DatasetPtr input, ElementSpec spec, int64_t batch_size, bool drop_remainder)
      : UnaryDataset(input, std::move(spec), "rebatch"),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder) {}
  int64_t Cardinality() const override {
    return internal::CardinalityOfValueDependentStep(input()->Cardinality());
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const RebatchDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset) {}
    absl::Status GetNext(Element* element, bool* end) override {
      const int64_t want = dataset_->batch_size_;
      std::vector<Element> pieces;
      int64_t have = 0;
      while (have < want) {
        if (offset_ >= rows_) {
          bool input_end = false;
          if (absl::Status status = input_->GetNext(&current_, &input_end); !status.ok()) return status;
          if (input_end) break;
          absl::StatusOr<int64_t> rows = BatchRows(current_, "rebatch");
          if (!rows.ok()) return rows.status();
          rows_ = *rows;
          offset_ = 0;
          continue;
        }
        const int64_t take = std::min(want - have, rows_ - offset_);
        pieces.push_back(SliceBatch(current_, offset_, offset_ + take));
        offset_ += take;
        have += take;
      }
      if (have == 0 || (have < want && dataset_->drop_remainder_)) {
        *end = true;
        return absl::OkStatus();
      }
      absl::StatusOr<Element> batch = ConcatBatches(pieces);
      if (!batch.ok()) return batch.status();
      *element = *std::move(batch);
      *end = false;
      return absl::OkStatus();
    }

    absl::Status Save(proto::IteratorState* state) override {
      return SavePartial("offset", offset_, rows_, current_, *input_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      return RestorePartial(state, "offset", &offset_, &rows_, &current_, *input_);
    }

   private:
    const RebatchDataset* const dataset_;
    Element current_;
    int64_t rows_ = 0;
    int64_t offset_ = 0;
  };

  const int64_t batch_size_;
  const bool drop_remainder_;
};

class PaddedBatchDataset : public UnaryDataset {
 public:
  PaddedBatchDataset(DatasetPtr input, ElementSpec spec, int64_t batch_size, bool drop_remainder,
                     std::vector<PartialShape> padded_shapes, std::vector<Tensor> padding_values)
      : UnaryDataset(input, std::move(spec), "padded_batch"),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        padded_shapes_(std::move(padded_shapes)),
        padding_values_(std::move(padding_values)) {}
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    if (n < 0) return n;
    return drop_remainder_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const PaddedBatchDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), dataset_(dataset) {}
    absl::Status GetNext(Element* element, bool* end) override {
      std::vector<Element> rows;
      while (static_cast<int64_t>(rows.size()) < dataset_->batch_size_) {
        Element row;
        bool input_end = false;
        if (absl::Status status = input_->GetNext(&row, &input_end); !status.ok()) return status;
        if (input_end) break;
        rows.push_back(std::move(row));
      }
      if (rows.empty() ||
          (dataset_->drop_remainder_ && static_cast<int64_t>(rows.size()) < dataset_->batch_size_)) {
        *end = true;
        return absl::OkStatus();
      }
      absl::StatusOr<Element> batch =
          PaddedStackElements(rows, dataset_->padded_shapes_, dataset_->padding_values_);
      if (!batch.ok()) return batch.status();
      *element = *std::move(batch);
      *end = false;
      return absl::OkStatus();
    }

    // A batch is pulled whole within one call: only the input has a position.
    absl::Status Save(proto::IteratorState* state) override { return SaveInput(*input_, state); }
    absl::Status Restore(const proto::IteratorState& state) override { return RestoreInput(*input_, state); }

   private:
    const PaddedBatchDataset* const dataset_;
  };

  const int64_t batch_size_;
  const bool drop_remainder_;
  const std::vector<PartialShape> padded_shapes_;
  const std::vector<Tensor> padding_values_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeUnbatchDataset(DatasetPtr input) {
  absl::StatusOr<ElementSpec> spec = UnbatchedSpec(input->element_spec(), "unbatch");
  if (!spec.ok()) return spec.status();
  return std::make_shared<UnbatchDataset>(std::move(input), *std::move(spec));
}

absl::StatusOr<DatasetPtr> MakeRebatchDataset(DatasetPtr input, const proto::RebatchOp& op) {
  if (absl::Status s = RequirePositive(op.batch_size(), "rebatch", "batch_size"); !s.ok()) return s;
  absl::StatusOr<ElementSpec> row = UnbatchedSpec(input->element_spec(), "rebatch");
  if (!row.ok()) return row.status();
  ElementSpec spec = BatchedSpec(*row, op.drop_remainder() ? op.batch_size() : kUnknownDim);
  return std::make_shared<RebatchDataset>(std::move(input), std::move(spec), op.batch_size(),
                                          op.drop_remainder());
}

absl::StatusOr<DatasetPtr> MakePaddedBatchDataset(DatasetPtr input, const proto::PaddedBatchOp& op) {
  if (absl::Status s = RequirePositive(op.batch_size(), "padded_batch", "batch_size"); !s.ok()) return s;
  const ElementSpec& in = input->element_spec();
  const size_t n = in.components.size();
  if (op.padded_shapes_size() != 0 && static_cast<size_t>(op.padded_shapes_size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "padded_batch: padded_shapes has ", op.padded_shapes_size(), " shapes for ", n, " components"));
  }
  if (op.padding_values_size() != 0 && static_cast<size_t>(op.padding_values_size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "padded_batch: padding_values has ", op.padding_values_size(), " values for ", n, " components"));
  }
  std::vector<PartialShape> shapes;
  ElementSpec row = in;
  for (int c = 0; c < op.padded_shapes_size(); ++c) {
    PartialShape shape = PartialShapeFromProto(op.padded_shapes(c));
    const PartialShape& have = in.components[c].shape;
    if (!have.unknown_rank && have.dims.size() != shape.dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat("padded_batch: padded shape ", shape.DebugString(),
                                                     " of component ", c, " does not match its shape ",
                                                     have.DebugString()));
    }
    row.components[c].shape = shape;
    shapes.push_back(std::move(shape));
  }
  if (shapes.empty()) {
    for (TensorSpec& c : row.components) {
      for (int64_t& d : c.shape.dims) d = kUnknownDim;
    }
  }
  std::vector<Tensor> values;
  for (int c = 0; c < op.padding_values_size(); ++c) {
    absl::StatusOr<Tensor> value = TensorFromProto(op.padding_values(c));
    if (!value.ok()) return value.status();
    absl::StatusOr<Tensor> cast = value->dtype() == in.components[c].dtype || value->dtype() == DType::kString
                                      ? absl::StatusOr<Tensor>(*value)
                                      : CastTensor(*value, in.components[c].dtype);
    if (!cast.ok() || cast->dtype() != in.components[c].dtype || cast->rank() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("padded_batch: padding value of component ", c,
                                                     " must be a ", DTypeName(in.components[c].dtype),
                                                     " scalar"));
    }
    values.push_back(*std::move(cast));
  }
  ElementSpec spec = BatchedSpec(row, op.drop_remainder() ? op.batch_size() : kUnknownDim);
  return std::make_shared<PaddedBatchDataset>(std::move(input), std::move(spec), op.batch_size(),
                                              op.drop_remainder(), std::move(shapes), std::move(values));
}

}  // namespace sluice
