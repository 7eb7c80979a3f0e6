// PNG decoding (pipeline/image/decode.h) of any bytes: pixels or
// InvalidArgument, never a crash (tests/fuzz/image_fuzz.h says what runs).
// The PNG target and its twin share the code; each corpus holds its own
// format, so that each spends its time in one library.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/image_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sluice::fuzz::DecodeImageBytes(data, size);
  return 0;
}
