// bucket_by_sequence_length: tf.data's, which is group_by_window keyed by
// the bucket of each element's length (length_fn's integer, or the first
// dimension of one component) with a padded_batch per window, and so is
// built here on the same grouping iterator as group_by_window. Bucket i
// takes the lengths in [bucket_boundaries[i-1], bucket_boundaries[i]) and is
// given as a batch once it holds bucket_batch_sizes[i] elements; at the
// input's end the buckets left are given in bucket order, unless
// drop_remainder. Batches pad as padded_batch pads (its own checks of
// padded_shapes and padding_values apply), to the bucket's boundary - 1 with
// pad_to_bucket_boundary, or not at all with no_padding.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_convert.h"
#include "pipeline/batch_util.h"
#include "pipeline/definition_limits.h"
#include "pipeline/grouping_util.h"
#include "pipeline/ops.h"

namespace sluice {
namespace {

using internal::AsOpError;
using internal::GroupingIterator;
using internal::IntegerFunction;
using internal::MakeUnaryIterator;
using internal::UnaryDataset;

constexpr char kOp[] = "bucket_by_sequence_length";

// How a batch is padded: padded_batch's arguments, and with
// pad_to_bucket_boundary the shapes each bucket pads to.
struct Padding {
  ElementSpec row;  // the spec of one padded row
  std::vector<PartialShape> shapes;
  std::vector<Tensor> values;
  std::vector<std::vector<PartialShape>> bucket_shapes;  // one per boundary, or none
  bool none = false;                                     // no_padding
};

class BucketBySequenceLengthDataset : public UnaryDataset {
 public:
  BucketBySequenceLengthDataset(DatasetPtr input, std::optional<IntegerFunction> length_fn, int64_t component,
                                std::vector<int64_t> boundaries, std::vector<int64_t> batch_sizes,
                                Padding padding, bool pad_to_bucket_boundary, bool drop_remainder)
      : UnaryDataset(input, BatchedSpec(padding.row, kUnknownDim), kOp),
        length_fn_(std::move(length_fn)),
        component_(component),
        boundaries_(std::move(boundaries)),
        batch_sizes_(std::move(batch_sizes)),
        padding_(std::move(padding)),
        pad_to_bucket_boundary_(pad_to_bucket_boundary),
        drop_remainder_(drop_remainder) {}
  int64_t Cardinality() const override {
    return internal::CardinalityOfValueDependentStep(input()->Cardinality());
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  absl::StatusOr<int64_t> LengthOf(const Element& element) const {
    if (length_fn_.has_value()) return (*length_fn_)(element);
    const Tensor& t = element.components[component_];
    if (t.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("bucket_by_sequence_length: component ", component_,
                                                     " is a scalar; its length is its first dimension"));
    }
    return t.dim(0);
  }

  class Iterator : public GroupingIterator {
   public:
    Iterator(const BucketBySequenceLengthDataset* dataset, std::unique_ptr<IteratorBase> input)
        : GroupingIterator(std::move(input), kOp, dataset->drop_remainder_), dataset_(dataset) {}

