// The flat frame's decoder: every offset, size and count checked against
// the frame's own bytes before use (service/element_frame.h).
#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "service/element_frame.h"
#include "service/element_frame_format.h"

namespace sluice {
namespace {

using frame_format::Align;
using frame_format::Get;
using frame_format::kHeaderBytes;
using frame_format::kMagic;
using frame_format::kMaxFrameElements;
using frame_format::kSpecComponentBytes;
using frame_format::SpecId;

absl::Status FrameError(size_t offset, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed element frame at byte ", offset, ": ", what));
}

// The element count of `shape`, or nothing for a negative dimension or a
// count past 2^62.
std::optional<uint64_t> CountOf(const Shape& shape) {
  // Left to right, as NumElements counts: [2^40, 2^40, 0] has no count
  // (no tensor can have it), [0, 2^40, 2^40] has 0.
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && count > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) return std::nullopt;
    count *= static_cast<uint64_t>(d);
  }
  return count;
}

absl::StatusOr<std::shared_ptr<FrameSpec>> ReadSpec(const uint8_t* at, size_t bytes, size_t components,
                                                    uint64_t id) {
  if (bytes < 4 || (bytes - 4) / kSpecComponentBytes < components) {
    return FrameError(kHeaderBytes,
                      absl::StrCat("a spec of ", bytes, " bytes for ", components, " components"));
  }
  const uint32_t named = Get<uint32_t>(at);
  if (named > 1) return FrameError(kHeaderBytes, "the spec's names flag is neither 0 nor 1");
  if (SpecId(at, bytes) != id) return FrameError(kHeaderBytes, "the spec does not hash to its id");
  auto spec = std::make_shared<FrameSpec>();
  spec->id = id;
  std::vector<std::string> names;
  size_t name_at = 4 + kSpecComponentBytes * components;
  for (size_t c = 0; c < components; ++c) {
    const uint8_t* component = at + 4 + kSpecComponentBytes * c;
    absl::StatusOr<DType> dtype = CheckedDType(static_cast<proto::DataType>(component[0]));
    if (!dtype.ok())
      return FrameError(kHeaderBytes, absl::StrCat("component ", c, ": ", dtype.status().message()));
    spec->dtypes.push_back(*dtype);
    spec->ranks.push_back(component[1]);
    const uint32_t name_bytes = Get<uint32_t>(component + 4);
    if (name_bytes > bytes - name_at)
      return FrameError(kHeaderBytes, absl::StrCat("component ", c, "'s name"));
    if (named == 1) names.emplace_back(reinterpret_cast<const char*>(at + name_at), name_bytes);
    name_at += name_bytes;
  }
  if (name_at != bytes) return FrameError(kHeaderBytes, "the spec has bytes past its names");
  if (named == 1) spec->names = MakeNames(std::move(names));
  return spec;
}

