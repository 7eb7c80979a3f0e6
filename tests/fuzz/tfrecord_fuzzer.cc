// TFRecord reading (pipeline/record_io.h) of any file: records, or DataLoss
// naming the offset of a truncated or corrupt one, never a crash. The
// first byte picks the compression (none, GZIP, ZLIB); the file is also
// read as text lines, as text_line does.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "pipeline/record_io.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const sluice::Compression compression = static_cast<sluice::Compression>(data[0] % 3);
  const std::string path = sluice::fuzz::WriteScratchFile(
      "input.tfrecord", std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  {
    absl::StatusOr<std::unique_ptr<sluice::InputStream>> stream =
        sluice::InputStream::Open(path, compression);
    if (!stream.ok()) return 0;
    sluice::TFRecordReader reader(*std::move(stream));
    std::string record;
    for (int i = 0; i < 10000; ++i) {
      absl::StatusOr<bool> more = reader.ReadRecord(&record);
      if (!more.ok() || !*more) break;
    }
  }
  absl::StatusOr<std::unique_ptr<sluice::InputStream>> stream = sluice::InputStream::Open(path, compression);
  if (!stream.ok()) return 0;
  std::string line;
  for (int i = 0; i < 10000; ++i) {
    absl::StatusOr<bool> more = (*stream)->ReadLine(&line, 4096);
    if (!more.ok() || !*more) break;
  }
  return 0;
}
