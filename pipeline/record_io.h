// Reading and writing record files: byte streams with optional GZIP/ZLIB
// compression (zlib), and the TFRecord framing:
//
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
//
// all little-endian. Offsets in errors are positions in the uncompressed
// stream, so they match what `tf.data` would report.
#ifndef SLUICE_PIPELINE_RECORD_IO_H_
#define SLUICE_PIPELINE_RECORD_IO_H_

#include <zlib.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {
namespace io {
class ReadableFile;
}

enum class Compression { kNone, kGzip, kZlib };

// "" / "NONE", "GZIP", "ZLIB"; anything else is InvalidArgument.
absl::StatusOr<Compression> ParseCompression(const std::string& name);

// The longest line text_line reads: 64 MiB.
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;

// A buffered, possibly decompressing, reader of one file: a local path or
// an s3:// or http(s):// URL (pipeline/io/readable_file.h).
class InputStream {
 public:
  static absl::StatusOr<std::unique_ptr<InputStream>> Open(const std::string& path, Compression compression);
  // An uncompressed file from byte `offset` on (a restore inside it):
  // offset() starts there.
  static absl::StatusOr<std::unique_ptr<InputStream>> OpenAt(const std::string& path, uint64_t offset);
  // Over a file already opened (pipeline/io's FileOpenedAhead).
  static absl::StatusOr<std::unique_ptr<InputStream>> Open(const std::string& path, Compression compression,
                                                           std::unique_ptr<io::ReadableFile> file);
  ~InputStream();

  // Reads up to `n` bytes into `out` (replacing it). Fewer bytes means the
  // end of the stream was reached.
  absl::Status Read(size_t n, std::string* out);
  // Reads one line without its "\n" (and "\r\n"); false at end of stream.
  // A line past `max_bytes` is InvalidArgument naming the file, the line
  // and the limit, rather than a buffer that grows until memory runs out
  // (a binary file, /dev/zero).
  absl::StatusOr<bool> ReadLine(std::string* line, size_t max_bytes = kMaxLineBytes);
  // Bytes consumed so far (uncompressed).
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }

 private:
  InputStream(std::string path, std::unique_ptr<io::ReadableFile> file, Compression compression);
  // Up to raw_.size() bytes of the file into `into`; 0 at its end.
  absl::StatusOr<size_t> ReadRaw(char* into, size_t n);
  // Makes at least one byte available in buffer_, unless at end.
  absl::Status Fill();

  const std::string path_;
  const std::unique_ptr<io::ReadableFile> file_;
  const Compression compression_;
  z_stream zstream_{};
  bool zstream_ready_ = false;
  bool stream_end_ = false;
  std::vector<char> raw_;  // compressed bytes from the file
  std::string buffer_;     // decompressed bytes not yet consumed
  size_t buffer_pos_ = 0;
  uint64_t offset_ = 0;
  int64_t lines_ = 0;  // lines read so far
};

class TFRecordReader {
 public:
  explicit TFRecordReader(std::unique_ptr<InputStream> stream) : stream_(std::move(stream)) {}
  const InputStream& stream() const { return *stream_; }
  // The next record, or false at a clean end of file. A truncated or
  // corrupt record is DataLoss naming the file and the record's offset.
  absl::StatusOr<bool> ReadRecord(std::string* record);

 private:
  std::unique_ptr<InputStream> stream_;
};

// Writes TFRecord files (for tests, benchmarks and tools).
class TFRecordWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> Create(const std::string& path,
                                                                Compression compression = Compression::kNone);
  ~TFRecordWriter();
  absl::Status Write(std::string_view record);
  absl::Status Close();

 private:
  TFRecordWriter(std::string path, FILE* file, gzFile gz) : path_(std::move(path)), file_(file), gz_(gz) {}
  absl::Status WriteBytes(const void* data, size_t size);

  const std::string path_;
  FILE* file_;
  gzFile gz_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_RECORD_IO_H_
