// The messages between a worker and the Python processes of its pool
// (python/sluice/_worker_host.py): a frame is an 8-byte little-endian
// length, a JSON header of that length, then the header's payload_bytes of
// raw tensor bytes. Tensor bytes are copied as they lie, never pickled.
#ifndef SLUICE_PIPELINE_PYTHON_WIRE_H_
#define SLUICE_PIPELINE_PYTHON_WIRE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/element.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

// A frame to send: its header (JSON) and the payload's pieces, which point
// into the element's tensors (keep it alive until sent).
struct PythonFrame {
  std::string header;
  std::vector<std::pair<const char*, size_t>> payload;
};

// The call of function `fn` ("module.name") on `element`, with `args` (a
// JSON object) and the element's seed; with `state_components` > 0 (scan),
// as fn(state, element), the state being that many first components.
PythonFrame EncodePythonCall(const std::string& fn, const std::string& args_json, uint64_t seed,
                             const Element& element, int64_t state_components = 0);

// A function's arguments as a JSON object.
std::string FunctionArgsToJson(const google::protobuf::Map<std::string, proto::AttrValue>& args);

// What a reply header says: the element, or the Python exception (type,
// message, the last frames of its traceback) as InvalidArgument naming
// `what` ("py:augment.crop"). A malformed reply is Internal.
absl::StatusOr<Element> DecodePythonReply(const std::string& header, std::string_view payload,
                                          const std::string& what);

// Where a frame's payload is: its size, and whether it lies in the
// process's shared memory (the header's "shm") rather than on the socket.
struct PayloadPlace {
  uint64_t bytes = 0;
  bool shared = false;
};
// Internal for a header that is not a JSON object.
absl::StatusOr<PayloadPlace> PayloadOf(const std::string& header);

// The Python error a header reports ("ValueError: message"), or "" when
// it reports success.
std::string PythonErrorOf(const std::string& header);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_PYTHON_WIRE_H_