   protected:
    // The bucket: how many boundaries are <= the length.
    absl::StatusOr<int64_t> KeyOf(const Element& element) const override {
      absl::StatusOr<int64_t> length = dataset_->LengthOf(element);
      if (!length.ok()) return length.status();
      const std::vector<int64_t>& boundaries = dataset_->boundaries_;
      const int64_t bucket =
          std::upper_bound(boundaries.begin(), boundaries.end(), *length) - boundaries.begin();
      if (dataset_->pad_to_bucket_boundary_ && bucket == static_cast<int64_t>(boundaries.size())) {
        return absl::InvalidArgumentError(absl::StrCat("bucket_by_sequence_length: an element of length ",
                                                       *length, " is not below the last bucket boundary, ",
                                                       boundaries.back(),
                                                       ", which pad_to_bucket_boundary needs"));
      }
      return bucket;
    }
    // With pad_to_bucket_boundary, the last bucket gets no element.
    int64_t GroupSize(int64_t key) const override {
      const auto buckets =
          static_cast<int64_t>(dataset_->batch_sizes_.size()) - (dataset_->pad_to_bucket_boundary_ ? 1 : 0);
      return key >= 0 && key < buckets ? dataset_->batch_sizes_[key] : 0;
    }
    absl::StatusOr<Element> Reduce(int64_t key, const std::vector<Element>& group) const override {
      const Padding& padding = dataset_->padding_;
      absl::StatusOr<Element> batch =
          padding.none
              ? StackElements(group)
              : PaddedStackElements(
                    group, padding.bucket_shapes.empty() ? padding.shapes : padding.bucket_shapes[key],
                    padding.values);
      if (!batch.ok()) return AsOpError(batch.status(), kOp);
      return batch;
    }

   private:
    const BucketBySequenceLengthDataset* const dataset_;
  };

  const std::optional<IntegerFunction> length_fn_;
  const int64_t component_;
  const std::vector<int64_t> boundaries_;
  const std::vector<int64_t> batch_sizes_;
  const Padding padding_;
  const bool pad_to_bucket_boundary_;
  const bool drop_remainder_;
};

absl::Status CheckBuckets(const std::vector<int64_t>& boundaries, const std::vector<int64_t>& batch_sizes) {
  for (size_t i = 0; i < boundaries.size(); ++i) {
    if (boundaries[i] <= 0 || (i > 0 && boundaries[i] <= boundaries[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket_by_sequence_length: bucket_boundaries must be > 0 and strictly increasing, got [",
          absl::StrJoin(boundaries, ", "), "]"));
    }
  }
  if (batch_sizes.size() != boundaries.size() + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket_by_sequence_length: bucket_batch_sizes needs ", boundaries.size() + 1,
        " sizes, one more than the ", boundaries.size(), " bucket_boundaries, got ", batch_sizes.size()));
  }
  for (int64_t size : batch_sizes) {
    if (absl::Status s = internal::RequirePositive(size, kOp, "bucket_batch_sizes"); !s.ok()) return s;
    if (size > kMaxBatchSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket_by_sequence_length: bucket_batch_sizes must be at most ", kMaxBatchSize, ", got ", size));
    }
  }
  return absl::OkStatus();
}

// The length's source: length_fn, or a component that is not a scalar.
absl::StatusOr<std::optional<IntegerFunction>> LengthFunction(const ElementSpec& in,
                                                              const proto::BucketBySequenceLengthOp& op) {
  if (!op.length_fn().name().empty()) {
    if (op.component() != 0) {
      return absl::InvalidArgumentError("bucket_by_sequence_length: give length_fn or component, not both");
    }
    absl::StatusOr<IntegerFunction> fn = IntegerFunction::Create(op.length_fn(), in, kOp, "length_fn");
    if (!fn.ok()) return fn.status();
    return std::optional<IntegerFunction>(*std::move(fn));
  }
  const auto components = static_cast<int64_t>(in.components.size());
  if (op.component() < 0 || op.component() >= components) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_by_sequence_length: component ", op.component(),
                                                   " is out of range for elements of ", components,
                                                   " components (", in.DebugString(), ")"));
  }
  const TensorSpec& spec = in.components[op.component()];
  if (!spec.shape.unknown_rank && spec.shape.dims.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket_by_sequence_length: component ", op.component(), " is a scalar, ",
                     spec.DebugString(), "; its length is its first dimension (or give length_fn)"));
  }
  return std::optional<IntegerFunction>();
}

