#include "service/element_wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/exceptions.h"
#include "common/proto_convert.h"
#include "service/compression.h"
#include "service/message_bytes.h"

namespace sluice {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;

// Protobuf wire types, and the field numbers of service.proto/tensor.proto.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;
constexpr uint32_t Tag(int field, int wire_type) { return static_cast<uint32_t>(field << 3 | wire_type); }

constexpr uint32_t kResponseElement = Tag(1, kLengthDelimited);
constexpr uint32_t kResponseEndOfSequence = Tag(2, kVarint);
constexpr uint32_t kResponseCompressedElement = Tag(3, kLengthDelimited);
constexpr uint32_t kResponseCompression = Tag(4, kVarint);
constexpr uint32_t kResponseFirstIndex = Tag(5, kVarint);
constexpr int kResponseSplitSeqs = 6;
constexpr int kResponseSplitPositions = 7;
constexpr int kResponseCompletedSplits = 8;
constexpr int kResponseCompletedSplitSizes = 10;
constexpr uint32_t kResponseSharedMemoryBytes = Tag(9, kVarint);
constexpr uint32_t kResponseSharedMemoryNeeded = Tag(12, kVarint);
constexpr uint32_t kResponseFrame = Tag(11, kLengthDelimited);
constexpr uint32_t kResponseLentTensor = Tag(13, kLengthDelimited);
constexpr uint32_t kResponseTrainerSkipped = Tag(14, kVarint);
constexpr uint32_t kResponseTaskNotHere = Tag(15, kVarint);
constexpr uint32_t kElementComponent = Tag(1, kLengthDelimited);
constexpr uint32_t kElementName = Tag(2, kLengthDelimited);
constexpr uint32_t kTensorDType = Tag(1, kVarint);
constexpr uint32_t kTensorShape = Tag(2, kLengthDelimited);
constexpr uint32_t kTensorContent = Tag(3, kLengthDelimited);
constexpr uint32_t kTensorStringValue = Tag(4, kLengthDelimited);
constexpr uint32_t kShapeDimsPacked = Tag(1, kLengthDelimited);
constexpr uint32_t kShapeDim = Tag(1, kVarint);

size_t VarintSize(uint64_t value) { return CodedOutputStream::VarintSize64(value); }
size_t LengthDelimitedSize(uint32_t tag, size_t length) {
  return VarintSize(tag) + VarintSize(length) + length;
}

size_t PackedDimsSize(const Shape& shape) {
  size_t size = 0;
  for (int64_t d : shape) size += VarintSize(static_cast<uint64_t>(d));
  return size;
}
size_t ShapeSize(const Shape& shape) {
  return shape.empty() ? 0 : LengthDelimitedSize(kShapeDimsPacked, PackedDimsSize(shape));
}
size_t TensorSize(const Tensor& t) {
  size_t size = VarintSize(kTensorDType) + VarintSize(static_cast<uint64_t>(t.dtype()));
  if (!t.shape().empty()) size += LengthDelimitedSize(kTensorShape, ShapeSize(t.shape()));
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.values<std::string>())
      size += LengthDelimitedSize(kTensorStringValue, s.size());
  } else if (t.ByteSize() > 0) {
    size += LengthDelimitedSize(kTensorContent, t.ByteSize());
  }
  return size;
}
size_t ElementSize(const Element& e) {
  size_t size = 0;
  for (const Tensor& t : e.components) size += LengthDelimitedSize(kElementComponent, TensorSize(t));
  if (e.named()) {
    for (const std::string& name : *e.names) size += LengthDelimitedSize(kElementName, name.size());
  }
  return size;
}

// Builds a ByteBuffer from header bytes (copied, in runs) and tensor bytes
// (by reference).
class SliceWriter {
 public:
  void Varint(uint64_t value) {
    uint8_t bytes[10];
    const uint8_t* end = CodedOutputStream::WriteVarint64ToArray(value, bytes);
    pending_.append(reinterpret_cast<const char*>(bytes), end - bytes);
  }
  void LengthDelimitedHeader(uint32_t tag, size_t length) {
    Varint(tag);
    Varint(length);
  }
  void Bytes(const void* data, size_t size) { pending_.append(static_cast<const char*>(data), size); }
  void TensorBytes(const Tensor& t) {
    if (t.ByteSize() < kZeroCopyMinBytes) {
      Bytes(t.raw_data(), t.ByteSize());
      return;
    }
    Flush();
    slices_.push_back(TensorSlice(t));
  }
  void Slices(std::vector<grpc::Slice> slices) {
    Flush();
    for (grpc::Slice& slice : slices) slices_.push_back(std::move(slice));
  }
  grpc::ByteBuffer Finish() {
    Flush();
    return grpc::ByteBuffer(slices_.data(), slices_.size());
  }

