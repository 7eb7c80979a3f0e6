// Compression of elements on the wire: none, snappy or zstd, from Debian's
// libsnappy and libzstd. Snappy costs little CPU for a modest ratio; zstd
// compresses better for links slower than the CPU.
#ifndef SLUICE_SERVICE_COMPRESSION_H_
#define SLUICE_SERVICE_COMPRESSION_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "service/grpc_util.h"
#include "sluice/service.pb.h"

namespace sluice {

// "" / "none", "snappy", "zstd" (any case); anything else is
// InvalidArgument naming the valid ones.
absl::StatusOr<proto::WireCompression> ParseWireCompression(const std::string& name);
const char* WireCompressionName(proto::WireCompression compression);

// The most bytes a decompression may produce: gRPC's message limit, which
// no element or frame can be past.
inline constexpr size_t kMaxDecompressedBytes = static_cast<size_t>(kMaxMessageBytes);

absl::Status Compress(proto::WireCompression compression, std::string_view input, std::string* output);
// DataLoss when the input is not valid compressed data, or would
// decompress to more than `max_output` bytes (checked before allocating).
absl::Status Decompress(proto::WireCompression compression, std::string_view input, std::string* output,
                        size_t max_output = kMaxDecompressedBytes);

}  // namespace sluice

#endif  // SLUICE_SERVICE_COMPRESSION_H_
