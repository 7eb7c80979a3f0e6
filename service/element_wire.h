// The GetElements response on the wire, encoded and decoded without the
// intermediate copies that going through proto::GetElementsResponse costs.
//
// The bytes are exactly a serialized proto::GetElementsResponse, so any
// protobuf reader understands them, but:
//  - encoding writes the message headers itself and hands gRPC each large
//    tensor's bytes by reference (a slice that holds the tensor's buffer),
//    so the worker never copies tensor data: the kernel reads it from the
//    pipeline's own buffer;
//  - decoding reads straight from gRPC's received slices into each tensor's
//    final buffer: one copy, where parsing into the proto and converting
//    would take two.
// Compressed elements (compression other than none) still go through the
// proto; their bytes are small after compression and copied anyway.
// A reader that asks for flat frames (GetElementsRequest.frame) gets every
// element in one (service/element_frame.h), compressed as a whole.
#ifndef SLUICE_SERVICE_ELEMENT_WIRE_H_
#define SLUICE_SERVICE_ELEMENT_WIRE_H_

#include <grpcpp/support/byte_buffer.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/compression.h"
#include "service/element_frame.h"
#include "sluice/element.h"
#include "sluice/proto/service.pb.h"

namespace sluice {

// Elements as a serialized GetElementsResponse. With a compression other
// than none, each element is serialized and compressed (so the bytes are
// copied); fails only if compressing does.
// exactly_once's tags: each element's split and position in it, and the
// splits now wholly sent. Empty otherwise.
struct SplitTags {
  std::vector<int64_t> split_seqs;
  std::vector<int64_t> split_positions;
  std::vector<int64_t> completed_splits;
  // How many elements each completed split produced (empty from a worker
  // that predates it).
  std::vector<int64_t> completed_split_sizes;
  bool operator==(const SplitTags&) const = default;
};

// A decoded response.
struct ElementsResponse {
  std::vector<Element> elements;
  bool end_of_sequence = false;
  int64_t first_index = 0;
  SplitTags tags;
  // Set alone: the response lies in the request's shared-memory region,
  // these many bytes of it (service/shared_memory.h).
  int64_t shared_memory_bytes = 0;
  // Set alone: the next element needs a shared-memory region this large.
  int64_t shared_memory_needed = 0;
  // With shared_memory_bytes: tensors the worker lent in place of their
  // bytes (client/read/shared_memory_transport.cc puts them in).
  std::vector<proto::LentTensor> lent_tensors;
  // The elements came as a flat frame, not as protos.
  bool frame = false;
  // A cross-trainer cache task: elements the trainer skipped just before
  // these (GetElementsResponse.trainer_skipped).
  int64_t trainer_skipped = 0;
  // Set alone: the worker has no such task (GetElementsResponse.task_not_here).
  bool task_not_here = false;
};

// What the request said of frames: whether the reader decodes them, and
// the spec it already has.
struct FrameRequest {
  bool frame = false;
  uint64_t reader_spec = 0;
};

absl::StatusOr<grpc::ByteBuffer> EncodeElementsResponse(const std::vector<Element>& elements,
                                                        bool end_of_sequence, int64_t first_index,
                                                        proto::WireCompression compression,
                                                        const SplitTags& tags = {},
                                                        const FrameRequest& frame = {},
                                                        int64_t trainer_skipped = 0);

// Decodes a serialized GetElementsResponse, compressed or not, with its
// elements as protos or as a frame (whose spec, when left out, is found in
// `specs`). Malformed bytes are DataLoss or InvalidArgument naming what is
// wrong, never a crash; so is a response whose compressed parts together
// decompress past kMaxDecompressedBytes, and a failed allocation is
// ResourceExhausted. An already parsed response: DecodeElements
// (service/compression.h). `in_place`: the buffer's bytes stay put while it
// lives, so a frame's large tensors may be views of them (DecodeFrame).
absl::Status DecodeElementsResponse(grpc::ByteBuffer* buffer, ElementsResponse* response,
                                    FrameSpecs* specs = nullptr,
                                    const std::shared_ptr<const void>& in_place = nullptr);

}  // namespace sluice

#endif  // SLUICE_SERVICE_ELEMENT_WIRE_H_