 private:
  void Flush() {
    if (pending_.empty()) return;
    slices_.emplace_back(pending_.data(), pending_.size());  // copies
    pending_.clear();
  }

  std::vector<grpc::Slice> slices_;
  std::string pending_;
};

void WriteTensor(const Tensor& t, SliceWriter* out) {
  out->Varint(kTensorDType);
  out->Varint(static_cast<uint64_t>(t.dtype()));
  if (!t.shape().empty()) {  // a scalar's shape is left out, as protobuf does
    out->LengthDelimitedHeader(kTensorShape, ShapeSize(t.shape()));
    out->LengthDelimitedHeader(kShapeDimsPacked, PackedDimsSize(t.shape()));
    for (int64_t d : t.shape()) out->Varint(static_cast<uint64_t>(d));
  }
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.values<std::string>()) {
      out->LengthDelimitedHeader(kTensorStringValue, s.size());
      out->Bytes(s.data(), s.size());
    }
  } else if (t.ByteSize() > 0) {
    out->LengthDelimitedHeader(kTensorContent, t.ByteSize());
    out->TensorBytes(t);
  }
}

absl::Status Malformed(const CodedInputStream& in, const std::string& what) {
  return absl::DataLossError(
      absl::StrCat("malformed GetElements response at byte ", in.CurrentPosition(), ": ", what));
}

absl::Status SkipField(CodedInputStream& in, uint32_t tag) {
  uint64_t varint = 0;
  uint32_t length = 0;
  switch (tag & 7) {
    case kVarint:
      if (in.ReadVarint64(&varint)) return absl::OkStatus();
      break;
    case kFixed64:
      if (in.Skip(8)) return absl::OkStatus();
      break;
    case kLengthDelimited:
      if (in.ReadVarint32(&length) && length <= INT_MAX && in.Skip(static_cast<int>(length)))
        return absl::OkStatus();
      break;
    case kFixed32:
      if (in.Skip(4)) return absl::OkStatus();
      break;
    default:
      return Malformed(in, absl::StrCat("unsupported wire type ", tag & 7, " of field ", tag >> 3));
  }
  return Malformed(in, absl::StrCat("field ", tag >> 3, " is truncated"));
}

// Enters a length-delimited field: its bytes become the stream's limit.
absl::Status EnterMessage(CodedInputStream& in, const char* what, CodedInputStream::Limit* limit) {
  uint32_t length = 0;
  if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(in.BytesUntilLimit())) {
    return Malformed(in, absl::StrCat(what, " is truncated"));
  }
  *limit = in.PushLimit(static_cast<int>(length));
  return absl::OkStatus();
}
absl::Status LeaveMessage(CodedInputStream& in, const char* what, CodedInputStream::Limit limit) {
  // ReadTag returns 0 at the limit, and also on a malformed tag before it.
  if (in.BytesUntilLimit() != 0) return Malformed(in, absl::StrCat("bad field in ", what));
  in.PopLimit(limit);
  return absl::OkStatus();
}

absl::Status ReadString(CodedInputStream& in, const char* what, std::string* out) {
  uint32_t length = 0;
  if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(in.BytesUntilLimit()) ||
      !in.ReadString(out, static_cast<int>(length))) {
    return Malformed(in, absl::StrCat(what, " is truncated"));
  }
  return absl::OkStatus();
}

absl::Status ReadShape(CodedInputStream& in, Shape* shape) {
  CodedInputStream::Limit limit;
  if (absl::Status s = EnterMessage(in, "a tensor shape", &limit); !s.ok()) return s;
  shape->clear();
  while (uint32_t tag = in.ReadTag()) {
    uint64_t dim = 0;
    if (tag == kShapeDim) {
      if (!in.ReadVarint64(&dim)) return Malformed(in, "a dimension is truncated");
      shape->push_back(static_cast<int64_t>(dim));
    } else if (tag == kShapeDimsPacked) {
      CodedInputStream::Limit packed;
      if (absl::Status s = EnterMessage(in, "packed dimensions", &packed); !s.ok()) return s;
      while (in.BytesUntilLimit() > 0) {
        if (!in.ReadVarint64(&dim)) return Malformed(in, "a dimension is truncated");
        shape->push_back(static_cast<int64_t>(dim));
      }
      in.PopLimit(packed);
    } else if (absl::Status s = SkipField(in, tag); !s.ok()) {
      return s;
    }
  }
  return LeaveMessage(in, "a tensor shape", limit);
}

