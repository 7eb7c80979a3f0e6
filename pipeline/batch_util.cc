#include "pipeline/batch_util.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// Copies `src` (rank r) into row `row` of `dst` (rank r+1, at least as large
// in every dimension), at the leading corner of each padded row.
void CopyIntoPaddedRow(const Tensor& src, int64_t row, Tensor* dst) {
  const Shape& out_shape = dst->shape();
  const int rank = src.rank();
  const int64_t row_size = NumElements(Shape(out_shape.begin() + 1, out_shape.end()));
  const int64_t n = src.num_elements();
  // Flat index in dst of each element of src, walking src in row-major order.
  std::vector<int64_t> index(rank, 0);
  std::vector<int64_t> strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * out_shape[d + 2];
  const bool strings = src.dtype() == DType::kString;
  const size_t width = DTypeSize(src.dtype());
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = row * row_size;
    for (int d = 0; d < rank; ++d) offset += index[d] * strides[d];
    if (strings) {
      dst->mutable_data<std::string>()[offset] = src.data<std::string>()[i];
    } else {
      std::memcpy(static_cast<char*>(dst->mutable_raw_data()) + offset * width,
                  static_cast<const char*>(src.raw_data()) + i * width, width);
    }
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < src.dim(d)) break;
      index[d] = 0;
    }
  }
}

void FillWith(const Tensor& scalar, Tensor* t) {
  if (t->dtype() == DType::kString) {
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      t->mutable_data<std::string>()[i] = scalar.data<std::string>()[0];
    }
    return;
  }
  const size_t width = DTypeSize(t->dtype());
  char* out = static_cast<char*>(t->mutable_raw_data());
  for (int64_t i = 0; i < t->num_elements(); ++i) std::memcpy(out + i * width, scalar.raw_data(), width);
}

void CopyRows(const Tensor& src, int64_t dst_row, Tensor* dst) {
  if (src.num_elements() == 0) return;
  const int64_t row_size = src.num_elements() / std::max<int64_t>(1, src.dim(0));
  if (src.dtype() == DType::kString) {
    std::string* out = dst->mutable_data<std::string>() + dst_row * row_size;
    for (int64_t i = 0; i < src.num_elements(); ++i) out[i] = src.data<std::string>()[i];
  } else {
    std::memcpy(static_cast<char*>(dst->mutable_raw_data()) + dst_row * row_size * DTypeSize(src.dtype()),
                src.raw_data(), src.ByteSize());
  }
}

absl::Status CheckSameStructure(const std::vector<Element>& elements, const char* op) {
  for (size_t i = 1; i < elements.size(); ++i) {
    if (elements[i].size() != elements[0].size()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": elements have ", elements[0].size(), " and ",
                                                     elements[i].size(), " components"));
    }
    for (size_t c = 0; c < elements[0].size(); ++c) {
      if (elements[i].components[c].dtype() != elements[0].components[c].dtype()) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": component ", c, " has dtypes ",
                                                       DTypeName(elements[0].components[c].dtype()), " and ",
                                                       DTypeName(elements[i].components[c].dtype())));
      }
    }
  }
  return absl::OkStatus();
}

// "0", or "1 ('image')" for a named component.
std::string ComponentLabel(const Element& element, size_t c) {
  if (!element.named()) return absl::StrCat(c);
  return absl::StrCat(c, " ('", (*element.names)[c], "')");
}

}  // namespace

absl::StatusOr<Element> StackElements(const std::vector<Element>& elements) {
  if (elements.empty()) return absl::InvalidArgumentError("batch: no elements to stack");
  if (absl::Status status = CheckSameStructure(elements, "batch"); !status.ok()) return status;
  Element batch;
  batch.names = elements[0].names;
  const int64_t n = static_cast<int64_t>(elements.size());
  for (size_t c = 0; c < elements[0].size(); ++c) {
    const Tensor& first = elements[0].components[c];
    for (const Element& e : elements) {
      if (e.components[c].shape() != first.shape()) {
        // Images of different sizes are the common case: name the fix.
        const bool images = first.dtype() == DType::kUInt8 && first.rank() == 3;
        return absl::InvalidArgumentError(absl::StrCat(
            "batch: cannot batch component ", ComponentLabel(elements[0], c), " of shapes ",
            ShapeDebugString(first.shape()), " and ", ShapeDebugString(e.components[c].shape()),
            images ? "; resize the images to one size first (resize, center_crop, random_crop or "
                     "decode_and_random_crop), or use padded_batch"
                   : "; use padded_batch"));
      }
    }
    Shape shape = first.shape();
    shape.insert(shape.begin(), n);
    // Every row is written below: zeroing first would only touch a big
    // batch's memory twice.
    Tensor out = Tensor::Uninitialized(first.dtype(), shape);
    const int64_t row = first.num_elements();
    for (int64_t i = 0; i < n; ++i) {
      const Tensor& src = elements[i].components[c];
      if (first.dtype() == DType::kString) {
        std::string* dst = out.mutable_data<std::string>() + i * row;
        for (int64_t k = 0; k < row; ++k) dst[k] = src.data<std::string>()[k];
      } else if (row > 0) {
        std::memcpy(static_cast<char*>(out.mutable_raw_data()) + i * src.ByteSize(), src.raw_data(),
                    src.ByteSize());
      }
    }
    batch.components.push_back(std::move(out));
  }
  return batch;
}

