#include "service/element_frame.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "service/element_frame_format.h"

namespace sluice {
namespace {

using frame_format::Align;
using frame_format::kHeaderBytes;
using frame_format::kMagic;
using frame_format::kMaxRank;
using frame_format::kSmallAlignment;
using frame_format::kSpecComponentBytes;
using frame_format::Put;
using frame_format::SpecId;

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

size_t VarintBytes(uint64_t value) {
  size_t bytes = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++bytes;
  }
  return bytes;
}

FrameLayout Lay(const std::vector<Element>& elements, bool with_spec, size_t tag_bytes) {
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
  // The first large tensor 64-byte aligned from the message's start (its
  // tag, the frame's length, the head); padding may lengthen the length.
  while (large > 0) {
    const size_t before = tag_bytes + VarintBytes(layout.head_bytes + large) + layout.head_bytes;
    if (before % kBufferAlignment == 0) break;
    layout.head_bytes += kBufferAlignment - before % kBufferAlignment;
  }
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
  // Never evicted: a request in flight may have named any kept spec. Past
  // kKept, new specs are not kept, and frames of them carry them.
  for (const auto& known : specs_) {
    if (known->id == spec->id) return;
  }
  if (specs_.size() < kKept) specs_.push_back(std::move(spec));
}

grpc::Slice TensorSlice(const Tensor& t) {
  return grpc::Slice(const_cast<void*>(t.raw_data()), t.ByteSize(), &ReleaseTensorBuffer,
                     new std::shared_ptr<TensorBuffer>(t.buffer()));
}

std::optional<EncodedFrame> EncodeFrame(const std::vector<Element>& elements, uint64_t reader_spec,
                                        size_t tag_bytes) {
  if (elements.empty()) return std::nullopt;
  const Element& first = elements.front();
  for (const Tensor& t : first.components) {
    if (t.rank() > kMaxRank) return std::nullopt;
  }
  if (first.named() && first.names->size() != first.components.size()) return std::nullopt;
  for (const Element& element : elements) {
    if (!SameSpec(element, first)) return std::nullopt;
  }
  // The spec's bytes give its id, so they are written before deciding.
  std::vector<uint8_t> spec(SpecBytes(first));
  WriteSpec(first, spec.data());
  const uint64_t spec_id = SpecId(spec.data(), spec.size());
  const FrameLayout layout = Lay(elements, spec_id != reader_spec, tag_bytes);

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
      } else if (t.ByteSize() > 0) {
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

size_t ElementWireBound(const Element& element) {
  size_t bytes = 8;
  for (const Tensor& t : element.components) {
    bytes += 40 + 10 * t.shape().size();
    if (t.dtype() == DType::kString) {
      // A frame's bound and bytes, or a proto's tag and length (up to 6).
      for (const std::string& s : t.values<std::string>()) bytes += s.size() + 8;
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