// padded_batch checks padded_shapes and padding_values and gives the padded
// rows' spec: it is asked here, so that the same arguments mean the same.
absl::StatusOr<Padding> PaddingOf(const DatasetPtr& input, const proto::BucketBySequenceLengthOp& op) {
  const ElementSpec& in = input->element_spec();
  Padding padding;
  if (op.no_padding()) {
    if (op.pad_to_bucket_boundary() || op.padded_shapes_size() > 0 || op.padding_values_size() > 0) {
      return absl::InvalidArgumentError(
          "bucket_by_sequence_length: no_padding takes no pad_to_bucket_boundary, padded_shapes or "
          "padding_values");
    }
    padding.row = in;
    padding.none = true;
    return padding;
  }
  proto::PaddedBatchOp padded;
  padded.set_batch_size(1);
  *padded.mutable_padded_shapes() = op.padded_shapes();
  *padded.mutable_padding_values() = op.padding_values();
  absl::StatusOr<DatasetPtr> checked = MakePaddedBatchDataset(input, padded);
  if (!checked.ok()) return AsOpError(checked.status(), kOp);
  absl::StatusOr<ElementSpec> row = UnbatchedSpec((*checked)->element_spec(), kOp);
  if (!row.ok()) return row.status();
  padding.row = *std::move(row);
  for (const proto::PartialShapeProto& shape : op.padded_shapes())
    padding.shapes.push_back(PartialShapeFromProto(shape));
  for (int c = 0; c < op.padding_values_size(); ++c) {
    absl::StatusOr<Tensor> value = TensorFromProto(op.padding_values(c));
    // padded_batch took it: a scalar of the component's dtype, or one that casts to it.
    if (value.ok() && value->dtype() != in.components[c].dtype)
      value = CastTensor(*value, in.components[c].dtype);
    if (!value.ok()) return AsOpError(value.status(), kOp);
    padding.values.push_back(*std::move(value));
  }
  if (!op.pad_to_bucket_boundary()) return padding;
  // tf.data's: the padded shapes, else the elements', with each unknown
  // dimension the bucket's boundary - 1.
  std::vector<PartialShape> base = padding.shapes;
  for (size_t c = 0; base.empty() && c < in.components.size(); ++c) {
    if (in.components[c].shape.unknown_rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket_by_sequence_length: pad_to_bucket_boundary needs ", "the rank of component ",
                       c, "; give padded_shapes"));
    }
  }
  if (base.empty()) {
    for (const TensorSpec& c : in.components) base.push_back(c.shape);
  }
  for (int64_t boundary : op.bucket_boundaries()) {
    std::vector<PartialShape> shapes = base;
    for (PartialShape& shape : shapes) {
      for (int64_t& d : shape.dims) d = d == kUnknownDim ? boundary - 1 : d;
    }
    padding.bucket_shapes.push_back(std::move(shapes));
  }
  return padding;
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeBucketBySequenceLengthDataset(DatasetPtr input,
                                                             const proto::BucketBySequenceLengthOp& op) {
  std::vector<int64_t> boundaries(op.bucket_boundaries().begin(), op.bucket_boundaries().end());
  std::vector<int64_t> batch_sizes(op.bucket_batch_sizes().begin(), op.bucket_batch_sizes().end());
  if (absl::Status s = CheckBuckets(boundaries, batch_sizes); !s.ok()) return s;
  if (op.pad_to_bucket_boundary() && boundaries.empty()) {
    return absl::InvalidArgumentError(
        "bucket_by_sequence_length: pad_to_bucket_boundary needs bucket_boundaries, every length being below "
        "the last");
  }
  absl::StatusOr<std::optional<IntegerFunction>> length_fn = LengthFunction(input->element_spec(), op);
  if (!length_fn.ok()) return length_fn.status();
  absl::StatusOr<Padding> padding = PaddingOf(input, op);
  if (!padding.ok()) return padding.status();
  return std::make_shared<BucketBySequenceLengthDataset>(
      std::move(input), *std::move(length_fn), op.component(), std::move(boundaries), std::move(batch_sizes),
      *std::move(padding), op.pad_to_bucket_boundary(), op.drop_remainder());
}

}  // namespace sluice
