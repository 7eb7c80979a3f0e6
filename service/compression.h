// Compression of elements on the wire: none, snappy or zstd, from Debian's
// libsnappy and libzstd. Snappy costs little CPU for a modest ratio; zstd
// compresses better for links slower than the CPU. Decompressing is bounded
// by the sizes the data declares, checked before anything is allocated.
#ifndef SLUICE_SERVICE_COMPRESSION_H_
#define SLUICE_SERVICE_COMPRESSION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/grpc_util.h"
#include "sluice/element.h"
#include "sluice/proto/service.pb.h"

namespace sluice {

// "" / "none", "snappy", "zstd" (any case); anything else is
// InvalidArgument naming the valid ones.
absl::StatusOr<proto::WireCompression> ParseWireCompression(const std::string& name);
const char* WireCompressionName(proto::WireCompression compression);

// The most bytes a decompression may produce: gRPC's message limit, which
// no element or frame can be past.
inline constexpr size_t kMaxDecompressedBytes = static_cast<size_t>(kMaxMessageBytes);

absl::Status Compress(proto::WireCompression compression, std::string_view input, std::string* output);
// The bytes `input` declares it decompresses to, read from its header alone
// (input.size() for none), so that a caller can bound the total of several
// before decompressing any; DataLoss when the header is not valid.
absl::StatusOr<uint64_t> DecompressedSize(proto::WireCompression compression, std::string_view input);
// DataLoss when the input is not valid compressed data, or would
// decompress to more than `max_output` bytes (checked before allocating).
absl::Status Decompress(proto::WireCompression compression, std::string_view input, std::string* output,
                        size_t max_output = kMaxDecompressedBytes);

// The elements of an already parsed GetElementsResponse (the compressed
// path of service/element_wire.h, and tests), appended to `elements`.
// DataLoss, before anything is decompressed, when its compressed elements
// together declare more than `max_decompressed` bytes.
absl::Status DecodeElements(const proto::GetElementsResponse& response, std::vector<Element>* elements,
                            size_t max_decompressed = kMaxDecompressedBytes);

}  // namespace sluice

#endif  // SLUICE_SERVICE_COMPRESSION_H_
