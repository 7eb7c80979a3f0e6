// The flat frame: every element of a GetElements response in one run of
// bytes, so that the reader makes tensors that point into one buffer, with
// no per-element protobuf and no decode pass (docs/design.md, "The data
// plane's bytes").
//
// A frame is a head, then the large tensors' bytes:
//  - the head: a fixed header (element count, spec id, sizes), the spec
//    (each component's dtype and rank, and the names) unless the reader
//    already has it, each component's shape when every element shares it,
//    a table of one offset per element and component (plus the shape where
//    it varies), then the data: small numeric tensors 16-byte aligned, and
//    strings as an array of bounds into the head's bytes;
//  - numeric tensors of kZeroCopyMinBytes or more, in table order, each
//    sent by reference to the tensor's own buffer.
// Integers are little-endian. The reader copies the head into one aligned
// buffer that the small tensors share, and each large tensor into a buffer
// of its own, so that keeping one large element does not keep a response.
#ifndef SLUICE_SERVICE_ELEMENT_FRAME_H_
#define SLUICE_SERVICE_ELEMENT_FRAME_H_

#include <grpcpp/support/slice.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "sluice/element.h"

namespace google::protobuf::io {
class CodedInputStream;
}

namespace sluice {

// Numeric tensors at least this large go by reference; smaller ones are
// copied into the response, which is cheaper than a slice each.
inline constexpr size_t kZeroCopyMinBytes = 4096;

// What a frame's elements share: each component's dtype and rank, and the
// names. Its id is a hash of its bytes, never 0.
struct FrameSpec {
  uint64_t id = 0;
  std::vector<DType> dtypes;
  std::vector<int> ranks;
  ComponentNames names;  // null for a plain tuple
};

// The specs a reader has been sent for one task. Responses decode on
// several threads at once, so it locks. It keeps the first kKept and never
// drops one, so a request that named a spec always finds it.
class FrameSpecs {
 public:
  // The id a request names, so that the worker leaves that spec out (0
  // while there is none): the newest kept.
  uint64_t Latest() const;
  std::shared_ptr<const FrameSpec> Find(uint64_t id) const;
  void Add(std::shared_ptr<const FrameSpec> spec);

 private:
  static constexpr size_t kKept = 8;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<const FrameSpec>> specs_ ABSL_GUARDED_BY(mu_);  // newest last
};

// A frame: the head as one slice, then each large tensor's by reference
// (a slice that keeps the tensor's buffer until gRPC has sent it).
struct EncodedFrame {
  std::vector<grpc::Slice> slices;
  size_t bytes = 0;
};

// A slice of `t`'s bytes that keeps its buffer until gRPC has sent it.
grpc::Slice TensorSlice(const Tensor& t);

// `elements` (one or more) as a frame, leaving the spec out when its id is
// `reader_spec`. Nothing when the elements do not share one spec, which a
// frame needs (the response then goes as protos). The frame's message has
// `tag_bytes` before the frame's length: the head is padded so that the first
// large tensor lies 64-byte aligned from the message's start, where a
// shared-memory reader can keep it in place.
std::optional<EncodedFrame> EncodeFrame(const std::vector<Element>& elements, uint64_t reader_spec,
                                        size_t tag_bytes = 0);

// Reads a frame of `frame_bytes` bytes from `in` and appends its elements.
// A spec it carries is added to `specs`; one it leaves out is looked up
// there (`specs` may be null when the request named none). Malformed bytes
// are DataLoss naming the offset and what is wrong, never a crash, and
// nothing is allocated past the frame's own size. With `in_place`, the bytes
// `in` reads stay where they are for as long as `in_place` lives: a large
// tensor that lies whole and 64-byte aligned there becomes a view of them
// (keeping `in_place`), not a copy.
absl::Status DecodeFrame(google::protobuf::io::CodedInputStream& in, size_t frame_bytes, FrameSpecs* specs,
                         std::vector<Element>* elements,
                         const std::shared_ptr<const void>& in_place = nullptr);

// At least the bytes `element` takes in a response, as a frame or as an
// ElementProto, for keeping responses under gRPC's message limit; a frame
// adds a fixed part per response (its header, spec and shared shapes: a few
// hundred bytes), which the limit's 4 MiB of headroom covers. Cheap: the
// worker calls it per element.
size_t ElementWireBound(const Element& element);

}  // namespace sluice

#endif  // SLUICE_SERVICE_ELEMENT_FRAME_H_
