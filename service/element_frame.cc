#include "service/element_frame.h"

#include <google/protobuf/io/coded_stream.h>

#include <bit>
#include <cstring>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"

namespace sluice {
namespace {

static_assert(std::endian::native == std::endian::little,
              "frames are little-endian, written as the host's integers");

constexpr uint32_t kMagic = 0x31464C53;  // "SLF1"
// magic u32, elements u32, spec id u64, components u32, spec bytes u32
// (0: left out), head bytes u64, frame bytes u64.
constexpr size_t kHeaderBytes = 40;
// Per component: dtype u8, rank u8, zero u16, name length u32.
constexpr size_t kSpecComponentBytes = 8;
constexpr size_t kSmallAlignment = 16;
// Bounds what a reader reserves for a frame of empty elements.
constexpr uint64_t kMaxFrameElements = uint64_t{1} << 20;
constexpr int kMaxRank = 255;

size_t Align(size_t n, size_t alignment) { return (n + alignment - 1) & ~(alignment - 1); }

template <typename T>
void Put(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof value);
}
template <typename T>
T Get(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// FNV-1a: stable across processes and builds, which the id must be.
uint64_t SpecId(const uint8_t* bytes, size_t size) {
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash == 0 ? 1 : hash;
}

void ReleaseTensorBuffer(void* buffer) { delete static_cast<std::shared_ptr<TensorBuffer>*>(buffer); }

bool SameSpec(const Element& a, const Element& b) {
  if (a.components.size() != b.components.size() || a.named() != b.named()) return false;
  for (size_t c = 0; c < a.components.size(); ++c) {
    if (a.components[c].dtype() != b.components[c].dtype() ||
        a.components[c].rank() != b.components[c].rank()) {
      return false;
    }
  }
  return !a.named() || a.names == b.names || *a.names == *b.names;
}

size_t SpecBytes(const Element& element) {
  size_t bytes = 4 + kSpecComponentBytes * element.components.size();
  if (element.named()) {
    for (const std::string& name : *element.names) bytes += name.size();
  }
  return bytes;
}

void WriteSpec(const Element& element, uint8_t* at) {
  Put<uint32_t>(at, element.named() ? 1 : 0);
  uint8_t* component = at + 4;
  uint8_t* name = component + kSpecComponentBytes * element.components.size();
  for (size_t c = 0; c < element.components.size(); ++c, component += kSpecComponentBytes) {
    component[0] = static_cast<uint8_t>(element.components[c].dtype());
    component[1] = static_cast<uint8_t>(element.components[c].rank());
    Put<uint16_t>(component + 2, 0);
    const std::string* component_name = element.named() ? &(*element.names)[c] : nullptr;
    Put<uint32_t>(component + 4,
                  component_name == nullptr ? 0 : static_cast<uint32_t>(component_name->size()));
    if (component_name != nullptr) {
      std::memcpy(name, component_name->data(), component_name->size());
      name += component_name->size();
    }
  }
}

bool IsLarge(const Tensor& t) { return t.dtype() != DType::kString && t.ByteSize() >= kZeroCopyMinBytes; }

// Where everything of a frame goes: the head's sections, and each tensor's
// offset (row-major by element, then component).
struct FrameLayout {
  size_t spec_bytes = 0;
  std::vector<bool> uniform;  // per component: every element has its shape
  size_t shapes_start = 0;
  size_t table_start = 0;
  std::vector<uint64_t> offsets;
  size_t head_bytes = 0;
  size_t frame_bytes = 0;
};

FrameLayout Lay(const std::vector<Element>& elements, bool with_spec) {
  const Element& first = elements.front();
  const size_t components = first.components.size();
  FrameLayout layout;
  layout.spec_bytes = with_spec ? SpecBytes(first) : 0;
  layout.uniform.assign(components, true);
  for (const Element& element : elements) {
    for (size_t c = 0; c < components; ++c) {
      if (layout.uniform[c] && element.components[c].shape() != first.components[c].shape()) {
        layout.uniform[c] = false;
      }
    }
  }
  size_t cursor = Align(kHeaderBytes + layout.spec_bytes, 8);
  layout.shapes_start = cursor;
  size_t row = 0;  // table bytes per element
  for (size_t c = 0; c < components; ++c) {
    const size_t dims = 8 * static_cast<size_t>(first.components[c].rank());
    cursor += 8 + (layout.uniform[c] ? dims : 0);
    row += 8 + (layout.uniform[c] ? 0 : dims);
  }
  layout.table_start = cursor;
  cursor += row * elements.size();
  size_t large = 0;
  layout.offsets.reserve(elements.size() * components);
  for (const Element& element : elements) {
    for (const Tensor& t : element.components) {
      if (IsLarge(t)) {
        layout.offsets.push_back(large);  // from the head's end, fixed below
        large += t.ByteSize();
      } else if (t.dtype() == DType::kString) {
        cursor = Align(cursor, 8);
        layout.offsets.push_back(cursor);
        cursor += 8 * (static_cast<size_t>(t.num_elements()) + 1);
        for (const std::string& s : t.values<std::string>()) cursor += s.size();
      } else {
        cursor = Align(cursor, kSmallAlignment);
        layout.offsets.push_back(cursor);
        cursor += t.ByteSize();
      }
    }
  }
  layout.head_bytes = Align(cursor, 8);
  layout.frame_bytes = layout.head_bytes + large;
  size_t i = 0;
  for (const Element& element : elements) {
    for (const Tensor& t : element.components) {
      if (IsLarge(t)) layout.offsets[i] += layout.head_bytes;
      ++i;
    }
  }
  return layout;
}

void PutDims(const Shape& shape, uint8_t* at) {
  for (size_t d = 0; d < shape.size(); ++d) Put<int64_t>(at + 8 * d, shape[d]);
}

absl::Status FrameError(size_t offset, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed element frame at byte ", offset, ": ", what));
}

// The element count of `shape`, or nothing for a negative dimension or a
// count past 2^62.
std::optional<uint64_t> CountOf(const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) return 0;
  }
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (count > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) return std::nullopt;
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

absl::StatusOr<Tensor> ReadStrings(const HeadReader& head, uint64_t offset, const Shape& shape) {
  const std::optional<uint64_t> count = CountOf(shape);
  if (!count.has_value() || offset % 8 != 0 || !head.Fits(offset, 0) ||
      (head.size() - offset) / 8 < *count + 1) {
    return FrameError(
        offset, absl::StrCat("string tensor of shape ", ShapeDebugString(shape), " does not fit the head"));
  }
  Tensor t(DType::kString, shape);
  std::string* out = t.mutable_data<std::string>();
  const uint8_t* bounds = head.data() + offset;
  uint64_t begin = Get<uint64_t>(bounds);
  for (uint64_t i = 0; i < *count; ++i) {
    const uint64_t end = Get<uint64_t>(bounds + 8 * (i + 1));
    if (begin > end || end > head.size()) return FrameError(offset, absl::StrCat("string ", i, "'s bounds"));
    out[i].assign(reinterpret_cast<const char*>(head.data() + begin), end - begin);
    begin = end;
  }
  return t;
}

}  // namespace