// The small numeric tensors of one response share 64 KiB buffers: one
// allocation per chunk rather than an aligned allocation and a free per
// tensor, which were the reader's largest cost on small elements (perf:
// _int_free alone 10% of all samples, reader and worker together). A tensor
// kept alive keeps its chunk, so a reader holding one small element from a
// response holds at most 64 KiB for it.
class SmallTensorArena {
 public:
  // A tensor of `bytes` bytes in a chunk (16-byte aligned), or nothing when
  // it is large enough for a buffer of its own.
  std::optional<Tensor> Allocate(DType dtype, const Shape& shape, size_t bytes) {
    if (bytes == 0 || bytes > kMaxTensorBytes) return std::nullopt;
    size_t start = (used_ + kAlignment - 1) & ~(kAlignment - 1);
    if (chunk_ == nullptr || start + bytes > kChunkBytes) {
      chunk_ = TensorBuffer::Allocate(DType::kUInt8, kChunkBytes, /*zeroed=*/false);
      start = 0;
    }
    used_ = start + bytes;
    return Tensor::FromBuffer(dtype, shape, chunk_, static_cast<int64_t>(start / DTypeSize(dtype)));
  }

 private:
  static constexpr size_t kChunkBytes = size_t{64} << 10;
  static constexpr size_t kMaxTensorBytes = 4096;
  static constexpr size_t kAlignment = 16;
  std::shared_ptr<TensorBuffer> chunk_;
  size_t used_ = 0;
};

// A numeric tensor whose dtype (and shape, unless it is a scalar) came
// before its content, as this encoder writes them, is read straight into
// its buffer (a chunk of `arena` when small). Any other order of fields
// goes through TensorProto, whose conversion validates it.
absl::StatusOr<Tensor> ReadTensor(CodedInputStream& in, SmallTensorArena& arena) {
  CodedInputStream::Limit limit;
  if (absl::Status s = EnterMessage(in, "a tensor", &limit); !s.ok()) return s;
  proto::TensorProto slow;
  std::optional<Tensor> fast;
  Shape shape;
  while (uint32_t tag = in.ReadTag()) {
    if (tag == kTensorDType) {
      uint64_t dtype = 0;
      if (!in.ReadVarint64(&dtype)) return Malformed(in, "a dtype is truncated");
      slow.set_dtype(static_cast<proto::DataType>(dtype));
    } else if (tag == kTensorShape) {
      if (absl::Status s = ReadShape(in, &shape); !s.ok()) return s;
    } else if (tag == kTensorContent) {
      uint32_t length = 0;
      if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(in.BytesUntilLimit())) {
        return Malformed(in, "tensor content is truncated");
      }
      absl::StatusOr<DType> dtype = CheckedDType(slow.dtype());
      fast.reset();
      slow.clear_content();
      if (dtype.ok() && *dtype != DType::kString && CheckContentSize(*dtype, shape, length).ok()) {
        fast = arena.Allocate(*dtype, shape, length);
        if (!fast.has_value()) fast = Tensor::Uninitialized(*dtype, shape);
        if (length > 0 && !in.ReadRaw(fast->mutable_raw_data(), static_cast<int>(length))) {
          return Malformed(in, "tensor content is truncated");
        }
      } else if (!in.ReadString(slow.mutable_content(), static_cast<int>(length))) {
        return Malformed(in, "tensor content is truncated");
      }
    } else if (tag == kTensorStringValue) {
      if (absl::Status s = ReadString(in, "a string value", slow.add_string_values()); !s.ok()) return s;
    } else if (absl::Status s = SkipField(in, tag); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = LeaveMessage(in, "a tensor", limit); !s.ok()) return s;
  if (fast.has_value()) {
    // Still right if no dtype or shape came after the content.
    if (static_cast<int>(fast->dtype()) == slow.dtype() && fast->shape() == shape) return *std::move(fast);
    slow.set_content(static_cast<const char*>(fast->raw_data()), fast->ByteSize());
  }
  for (int64_t d : shape) slow.mutable_shape()->add_dims(d);
  return TensorFromProto(slow);
}

