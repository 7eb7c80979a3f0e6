#include "service/message_bytes.h"

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// Protobuf's default parse depth, which gRPC uses.
constexpr int kProtobufDepthLimit = 100;

}  // namespace

grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

bool ParseFromByteBuffer(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* message) {
  grpc::ByteBuffer shared(buffer);  // shares the slices; the reader needs a mutable one
  grpc::ProtoBufferReader reader(&shared);
  return reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
}

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, absl::string_view rpc,
                          google::protobuf::MessageLite* request) {
  if (ParseFromByteBuffer(bytes, request)) return absl::OkStatus();
  // Again without the depth limit (but bounded, for the stack), to tell
  // nesting from malformed bytes.
  grpc::ByteBuffer shared(bytes);
  grpc::ProtoBufferReader reader(&shared);
  google::protobuf::io::CodedInputStream coded(&reader);
  coded.SetRecursionLimit(100 * kProtobufDepthLimit);
  if (reader.status().ok() && request->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage()) {
    request->Clear();
    return absl::InvalidArgumentError(absl::StrCat(
        rpc, ": the request nests messages deeper than protobuf's limit of ", kProtobufDepthLimit,
        " (zip or interleave pipelines inside each other add three levels each): nest fewer pipelines"));
  }
  request->Clear();
  return absl::InvalidArgumentError(
      absl::StrCat(rpc, ": the request does not parse as a ", request->GetTypeName(),
                   " (malformed bytes, a string field that is not UTF-8, or nesting past ",
                   100 * kProtobufDepthLimit, " levels)"));
}

}  // namespace sluice
