#include "service/compression.h"

#include <snappy.h>
#include <zstd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// zstd's level 1: its fastest regular level, for a data plane that must
// keep up with training.
constexpr int kZstdLevel = 1;

}  // namespace

absl::StatusOr<proto::WireCompression> ParseWireCompression(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower.empty() || lower == "none") return proto::COMPRESSION_NONE;
  if (lower == "snappy") return proto::COMPRESSION_SNAPPY;
  if (lower == "zstd") return proto::COMPRESSION_ZSTD;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compression '", name, "' (valid: none, snappy, zstd)"));
}

const char* WireCompressionName(proto::WireCompression compression) {
  switch (compression) {
    case proto::COMPRESSION_SNAPPY:
      return "snappy";
    case proto::COMPRESSION_ZSTD:
      return "zstd";
    default:
      return "none";
  }
}

absl::Status Compress(proto::WireCompression compression, std::string_view input, std::string* output) {
  switch (compression) {
    case proto::COMPRESSION_SNAPPY:
      snappy::Compress(input.data(), input.size(), output);
      return absl::OkStatus();
    case proto::COMPRESSION_ZSTD: {
      output->resize(ZSTD_compressBound(input.size()));
      const size_t size =
          ZSTD_compress(output->data(), output->size(), input.data(), input.size(), kZstdLevel);
      if (ZSTD_isError(size)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(size)));
      output->resize(size);
      return absl::OkStatus();
    }
    default:
      output->assign(input);
      return absl::OkStatus();
  }
}

absl::Status Decompress(proto::WireCompression compression, std::string_view input, std::string* output,
                        size_t max_output) {
  // The size the input declares is checked before anything is allocated:
  // a few bytes may declare terabytes.
  auto too_large = [&](uint64_t declared) {
    return absl::DataLossError(absl::StrCat(WireCompressionName(compression), " data declares ", declared,
                                            " bytes decompressed, more than the ", max_output, " allowed"));
  };
  switch (compression) {
    case proto::COMPRESSION_SNAPPY: {
      size_t size = 0;
      if (!snappy::GetUncompressedLength(input.data(), input.size(), &size)) {
        return absl::DataLossError("corrupt snappy data in an element");
      }
      if (size > max_output) return too_large(size);
      if (!snappy::Uncompress(input.data(), input.size(), output)) {
        return absl::DataLossError("corrupt snappy data in an element");
      }
      return absl::OkStatus();
    }
    case proto::COMPRESSION_ZSTD: {
      const unsigned long long size = ZSTD_getFrameContentSize(input.data(), input.size());
      if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
        return absl::DataLossError("corrupt zstd data in an element");
      }
      if (size > max_output) return too_large(size);
      output->resize(size);
      const size_t got = ZSTD_decompress(output->data(), output->size(), input.data(), input.size());
      if (ZSTD_isError(got) || got != size) return absl::DataLossError("corrupt zstd data in an element");
      return absl::OkStatus();
    }
    default:
      output->assign(input);
      return absl::OkStatus();
  }
}

}  // namespace sluice