// Reads a head's sections with every offset checked against its size.
class HeadReader {
 public:
  HeadReader(const uint8_t* head, size_t size) : head_(head), size_(size) {}
  bool Fits(size_t at, size_t bytes) const { return at <= size_ && bytes <= size_ - at; }
  absl::Status Dims(size_t* at, int rank, Shape* shape) const {
    if (!Fits(*at, 8 * static_cast<size_t>(rank))) return FrameError(*at, "a shape runs past the head");
    shape->resize(rank);
    for (int d = 0; d < rank; ++d) {
      (*shape)[d] = Get<int64_t>(head_ + *at);
      if ((*shape)[d] < 0) return FrameError(*at, "a negative dimension");
      *at += 8;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> U64(size_t* at) const {
    if (!Fits(*at, 8)) return FrameError(*at, "the tables run past the head");
    const uint64_t value = Get<uint64_t>(head_ + *at);
    *at += 8;
    return value;
  }
  const uint8_t* data() const { return head_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* head_;
  size_t size_;
};

// What a frame may decode to beyond its own bytes: each element and tensor
// costs its objects (a tensor its shape too), so that a small frame of
// empty tensors with long shapes cannot make gigabytes of them.
class DecodeBudget {
 public:
  explicit DecodeBudget(uint64_t frame_bytes) : left_(kPerFrameByte * frame_bytes + kFixed) {}
  absl::Status Charge(uint64_t bytes, size_t offset) {
    if (bytes > left_) {
      return FrameError(offset, absl::StrCat("the frame decodes to more than ", kPerFrameByte,
                                             " times its size in tensors and shapes"));
    }
    left_ -= bytes;
    return absl::OkStatus();
  }
  static constexpr uint64_t kElement = 64;
  static uint64_t Tensor(int rank) { return 128 + 8 * static_cast<uint64_t>(rank); }

 private:
  static constexpr uint64_t kPerFrameByte = 32;
  static constexpr uint64_t kFixed = uint64_t{1} << 20;
  uint64_t left_;
};

// A string tensor at `offset`: its count + 1 bounds, then its bytes, at or
// after `*data_end` (the end of the data before it), which it moves past
// its last byte: the strings of a frame never overlap, so they take at
// most the head's size.
absl::StatusOr<Tensor> ReadStrings(const HeadReader& head, uint64_t offset, const Shape& shape,
                                   uint64_t* data_end) {
  const std::optional<uint64_t> count = CountOf(shape);
  if (!count.has_value() || offset % 8 != 0 || offset < *data_end || !head.Fits(offset, 0) ||
      (head.size() - offset) / 8 < *count + 1) {
    return FrameError(
        offset, absl::StrCat("string tensor of shape ", ShapeDebugString(shape), " does not fit the head"));
  }
  const uint8_t* bounds = head.data() + offset;
  uint64_t begin = Get<uint64_t>(bounds);
  if (begin != offset + 8 * (*count + 1))
    return FrameError(offset, "strings that do not follow their bounds");
  Tensor t(DType::kString, shape);
  std::string* out = t.mutable_data<std::string>();
  for (uint64_t i = 0; i < *count; ++i) {
    const uint64_t end = Get<uint64_t>(bounds + 8 * (i + 1));
    if (begin > end || end > head.size()) return FrameError(offset, absl::StrCat("string ", i, "'s bounds"));
    out[i].assign(reinterpret_cast<const char*>(head.data() + begin), end - begin);
    begin = end;
  }
  *data_end = begin;
  return t;
}

// A frame's head, read and checked: its bytes, spec and shared shapes, and
// where its table starts and ends.
struct Head {
  std::shared_ptr<TensorBuffer> buffer;
  std::shared_ptr<const FrameSpec> spec;
  std::vector<std::optional<Shape>> uniform;
  uint64_t count = 0;
  uint64_t bytes = 0;
  size_t table_start = 0;
  uint64_t table_end = 0;
};

absl::Status ReadHead(google::protobuf::io::CodedInputStream& in, size_t frame_bytes, FrameSpecs* specs,
                      Head* out) {
  uint8_t header[kHeaderBytes];
  if (frame_bytes < kHeaderBytes || !in.ReadRaw(header, kHeaderBytes)) {
    return FrameError(0, absl::StrCat("the frame is ", frame_bytes, " bytes, shorter than its header"));
  }
  if (Get<uint32_t>(header) != kMagic) return FrameError(0, "not a frame (wrong magic)");
  out->count = Get<uint32_t>(header + 4);
  const uint64_t spec_id = Get<uint64_t>(header + 8);
  const size_t components = Get<uint32_t>(header + 16);
  const size_t spec_bytes = Get<uint32_t>(header + 20);
  out->bytes = Get<uint64_t>(header + 24);
  if (Get<uint64_t>(header + 32) != frame_bytes) {
    return FrameError(32, absl::StrCat("the header says ", Get<uint64_t>(header + 32),
                                       " bytes, the frame has ", frame_bytes));
  }
  if (out->bytes < kHeaderBytes || out->bytes > frame_bytes || spec_bytes > out->bytes - kHeaderBytes) {
    return FrameError(24, absl::StrCat("a head of ", out->bytes, " bytes with a spec of ", spec_bytes));
  }
  if (out->count > kMaxFrameElements) return FrameError(4, absl::StrCat(out->count, " elements"));
  out->buffer = TensorBuffer::Allocate(DType::kUInt8, static_cast<int64_t>(out->bytes), /*zeroed=*/false);
  auto* data = static_cast<uint8_t*>(out->buffer->data());
  std::memcpy(data, header, kHeaderBytes);
  if (!in.ReadRaw(data + kHeaderBytes, static_cast<int>(out->bytes - kHeaderBytes))) {
    return FrameError(kHeaderBytes, "the head is truncated");
  }
  if (spec_bytes > 0) {
    absl::StatusOr<std::shared_ptr<FrameSpec>> sent =
        ReadSpec(data + kHeaderBytes, spec_bytes, components, spec_id);
    if (!sent.ok()) return sent.status();
    out->spec = *std::move(sent);
    if (specs != nullptr) specs->Add(out->spec);
  } else {
    if (specs != nullptr) out->spec = specs->Find(spec_id);
    if (out->spec == nullptr) {
      return FrameError(
          8, absl::StrCat("the frame leaves out spec ", spec_id, ", which this reader was never sent"));
    }
    if (out->spec->dtypes.size() != components) {
      return FrameError(16, absl::StrCat(components, " components, where spec ", spec_id, " has ",
                                         out->spec->dtypes.size()));
    }
  }
  // Each component's shape where every element shares it, and the bytes of
  // a table row.
  const HeadReader head(data, out->bytes);
  size_t at = Align(kHeaderBytes + spec_bytes, 8);
  out->uniform.resize(components);
  uint64_t row = 0;
  for (size_t c = 0; c < components; ++c) {
    absl::StatusOr<uint64_t> mode = head.U64(&at);
    if (!mode.ok()) return mode.status();
    if (*mode > 1) return FrameError(at - 8, absl::StrCat("component ", c, "'s shape mode is ", *mode));
    if (*mode == 1) {
      if (absl::Status s = head.Dims(&at, out->spec->ranks[c], &out->uniform[c].emplace()); !s.ok()) return s;
    }
    row += 8 + (*mode == 1 ? 0 : 8 * static_cast<uint64_t>(out->spec->ranks[c]));
  }
  out->table_start = at;
  if (row != 0 && out->count > (out->bytes - at) / row) {
    return FrameError(at,
                      absl::StrCat("a table of ", out->count, " rows of ", row, " bytes runs past the head"));
  }
  out->table_end = at + out->count * row;
  return absl::OkStatus();
}

// A large tensor as a view of the bytes `in` reads next, when they stay put
// (`in_place`), lie in one piece and are aligned as a TensorBuffer's are.
std::optional<Tensor> KeepInPlace(google::protobuf::io::CodedInputStream& in, DType dtype, const Shape& shape,
                                  uint64_t values, uint64_t bytes,
                                  const std::shared_ptr<const void>& in_place) {
  const void* data = nullptr;
  int available = 0;
  if (in_place == nullptr || !in.GetDirectBufferPointer(&data, &available) ||
      static_cast<uint64_t>(available) < bytes || reinterpret_cast<uintptr_t>(data) % kBufferAlignment != 0 ||
      !in.Skip(static_cast<int>(bytes))) {
    return std::nullopt;
  }
  // A reader that writes into the tensor writes into its held region, which
  // no request names until the tensor is gone.
  std::shared_ptr<TensorBuffer> buffer =
      TensorBuffer::Wrap(dtype, static_cast<int64_t>(values), const_cast<void*>(data), [in_place] {});
  return Tensor::FromBuffer(dtype, shape, std::move(buffer), 0);
}

// Decodes the table's rows into elements. Small tensors are views into the
// head, in order and never overlapping; large ones are read from `in`, in
// order after the head.
absl::Status ReadElements(google::protobuf::io::CodedInputStream& in, size_t frame_bytes, const Head& frame,
                          const std::shared_ptr<const void>& in_place, std::vector<Element>* elements) {
  const HeadReader head(static_cast<const uint8_t*>(frame.buffer->data()), frame.bytes);
  const FrameSpec& spec = *frame.spec;
  const size_t components = spec.dtypes.size();
  DecodeBudget budget(frame_bytes);
  elements->reserve(elements->size() + std::min<uint64_t>(frame.count, frame_bytes / 8 + 1));
  size_t at = frame.table_start;
  uint64_t data_end = frame.table_end;
  uint64_t next_large = frame.bytes;
  Shape shape;
  for (uint64_t e = 0; e < frame.count; ++e) {
    if (absl::Status s = budget.Charge(DecodeBudget::kElement, at); !s.ok()) return s;
    Element element;
    element.components.reserve(components);
    element.names = spec.names;
    for (size_t c = 0; c < components; ++c) {
      absl::StatusOr<uint64_t> offset = head.U64(&at);
      if (!offset.ok()) return offset.status();
      if (frame.uniform[c].has_value()) {
        shape = *frame.uniform[c];
      } else if (absl::Status s = head.Dims(&at, spec.ranks[c], &shape); !s.ok()) {
        return s;
      }
      if (absl::Status s = budget.Charge(DecodeBudget::Tensor(spec.ranks[c]), at); !s.ok()) return s;
      const DType dtype = spec.dtypes[c];
      if (dtype == DType::kString) {
        absl::StatusOr<Tensor> strings = ReadStrings(head, *offset, shape, &data_end);
        if (!strings.ok()) return strings.status();
        element.components.push_back(*std::move(strings));
        continue;
      }
      const std::optional<uint64_t> values = CountOf(shape);
      const uint64_t size = DTypeSize(dtype);
      if (!values.has_value() || *values > (frame_bytes + size - 1) / size) {
        return FrameError(*offset, absl::StrCat("a tensor of shape ", ShapeDebugString(shape),
                                                " is larger than the frame"));
      }
      const uint64_t bytes = *values * size;
      if (*offset >= frame.bytes && bytes > 0) {  // large: its own buffer, in order after the head
        if (*offset != next_large || bytes > frame_bytes - next_large) {
          return FrameError(*offset, absl::StrCat("a large tensor of ", bytes,
                                                  " bytes out of place (expected at ", next_large, ")"));
        }
        std::optional<Tensor> kept = KeepInPlace(in, dtype, shape, *values, bytes, in_place);
        if (kept.has_value()) {
          element.components.push_back(*std::move(kept));
        } else {
          Tensor t = Tensor::Uninitialized(dtype, shape);
          if (!in.ReadRaw(t.mutable_raw_data(), static_cast<int>(bytes))) {
            return FrameError(next_large, "a tensor is truncated");
          }
          element.components.push_back(std::move(t));
        }
        next_large += bytes;
      } else if (bytes == 0) {
        element.components.push_back(Tensor::Uninitialized(dtype, shape));
      } else {
        if (*offset % size != 0 || *offset < data_end || !head.Fits(*offset, bytes)) {
          return FrameError(*offset, absl::StrCat("a tensor of ", bytes, " bytes does not fit the head"));
        }
        data_end = *offset + bytes;
        element.components.push_back(
            Tensor::FromBuffer(dtype, shape, frame.buffer, static_cast<int64_t>(*offset / size)));
      }
    }
    elements->push_back(std::move(element));
  }
  if (next_large != frame_bytes) {
    return FrameError(next_large, absl::StrCat(frame_bytes - next_large, " bytes after the last tensor"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeFrame(google::protobuf::io::CodedInputStream& in, size_t frame_bytes, FrameSpecs* specs,
                         std::vector<Element>* elements, const std::shared_ptr<const void>& in_place) {
  // Every size is checked before it is allocated; this is the backstop for
  // an allocation that fails anyway (the reader's threads must not throw).
  try {
    Head head;
    if (absl::Status s = ReadHead(in, frame_bytes, specs, &head); !s.ok()) return s;
    return ReadElements(in, frame_bytes, head, in_place, elements);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory decoding a frame of ", frame_bytes, " bytes"));
  } catch (const std::length_error& e) {
    return absl::DataLossError(absl::StrCat("a frame of ", frame_bytes, " bytes: ", e.what()));
  }
}

}  // namespace sluice
