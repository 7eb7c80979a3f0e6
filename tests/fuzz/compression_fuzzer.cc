// Decompression of untrusted bytes (service/compression.h): the first byte
// picks the codec. The declared size is read first, as readers bound
// several messages with it, then the bytes decompress under a 16 MiB cap
// (a header may declare gigabytes: DataLoss, before any allocation).
// Seeds: each codec's output of a few texts (SLUICE_FUZZ_WRITE_SEEDS).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "service/compression.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = sluice::fuzz::SeedDir();
  if (dir.empty()) return 0;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "element " + std::to_string(i % 17) + " of a response; ";
  for (int codec = 0; codec < 3; ++codec) {
    for (const std::string& input : {std::string(), std::string("x"), text}) {
      std::string compressed;
      if (!sluice::Compress(static_cast<sluice::proto::WireCompression>(codec), input, &compressed).ok())
        std::exit(1);
      sluice::fuzz::WriteSeed(dir, "codec" + std::to_string(codec) + "-" + std::to_string(input.size()),
                              std::string(1, static_cast<char>(codec)) + compressed);
    }
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto compression = static_cast<sluice::proto::WireCompression>(data[0] % 3);
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)sluice::DecompressedSize(compression, input);
  std::string output;
  (void)sluice::Decompress(compression, input, &output, size_t{16} << 20);
  return 0;
}