absl::StatusOr<Element> PaddedStackElements(const std::vector<Element>& elements,
                                            const std::vector<PartialShape>& padded_shapes,
                                            const std::vector<Tensor>& padding_values) {
  if (elements.empty()) return absl::InvalidArgumentError("padded_batch: no elements to stack");
  if (absl::Status status = CheckSameStructure(elements, "padded_batch"); !status.ok()) return status;
  const size_t num_components = elements[0].size();
  Element batch;
  batch.names = elements[0].names;
  for (size_t c = 0; c < num_components; ++c) {
    const int rank = elements[0].components[c].rank();
    Shape longest(rank, 0);
    for (const Element& e : elements) {
      const Tensor& t = e.components[c];
      if (t.rank() != rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("padded_batch: component ", c, " has ranks ", rank, " and ", t.rank()));
      }
      for (int d = 0; d < rank; ++d) longest[d] = std::max(longest[d], t.dim(d));
    }
    Shape target = longest;
    if (!padded_shapes.empty()) {
      const PartialShape& wanted = padded_shapes[c];
      if (static_cast<int>(wanted.dims.size()) != rank) {
        return absl::InvalidArgumentError(absl::StrCat("padded_batch: padded shape ", wanted.DebugString(),
                                                       " of component ", c, " does not have rank ", rank));
      }
      for (int d = 0; d < rank; ++d) {
        if (wanted.dims[d] == kUnknownDim) continue;
        if (wanted.dims[d] < longest[d]) {
          return absl::InvalidArgumentError(
              absl::StrCat("padded_batch: component ", c, " has size ", longest[d], " in dimension ", d,
                           ", larger than its padded shape ", wanted.DebugString()));
        }
        target[d] = wanted.dims[d];
      }
    }
    Shape shape = target;
    shape.insert(shape.begin(), static_cast<int64_t>(elements.size()));
    Tensor out(elements[0].components[c].dtype(), shape);
    if (!padding_values.empty()) {
      const Tensor& pad = padding_values[c];
      if (pad.dtype() != out.dtype() || pad.rank() != 0) {
        return absl::InvalidArgumentError(absl::StrCat("padded_batch: padding value of component ", c,
                                                       " must be a ", DTypeName(out.dtype()), " scalar"));
      }
      FillWith(pad, &out);
    }
    for (size_t i = 0; i < elements.size(); ++i) {
      CopyIntoPaddedRow(elements[i].components[c], static_cast<int64_t>(i), &out);
    }
    batch.components.push_back(std::move(out));
  }
  return batch;
}

absl::StatusOr<Element> ConcatBatches(const std::vector<Element>& batches) {
  if (batches.empty()) return absl::InvalidArgumentError("rebatch: nothing to concatenate");
  if (batches.size() == 1) return batches[0];
  for (const Element& b : batches) {
    if (b.size() != batches[0].size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rebatch: batches have ", batches[0].size(), " and ", b.size(), " components"));
    }
  }
  Element out;
  out.names = batches[0].names;
  for (size_t c = 0; c < batches[0].size(); ++c) {
    const Tensor& first = batches[0].components[c];
    Shape shape = first.shape();
    shape[0] = 0;
    for (const Element& b : batches) {
      const Tensor& t = b.components[c];
      if (t.dtype() != first.dtype()) {
        return absl::InvalidArgumentError(absl::StrCat("rebatch: component ", c, " has dtypes ",
                                                       DTypeName(first.dtype()), " and ",
                                                       DTypeName(t.dtype())));
      }
      if (t.rank() != first.rank() ||
          !std::equal(t.shape().begin() + 1, t.shape().end(), first.shape().begin() + 1)) {
        return absl::InvalidArgumentError(absl::StrCat("rebatch: component ", c, " has rows of shapes ",
                                                       ShapeDebugString(first.shape()), " and ",
                                                       ShapeDebugString(t.shape())));
      }
      shape[0] += t.dim(0);
    }
    Tensor result(first.dtype(), shape);
    int64_t row = 0;
    for (const Element& b : batches) {
      CopyRows(b.components[c], row, &result);
      row += b.components[c].dim(0);
    }
    out.components.push_back(std::move(result));
  }
  return out;
}

Element SliceBatch(const Element& batch, int64_t begin, int64_t end) {
  Element out;
  out.names = batch.names;
  out.components.reserve(batch.size());
  for (const Tensor& t : batch.components) out.components.push_back(t.Slice(begin, end));
  return out;
}

absl::StatusOr<int64_t> BatchRows(const Element& batch, const char* op) {
  if (batch.size() == 0) return absl::InvalidArgumentError(absl::StrCat(op, ": element has no components"));
  int64_t rows = -1;
  for (size_t c = 0; c < batch.size(); ++c) {
    const Tensor& t = batch.components[c];
    if (t.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": component ", c, " is a scalar, not a batch"));
    }
    if (rows >= 0 && t.dim(0) != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": components have ", rows, " and ", t.dim(0), " rows"));
    }
    rows = t.dim(0);
  }
  return rows;
}

ElementSpec BatchedSpec(const ElementSpec& spec, int64_t batch_size) {
  ElementSpec out = spec;
  for (TensorSpec& c : out.components) {
    if (!c.shape.unknown_rank) c.shape.dims.insert(c.shape.dims.begin(), batch_size);
  }
  return out;
}

absl::StatusOr<ElementSpec> UnbatchedSpec(const ElementSpec& spec, const char* op) {
  ElementSpec out = spec;
  for (size_t c = 0; c < out.components.size(); ++c) {
    PartialShape& shape = out.components[c].shape;
    if (shape.unknown_rank) continue;
    if (shape.dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": component ", c, " is a scalar; it needs a batch dimension"));
    }
    shape.dims.erase(shape.dims.begin());
  }
  return out;
}

}  // namespace sluice
