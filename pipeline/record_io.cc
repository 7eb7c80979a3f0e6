#include "pipeline/record_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "pipeline/io/readable_file.h"

namespace sluice {
namespace {

constexpr size_t kReadChunk = 256 * 1024;

uint64_t DecodeFixed64(const char* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
uint32_t DecodeFixed32(const char* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

absl::StatusOr<Compression> ParseCompression(const std::string& name) {
  if (name.empty() || name == "NONE") return Compression::kNone;
  if (name == "GZIP") return Compression::kGzip;
  if (name == "ZLIB") return Compression::kZlib;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compression_type '", name, "' (valid: \"\", GZIP, ZLIB)"));
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path,
                                                               Compression compression) {
  // Only a regular file under the data roots, opened without blocking
  // (a FIFO would hold the task for ever), or an object under them.
  absl::StatusOr<std::unique_ptr<io::ReadableFile>> file = io::OpenReadableFile(path);
  if (!file.ok()) return file.status();
  return Open(path, compression, *std::move(file));
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::OpenAt(const std::string& path, uint64_t offset) {
  absl::StatusOr<std::unique_ptr<io::ReadableFile>> file = io::OpenReadableFile(path);
  if (!file.ok()) return file.status();
  if (absl::Status moved = (*file)->SeekBeforeReading(offset); !moved.ok()) return moved;
  absl::StatusOr<std::unique_ptr<InputStream>> stream = Open(path, Compression::kNone, *std::move(file));
  if (stream.ok()) (*stream)->offset_ = offset;
  return stream;
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path,
                                                               Compression compression,
                                                               std::unique_ptr<io::ReadableFile> file) {
  std::unique_ptr<InputStream> stream(new InputStream(path, std::move(file), compression));
  if (compression != Compression::kNone) {
    // 16+ selects the gzip wrapper; plain MAX_WBITS the zlib one.
    const int window_bits = compression == Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS;
    if (inflateInit2(&stream->zstream_, window_bits) != Z_OK) {
      return absl::InternalError("zlib inflateInit2 failed");
    }
    stream->zstream_ready_ = true;
  }
  return stream;
}

InputStream::InputStream(std::string path, std::unique_ptr<io::ReadableFile> file, Compression compression)
    : path_(std::move(path)), file_(std::move(file)), compression_(compression), raw_(kReadChunk) {}

InputStream::~InputStream() {
  if (zstream_ready_) inflateEnd(&zstream_);
}

absl::StatusOr<size_t> InputStream::ReadRaw(char* into, size_t n) {
  // Fills as much of `into` as the file gives: a remote part may hand
  // over fewer bytes than asked.
  size_t filled = 0;
  while (filled < n) {
    absl::StatusOr<size_t> got = file_->Read(into + filled, n - filled);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    filled += *got;
  }
  return filled;
}

absl::Status InputStream::Fill() {
  if (buffer_pos_ > 0) {
    buffer_.erase(0, buffer_pos_);
    buffer_pos_ = 0;
  }
  while (buffer_.empty() && !stream_end_) {
    if (compression_ == Compression::kNone) {
      buffer_.resize(kReadChunk);
      absl::StatusOr<size_t> got = ReadRaw(buffer_.data(), kReadChunk);
      if (!got.ok()) return got.status();
      buffer_.resize(*got);
      if (*got == 0) stream_end_ = true;
      continue;
    }
    if (zstream_.avail_in == 0) {
      absl::StatusOr<size_t> read = ReadRaw(raw_.data(), raw_.size());
      if (!read.ok()) return read.status();
      const size_t got = *read;
      if (got == 0) {
        return absl::DataLossError(
            absl::StrCat("'", path_, "': compressed stream ends early at offset ", offset_));
      }
      zstream_.next_in = reinterpret_cast<Bytef*>(raw_.data());
      zstream_.avail_in = static_cast<uInt>(got);
    }
    buffer_.resize(kReadChunk);
    zstream_.next_out = reinterpret_cast<Bytef*>(buffer_.data());
    zstream_.avail_out = static_cast<uInt>(kReadChunk);
    const int rc = inflate(&zstream_, Z_NO_FLUSH);
    buffer_.resize(kReadChunk - zstream_.avail_out);
    if (rc == Z_STREAM_END) {
      stream_end_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return absl::DataLossError(absl::StrCat("'", path_, "': corrupt compressed data near offset ", offset_,
                                              ": ", zstream_.msg ? zstream_.msg : "inflate failed"));
    }
  }
  return absl::OkStatus();
}

absl::Status InputStream::Read(size_t n, std::string* out) {
  out->clear();
  while (out->size() < n) {
    if (buffer_pos_ >= buffer_.size()) {
      if (absl::Status status = Fill(); !status.ok()) return status;
      if (buffer_.empty()) break;
    }
    const size_t take = std::min(n - out->size(), buffer_.size() - buffer_pos_);
    out->append(buffer_, buffer_pos_, take);
    buffer_pos_ += take;
    offset_ += take;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> InputStream::ReadLine(std::string* line, size_t max_bytes) {
  line->clear();
  bool any = false;
  while (true) {
    if (buffer_pos_ >= buffer_.size()) {
      if (absl::Status status = Fill(); !status.ok()) return status;
      if (buffer_.empty()) break;
    }
    any = true;
    const size_t newline = buffer_.find('\n', buffer_pos_);
    const size_t stop = newline == std::string::npos ? buffer_.size() : newline;
    if (line->size() + (stop - buffer_pos_) > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path_, "': line ", lines_ + 1, " is longer than ", max_bytes,
          " bytes, the longest line text_line reads (is it a text file? records this long belong in "
          "tfrecord files)"));
    }
    line->append(buffer_, buffer_pos_, stop - buffer_pos_);
    offset_ += stop - buffer_pos_ + (newline == std::string::npos ? 0 : 1);
    buffer_pos_ = newline == std::string::npos ? buffer_.size() : newline + 1;
    if (newline != std::string::npos) break;
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  if (any) ++lines_;
  return any;
}

absl::StatusOr<bool> TFRecordReader::ReadRecord(std::string* record) {
  const uint64_t start = stream_->offset();
  std::string header;
  if (absl::Status status = stream_->Read(12, &header); !status.ok()) return status;
  if (header.empty()) return false;
  auto corrupt = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat("corrupt TFRecord in '", stream_->path(), "' at offset ", start, ": ", what));
  };
  if (header.size() < 12) return corrupt("truncated record header");
  const uint64_t length = DecodeFixed64(header.data());
  if (crc32c::Unmask(DecodeFixed32(header.data() + 8)) != crc32c::Extend(0, header.data(), 8)) {
    return corrupt("length checksum mismatch");
  }
  if (absl::Status status = stream_->Read(length, record); !status.ok()) return status;
  if (record->size() < length) return corrupt("truncated record data");
  std::string footer;
  if (absl::Status status = stream_->Read(4, &footer); !status.ok()) return status;
  if (footer.size() < 4) return corrupt("truncated record checksum");
  if (crc32c::Unmask(DecodeFixed32(footer.data())) != crc32c::Value(*record)) {
    return corrupt("data checksum mismatch");
  }
  return true;
}

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Create(const std::string& path,
                                                                       Compression compression) {
  if (compression == Compression::kZlib) {
    return absl::UnimplementedError("TFRecordWriter writes uncompressed or GZIP files only");
  }
  // Owner-only, whatever the umask: what Sluice writes (caches, saved
  // data) may hold a tenant's data.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::fchmod(fd, 0600) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return absl::PermissionDeniedError(absl::StrCat("cannot create '", path, "': ", std::strerror(error)));
  }
  if (compression == Compression::kGzip) {
    gzFile gz = gzdopen(fd, "wb");
    if (gz == nullptr) {
      ::close(fd);
      return absl::PermissionDeniedError(absl::StrCat("cannot create '", path, "'"));
    }
    return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(path, nullptr, gz));
  }
  FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrCat("cannot create '", path, "': ", std::strerror(error)));
  }
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(path, file, nullptr));
}

