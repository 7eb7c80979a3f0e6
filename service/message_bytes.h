// Any RPC's message as the bytes gRPC hands over, and back: both daemons'
// adapters take requests as bytes and parse them here, so that what
// protobuf cannot parse gets a message that says why.
#ifndef SLUICE_SERVICE_MESSAGE_BYTES_H_
#define SLUICE_SERVICE_MESSAGE_BYTES_H_

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// Any message as a ByteBuffer (one copy), and back.
grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& message);
bool ParseFromByteBuffer(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* message);

// Parses a request that gRPC handed over as bytes, so that one protobuf
// cannot parse is InvalidArgument saying why, not gRPC's INTERNAL with an
// empty message: nested past protobuf's 100-message limit (a definition
// with about 30 zips or interleaves inside each other), or malformed (a
// string that is not UTF-8).
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, absl::string_view rpc,
                          google::protobuf::MessageLite* request);

}  // namespace sluice

#endif  // SLUICE_SERVICE_MESSAGE_BYTES_H_