absl::Status ReadElement(CodedInputStream& in, SmallTensorArena& arena, Element* element) {
  CodedInputStream::Limit limit;
  if (absl::Status s = EnterMessage(in, "an element", &limit); !s.ok()) return s;
  std::vector<std::string> names;
  while (uint32_t tag = in.ReadTag()) {
    if (tag == kElementComponent) {
      absl::StatusOr<Tensor> tensor = ReadTensor(in, arena);
      if (!tensor.ok()) return tensor.status();
      element->components.push_back(*std::move(tensor));
    } else if (tag == kElementName) {
      if (absl::Status s = ReadString(in, "a component name", &names.emplace_back()); !s.ok()) return s;
    } else if (absl::Status s = SkipField(in, tag); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = LeaveMessage(in, "an element", limit); !s.ok()) return s;
  if (!names.empty() && names.size() != element->components.size()) {
    return absl::InvalidArgumentError(absl::StrCat("element proto has ", element->components.size(),
                                                   " components but ", names.size(), " names"));
  }
  element->names = MakeNames(std::move(names));
  return absl::OkStatus();
}

// The fields besides the elements, on the proto path.
void SetResponseFields(bool end_of_sequence, int64_t first_index, const SplitTags& tags,
                       int64_t trainer_skipped, proto::GetElementsResponse* response) {
  response->set_end_of_sequence(end_of_sequence);
  response->set_first_index(first_index);
  response->set_trainer_skipped(trainer_skipped);
  response->mutable_split_seqs()->Add(tags.split_seqs.begin(), tags.split_seqs.end());
  response->mutable_split_positions()->Add(tags.split_positions.begin(), tags.split_positions.end());
  response->mutable_completed_splits()->Add(tags.completed_splits.begin(), tags.completed_splits.end());
  response->mutable_completed_split_sizes()->Add(tags.completed_split_sizes.begin(),
                                                 tags.completed_split_sizes.end());
}

}  // namespace

absl::StatusOr<grpc::ByteBuffer> EncodeElementsResponse(const std::vector<Element>& elements,
                                                        bool end_of_sequence, int64_t first_index,
                                                        proto::WireCompression compression,
                                                        const SplitTags& tags,
                                                        const FrameRequest& frame_request,
                                                        int64_t trainer_skipped) {
  std::optional<EncodedFrame> frame;
  // The frame is the message's first field.
  if (frame_request.frame) {
    frame = EncodeFrame(elements, frame_request.reader_spec, CodedOutputStream::VarintSize32(kResponseFrame));
  }
  if (frame.has_value() && compression != proto::COMPRESSION_NONE) {
    // Compressed as a whole: the frame's bytes in one run first.
    std::string flat;
    flat.reserve(frame->bytes);
    for (const grpc::Slice& slice : frame->slices)
      flat.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    proto::GetElementsResponse response;
    response.set_compression(compression);
    if (absl::Status s = Compress(compression, flat, response.mutable_frame()); !s.ok()) return s;
    SetResponseFields(end_of_sequence, first_index, tags, trainer_skipped, &response);
    return SerializeToByteBuffer(response);
  }
  if (compression != proto::COMPRESSION_NONE) {
    proto::GetElementsResponse response;
    response.set_compression(compression);
    SetResponseFields(end_of_sequence, first_index, tags, trainer_skipped, &response);
    proto::ElementProto encoded;
    for (const Element& element : elements) {
      ElementToProto(element, &encoded);
      if (absl::Status s =
              Compress(compression, encoded.SerializeAsString(), response.add_compressed_elements());
          !s.ok()) {
        return s;
      }
    }
    return SerializeToByteBuffer(response);
  }
  SliceWriter out;
  if (frame.has_value()) {
    out.LengthDelimitedHeader(kResponseFrame, frame->bytes);
    out.Slices(std::move(frame->slices));
  }
  const std::vector<Element> none;
  for (const Element& element : frame.has_value() ? none : elements) {
    out.LengthDelimitedHeader(kResponseElement, ElementSize(element));
    for (const Tensor& t : element.components) {
      out.LengthDelimitedHeader(kElementComponent, TensorSize(t));
      WriteTensor(t, &out);
    }
    if (element.named()) {
      for (const std::string& name : *element.names) {
        out.LengthDelimitedHeader(kElementName, name.size());
        out.Bytes(name.data(), name.size());
      }
    }
  }
  if (end_of_sequence) {
    out.Varint(kResponseEndOfSequence);
    out.Varint(1);
  }
  if (first_index != 0) {
    out.Varint(kResponseFirstIndex);
    out.Varint(static_cast<uint64_t>(first_index));
  }
  if (trainer_skipped != 0) {
    out.Varint(kResponseTrainerSkipped);
    out.Varint(static_cast<uint64_t>(trainer_skipped));
  }
  // Packed, as proto3 writes repeated integers.
  auto packed = [&out](int field, const std::vector<int64_t>& values) {
    if (values.empty()) return;
    size_t bytes = 0;
    for (int64_t v : values) bytes += CodedOutputStream::VarintSize64(static_cast<uint64_t>(v));
    out.LengthDelimitedHeader(Tag(field, kLengthDelimited), bytes);
    for (int64_t v : values) out.Varint(static_cast<uint64_t>(v));
  };
  packed(kResponseSplitSeqs, tags.split_seqs);
  packed(kResponseSplitPositions, tags.split_positions);
  packed(kResponseCompletedSplits, tags.completed_splits);
  packed(kResponseCompletedSplitSizes, tags.completed_split_sizes);
  return out.Finish();
}