TFRecordWriter::~TFRecordWriter() { (void)Close(); }

absl::Status TFRecordWriter::WriteBytes(const void* data, size_t size) {
  const bool ok = gz_ != nullptr ? gzwrite(gz_, data, static_cast<unsigned>(size)) == static_cast<int>(size)
                                 : std::fwrite(data, 1, size, file_) == size;
  if (!ok) return absl::DataLossError(absl::StrCat("write to '", path_, "' failed"));
  return absl::OkStatus();
}

absl::Status TFRecordWriter::Write(std::string_view record) {
  char header[12];
  const uint64_t length = record.size();
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = crc32c::Mask(crc32c::Extend(0, header, 8));
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t data_crc = crc32c::Mask(crc32c::Value(record));
  if (absl::Status s = WriteBytes(header, 12); !s.ok()) return s;
  if (absl::Status s = WriteBytes(record.data(), record.size()); !s.ok()) return s;
  return WriteBytes(&data_crc, 4);
}

absl::Status TFRecordWriter::Close() {
  bool ok = true;
  if (gz_ != nullptr) ok = gzclose(gz_) == Z_OK;
  if (file_ != nullptr) ok = std::fclose(file_) == 0;
  gz_ = nullptr;
  file_ = nullptr;
  if (!ok) return absl::DataLossError(absl::StrCat("closing '", path_, "' failed"));
  return absl::OkStatus();
}

}  // namespace sluice