uint64_t FrameSpecs::Latest() const {
  absl::MutexLock lock(&mu_);
  return specs_.empty() ? 0 : specs_.back()->id;
}

std::shared_ptr<const FrameSpec> FrameSpecs::Find(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  for (auto it = specs_.rbegin(); it != specs_.rend(); ++it) {
    if ((*it)->id == id) return *it;
  }
  return nullptr;
}

void FrameSpecs::Add(std::shared_ptr<const FrameSpec> spec) {
  absl::MutexLock lock(&mu_);
  std::erase_if(specs_, [&](const auto& known) { return known->id == spec->id; });
  specs_.push_back(std::move(spec));
  if (specs_.size() > kKept) specs_.erase(specs_.begin());
}

grpc::Slice TensorSlice(const Tensor& t) {
  return grpc::Slice(const_cast<void*>(t.raw_data()), t.ByteSize(), &ReleaseTensorBuffer,
                     new std::shared_ptr<TensorBuffer>(t.buffer()));
}

std::optional<EncodedFrame> EncodeFrame(const std::vector<Element>& elements, uint64_t reader_spec) {
  if (elements.empty()) return std::nullopt;
  const Element& first = elements.front();
  for (const Tensor& t : first.components) {
    if (t.rank() > kMaxRank) return std::nullopt;
  }
  for (const Element& element : elements) {
    if (!SameSpec(element, first)) return std::nullopt;
  }
  // The spec's bytes give its id, so they are written before deciding.
  std::vector<uint8_t> spec(SpecBytes(first));
  WriteSpec(first, spec.data());
  const uint64_t spec_id = SpecId(spec.data(), spec.size());
  const FrameLayout layout = Lay(elements, spec_id != reader_spec);

  EncodedFrame frame;
  frame.bytes = layout.frame_bytes;
  grpc::Slice head_slice(layout.head_bytes);  // uninitialized
  auto* head = const_cast<uint8_t*>(head_slice.begin());
  // Every byte up to the data is written below; gaps in the data are
  // zeroed as they are passed, so no stale heap bytes go out.
  Put<uint32_t>(head, kMagic);
  Put<uint32_t>(head + 4, static_cast<uint32_t>(elements.size()));
  Put<uint64_t>(head + 8, spec_id);
  Put<uint32_t>(head + 16, static_cast<uint32_t>(first.components.size()));
  Put<uint32_t>(head + 20, static_cast<uint32_t>(layout.spec_bytes));
  Put<uint64_t>(head + 24, layout.head_bytes);
  Put<uint64_t>(head + 32, layout.frame_bytes);
  std::memcpy(head + kHeaderBytes, spec.data(), layout.spec_bytes);
  std::memset(head + kHeaderBytes + layout.spec_bytes, 0,
              layout.shapes_start - kHeaderBytes - layout.spec_bytes);
  size_t at = layout.shapes_start;
  for (size_t c = 0; c < first.components.size(); ++c) {
    Put<uint64_t>(head + at, layout.uniform[c] ? 1 : 0);
    at += 8;
    if (layout.uniform[c]) {
      PutDims(first.components[c].shape(), head + at);
      at += 8 * first.components[c].shape().size();
    }
  }
  size_t i = 0;
  for (const Element& element : elements) {
    for (size_t c = 0; c < element.components.size(); ++c, ++i) {
      const Tensor& t = element.components[c];
      const uint64_t offset = layout.offsets[i];
      Put<uint64_t>(head + at, offset);
      at += 8;
      if (!layout.uniform[c]) {
        PutDims(t.shape(), head + at);
        at += 8 * t.shape().size();
      }
    }
  }
  // The data, after the whole table.
  size_t written = at;  // the bytes before this are written
  i = 0;
  std::vector<grpc::Slice> large;
  for (const Element& element : elements) {
    for (const Tensor& t : element.components) {
      const uint64_t offset = layout.offsets[i++];
      if (IsLarge(t)) {
        large.push_back(TensorSlice(t));
        continue;
      }
      std::memset(head + written, 0, offset - written);
      if (t.dtype() == DType::kString) {
        const size_t count = static_cast<size_t>(t.num_elements());
        uint64_t bound = offset + 8 * (count + 1);
        uint8_t* bytes = head + bound;
        Put<uint64_t>(head + offset, bound);
        size_t s = 0;
        for (const std::string& value : t.values<std::string>()) {
          std::memcpy(bytes, value.data(), value.size());
          bytes += value.size();
          bound += value.size();
          Put<uint64_t>(head + offset + 8 * ++s, bound);
        }
        written = bound;
      } else {
        std::memcpy(head + offset, t.raw_data(), t.ByteSize());
        written = offset + t.ByteSize();
      }
    }
  }
  std::memset(head + written, 0, layout.head_bytes - written);
  frame.slices.reserve(1 + large.size());
  frame.slices.push_back(std::move(head_slice));
  for (grpc::Slice& slice : large) frame.slices.push_back(std::move(slice));
  return frame;
}