namespace {

std::vector<int64_t>* TagList(uint32_t field, SplitTags* tags) {
  if (field == kResponseSplitSeqs) return &tags->split_seqs;
  if (field == kResponseSplitPositions) return &tags->split_positions;
  if (field == kResponseCompletedSplits) return &tags->completed_splits;
  if (field == kResponseCompletedSplitSizes) return &tags->completed_split_sizes;
  return nullptr;
}

// A repeated integer field, packed or not.
absl::Status ReadIntegers(CodedInputStream& in, uint32_t tag, std::vector<int64_t>* values) {
  uint64_t value = 0;
  if ((tag & 7) == kVarint) {
    if (!in.ReadVarint64(&value)) return Malformed(in, "a split tag is truncated");
    values->push_back(static_cast<int64_t>(value));
    return absl::OkStatus();
  }
  uint32_t length = 0;
  if ((tag & 7) != kLengthDelimited || !in.ReadVarint32(&length)) return Malformed(in, "bad split tags");
  const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
  while (in.BytesUntilLimit() > 0) {
    if (!in.ReadVarint64(&value)) return Malformed(in, "a split tag is truncated");
    values->push_back(static_cast<int64_t>(value));
  }
  in.PopLimit(limit);
  return absl::OkStatus();
}

// A frame field: read in place, or decompressed first (the encoder writes
// `compression` before it). `decompressed` counts what the response's
// frames decompressed to: together they stay under kMaxDecompressedBytes.
absl::Status ReadFrame(CodedInputStream& in, proto::WireCompression compression, FrameSpecs* specs,
                       const std::shared_ptr<const void>& in_place, std::vector<Element>* elements,
                       size_t* decompressed) {
  uint32_t length = 0;
  if (!in.ReadVarint32(&length) || length > static_cast<uint32_t>(in.BytesUntilLimit())) {
    return Malformed(in, "the frame is truncated");
  }
  if (compression == proto::COMPRESSION_NONE) {
    const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
    if (absl::Status s = DecodeFrame(in, length, specs, elements, in_place); !s.ok()) return s;
    return LeaveMessage(in, "the frame", limit);
  }
  std::string compressed;
  std::string frame;
  if (!in.ReadString(&compressed, static_cast<int>(length))) return Malformed(in, "the frame is truncated");
  const absl::Status s = Decompress(compression, compressed, &frame, kMaxDecompressedBytes - *decompressed);
  if (!s.ok()) return s;
  *decompressed += frame.size();
  if (frame.size() > static_cast<size_t>(INT_MAX))
    return absl::DataLossError("a decompressed frame is over 2 GiB");
  CodedInputStream frame_in(reinterpret_cast<const uint8_t*>(frame.data()), static_cast<int>(frame.size()));
  return DecodeFrame(frame_in, frame.size(), specs, elements);
}

absl::Status DecodeResponse(grpc::ByteBuffer* buffer, ElementsResponse* response, FrameSpecs* specs,
                            const std::shared_ptr<const void>& in_place) {
  std::vector<Element>* elements = &response->elements;
  bool* end_of_sequence = &response->end_of_sequence;
  if (buffer->Length() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("GetElements response of ", buffer->Length(),
                                                   " bytes is over the 2 GiB a message may have"));
  }
  grpc::ProtoBufferReader reader(buffer);
  if (!reader.status().ok()) return absl::DataLossError("cannot read the GetElements response's bytes");
  CodedInputStream in(&reader);
  in.SetTotalBytesLimit(INT_MAX);
  const CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(buffer->Length()));
  proto::GetElementsResponse compressed;
  *end_of_sequence = false;
  SmallTensorArena arena;
  size_t decompressed = 0;
  while (uint32_t tag = in.ReadTag()) {
    uint64_t value = 0;
    if (tag == kResponseElement) {
      Element element;
      if (absl::Status s = ReadElement(in, arena, &element); !s.ok()) return s;
      elements->push_back(std::move(element));
    } else if (tag == kResponseEndOfSequence) {
      if (!in.ReadVarint64(&value)) return Malformed(in, "end_of_sequence is truncated");
      *end_of_sequence = value != 0;
    } else if (tag == kResponseFrame) {
      if (absl::Status s = ReadFrame(in, compressed.compression(), specs, in_place, elements, &decompressed);
          !s.ok()) {
        return s;
      }
      response->frame = true;
    } else if (tag == kResponseCompressedElement) {
      if (absl::Status s = ReadString(in, "a compressed element", compressed.add_compressed_elements());
          !s.ok()) {
        return s;
      }
    } else if (tag == kResponseCompression) {
      if (!in.ReadVarint64(&value)) return Malformed(in, "compression is truncated");
      compressed.set_compression(static_cast<proto::WireCompression>(value));
    } else if (tag == kResponseFirstIndex) {
      if (!in.ReadVarint64(&value)) return Malformed(in, "first_index is truncated");
      response->first_index = static_cast<int64_t>(value);
    } else if (tag == kResponseTrainerSkipped) {
      if (!in.ReadVarint64(&value)) return Malformed(in, "trainer_skipped is truncated");
      response->trainer_skipped = static_cast<int64_t>(value);
    } else if (tag == kResponseSharedMemoryBytes) {
      if (!in.ReadVarint64(&value)) return Malformed(in, "shared_memory_bytes is truncated");
      response->shared_memory_bytes = static_cast<int64_t>(value);
    } else if (tag == kResponseLentTensor) {
      std::string bytes;
      if (absl::Status s = ReadString(in, "a lent tensor", &bytes); !s.ok()) return s;
      if (!response->lent_tensors.emplace_back().ParseFromString(bytes))
        return Malformed(in, "a lent tensor");
    } else if (tag == kResponseTaskNotHere) {
      if (!in.ReadVarint64(&value)) return Malformed(in, "task_not_here is truncated");
      response->task_not_here = value != 0;
    } else if (tag == kResponseSharedMemoryNeeded) {
      if (!in.ReadVarint64(&value)) return Malformed(in, "shared_memory_needed is truncated");
      response->shared_memory_needed = static_cast<int64_t>(value);
    } else if (std::vector<int64_t>* tags = TagList(tag >> 3, &response->tags); tags != nullptr) {
      if (absl::Status s = ReadIntegers(in, tag, tags); !s.ok()) return s;
    } else if (absl::Status s = SkipField(in, tag); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = LeaveMessage(in, "the response", limit); !s.ok()) return s;
  if (absl::Status s = DecodeElements(compressed, elements, kMaxDecompressedBytes - decompressed); !s.ok())
    return s;
  const size_t tagged = response->tags.split_seqs.size();
  if (tagged != response->tags.split_positions.size() || (tagged != 0 && tagged != elements->size())) {
    return absl::DataLossError(absl::StrCat("GetElements response: ", elements->size(), " elements but ",
                                            tagged, " split tags and ", response->tags.split_positions.size(),
                                            " positions"));
  }
  const size_t sizes = response->tags.completed_split_sizes.size();
  if (sizes != 0 && sizes != response->tags.completed_splits.size()) {
    return absl::DataLossError(absl::StrCat("GetElements response: ", response->tags.completed_splits.size(),
                                            " completed splits but ", sizes, " sizes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeElementsResponse(grpc::ByteBuffer* buffer, ElementsResponse* response, FrameSpecs* specs,
                                    const std::shared_ptr<const void>& in_place) {
  // Sizes are checked before they are allocated; this is the backstop for
  // an allocation that fails anyway: a reader's thread must not throw.
  try {
    return DecodeResponse(buffer, response, specs, in_place);
  } catch (...) {
    return StatusFromCurrentException(
        absl::StrCat("decoding a GetElements response of ", buffer->Length(), " bytes"));
  }
}

}  // namespace sluice
