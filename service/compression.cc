#include "service/compression.h"

#include <snappy.h>
#include <zstd.h>

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"

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

absl::StatusOr<uint64_t> DecompressedSize(proto::WireCompression compression, std::string_view input) {
  switch (compression) {
    case proto::COMPRESSION_SNAPPY: {
      size_t size = 0;
      if (!snappy::GetUncompressedLength(input.data(), input.size(), &size)) {
        return absl::DataLossError("corrupt snappy data in an element");
      }
      return size;
    }
    case proto::COMPRESSION_ZSTD: {
      const unsigned long long size = ZSTD_getFrameContentSize(input.data(), input.size());
      if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
        return absl::DataLossError("corrupt zstd data in an element");
      }
      return size;
    }
    default:
      return input.size();
  }
}

absl::Status Decompress(proto::WireCompression compression, std::string_view input, std::string* output,
                        size_t max_output) {
  // The size the input declares is checked before anything is allocated:
  // a few bytes may declare terabytes.
  absl::StatusOr<uint64_t> size = DecompressedSize(compression, input);
  if (!size.ok()) return size.status();
  if (*size > max_output) {
    return absl::DataLossError(absl::StrCat(WireCompressionName(compression), " data declares ", *size,
                                            " bytes decompressed, more than the ", max_output, " allowed"));
  }
  switch (compression) {
    case proto::COMPRESSION_SNAPPY:
      if (!snappy::Uncompress(input.data(), input.size(), output)) {
        return absl::DataLossError("corrupt snappy data in an element");
      }
      return absl::OkStatus();
    case proto::COMPRESSION_ZSTD: {
      output->resize(*size);
      const size_t got = ZSTD_decompress(output->data(), output->size(), input.data(), input.size());
      if (ZSTD_isError(got) || got != *size) return absl::DataLossError("corrupt zstd data in an element");
      return absl::OkStatus();
    }
    default:
      output->assign(input);
      return absl::OkStatus();
  }
}

absl::Status DecodeElements(const proto::GetElementsResponse& response, std::vector<Element>* elements,
                            size_t max_decompressed) {
  // All the sizes before any allocation: each element alone may be under
  // the limit while together they declare gigabytes (a few KiB of zstd).
  uint64_t declared = 0;
  for (const std::string& compressed : response.compressed_elements()) {
    absl::StatusOr<uint64_t> size = DecompressedSize(response.compression(), compressed);
    if (!size.ok()) return size.status();
    declared = *size > UINT64_MAX - declared ? UINT64_MAX : declared + *size;
  }
  if (declared > max_decompressed) {
    return absl::DataLossError(absl::StrCat(
        "GetElements response: its ", response.compressed_elements_size(), " compressed elements declare ",
        declared, " bytes decompressed, past the ", max_decompressed, " they may have"));
  }
  elements->reserve(elements->size() + response.elements_size() + response.compressed_elements_size());
  for (const proto::ElementProto& p : response.elements()) {
    absl::StatusOr<Element> e = ElementFromProto(p);
    if (!e.ok()) return e.status();
    elements->push_back(*std::move(e));
  }
  std::string bytes;
  proto::ElementProto decoded;
  for (const std::string& compressed : response.compressed_elements()) {
    if (absl::Status s = Decompress(response.compression(), compressed, &bytes); !s.ok()) return s;
    if (!decoded.ParseFromString(bytes)) return absl::DataLossError("a decompressed element does not parse");
    absl::StatusOr<Element> e = ElementFromProto(decoded);
    if (!e.ok()) return e.status();
    elements->push_back(*std::move(e));
  }
  return absl::OkStatus();
}

}  // namespace sluice