absl::Status DecodeFrame(google::protobuf::io::CodedInputStream& in, size_t frame_bytes, FrameSpecs* specs,
                         std::vector<Element>* elements) {
  uint8_t header[kHeaderBytes];
  if (frame_bytes < kHeaderBytes || !in.ReadRaw(header, kHeaderBytes)) {
    return FrameError(0, absl::StrCat("the frame is ", frame_bytes, " bytes, shorter than its header"));
  }
  if (Get<uint32_t>(header) != kMagic) return FrameError(0, "not a frame (wrong magic)");
  const uint64_t count = Get<uint32_t>(header + 4);
  const uint64_t spec_id = Get<uint64_t>(header + 8);
  const size_t components = Get<uint32_t>(header + 16);
  const size_t spec_bytes = Get<uint32_t>(header + 20);
  const uint64_t head_bytes = Get<uint64_t>(header + 24);
  if (Get<uint64_t>(header + 32) != frame_bytes) {
    return FrameError(32, absl::StrCat("the header says ", Get<uint64_t>(header + 32),
                                       " bytes, the frame has ", frame_bytes));
  }
  if (head_bytes < kHeaderBytes || head_bytes > frame_bytes || spec_bytes > head_bytes - kHeaderBytes) {
    return FrameError(24, absl::StrCat("a head of ", head_bytes, " bytes with a spec of ", spec_bytes));
  }
  if (count > kMaxFrameElements) return FrameError(4, absl::StrCat(count, " elements"));
  std::shared_ptr<TensorBuffer> head_buffer;
  try {
    head_buffer = TensorBuffer::Allocate(DType::kUInt8, static_cast<int64_t>(head_bytes), /*zeroed=*/false);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate a frame's head of ", head_bytes, " bytes"));
  }
  auto* head_data = static_cast<uint8_t*>(head_buffer->data());
  std::memcpy(head_data, header, kHeaderBytes);
  if (!in.ReadRaw(head_data + kHeaderBytes, static_cast<int>(head_bytes - kHeaderBytes))) {
    return FrameError(kHeaderBytes, "the head is truncated");
  }
  const HeadReader head(head_data, head_bytes);
  std::shared_ptr<const FrameSpec> spec;
  if (spec_bytes > 0) {
    absl::StatusOr<std::shared_ptr<FrameSpec>> sent =
        ReadSpec(head_data + kHeaderBytes, spec_bytes, components, spec_id);
    if (!sent.ok()) return sent.status();
    spec = *std::move(sent);
    if (specs != nullptr) specs->Add(spec);
  } else {
    if (specs != nullptr) spec = specs->Find(spec_id);
    if (spec == nullptr) {
      return FrameError(
          8, absl::StrCat("the frame leaves out spec ", spec_id, ", which this reader was never sent"));
    }
    if (spec->dtypes.size() != components) {
      return FrameError(
          16, absl::StrCat(components, " components, where spec ", spec_id, " has ", spec->dtypes.size()));
    }
  }
  // Each component's shape where every element shares it.
  size_t at = Align(kHeaderBytes + spec_bytes, 8);
  std::vector<std::optional<Shape>> uniform(components);
  for (size_t c = 0; c < components; ++c) {
    absl::StatusOr<uint64_t> mode = head.U64(&at);
    if (!mode.ok()) return mode.status();
    if (*mode > 1) return FrameError(at - 8, absl::StrCat("component ", c, "'s shape mode is ", *mode));
    if (*mode == 1) {
      if (absl::Status s = head.Dims(&at, spec->ranks[c], &uniform[c].emplace()); !s.ok()) return s;
    }
  }
  elements->reserve(elements->size() + count);
  uint64_t next_large = head_bytes;
  Shape shape;
  for (uint64_t e = 0; e < count; ++e) {
    Element element;
    element.components.reserve(components);
    element.names = spec->names;
    for (size_t c = 0; c < components; ++c) {
      absl::StatusOr<uint64_t> offset = head.U64(&at);
      if (!offset.ok()) return offset.status();
      if (uniform[c].has_value()) {
        shape = *uniform[c];
      } else if (absl::Status s = head.Dims(&at, spec->ranks[c], &shape); !s.ok()) {
        return s;
      }
      const DType dtype = spec->dtypes[c];
      if (dtype == DType::kString) {
        absl::StatusOr<Tensor> strings = ReadStrings(head, *offset, shape);
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
      if (*offset >= head_bytes && bytes > 0) {  // large: its own buffer, in order after the head
        if (*offset != next_large || bytes > frame_bytes - next_large) {
          return FrameError(*offset, absl::StrCat("a large tensor of ", bytes,
                                                  " bytes out of place (expected at ", next_large, ")"));
        }
        Tensor t = Tensor::Uninitialized(dtype, shape);
        if (!in.ReadRaw(t.mutable_raw_data(), static_cast<int>(bytes))) {
          return FrameError(next_large, "a tensor is truncated");
        }
        next_large += bytes;
        element.components.push_back(std::move(t));
      } else if (bytes == 0) {
        element.components.push_back(Tensor::Uninitialized(dtype, shape));
      } else {
        if (*offset % size != 0 || !head.Fits(*offset, bytes)) {
          return FrameError(*offset, absl::StrCat("a tensor of ", bytes, " bytes does not fit the head"));
        }
        element.components.push_back(
            Tensor::FromBuffer(dtype, shape, head_buffer, static_cast<int64_t>(*offset / size)));
      }
    }
    elements->push_back(std::move(element));
  }
  if (next_large != frame_bytes) {
    return FrameError(next_large, absl::StrCat(frame_bytes - next_large, " bytes after the last tensor"));
  }
  return absl::OkStatus();
}

size_t ElementWireBound(const Element& element) {
  size_t bytes = 8;
  for (const Tensor& t : element.components) {
    bytes += 40 + 10 * t.shape().size();
    if (t.dtype() == DType::kString) {
      for (const std::string& s : t.values<std::string>()) bytes += s.size() + 16;
    } else {
      bytes += t.ByteSize();
    }
  }
  if (element.named()) {
    for (const std::string& name : *element.names) bytes += name.size() + 6;
  }
  return bytes;
}

}  // namespace sluice
