// Helpers the libFuzzer targets share (tests/fuzz/*_fuzzer.cc).
//
// Every target follows one rule: whatever the bytes, the code under test
// returns a Status and never aborts. So a target only calls the entry
// point and drops its result; a crash, or an ASan or UBSan report, is a bug
// in Sluice, not in the target.
//
// Seeds: the targets whose input is a serialized proto or a checksummed
// file write their own valid examples when SLUICE_FUZZ_WRITE_SEEDS names
// a folder (tests/fuzz/make_corpus.py runs them so), from Sluice's own
// writers, so that the corpus follows the formats as they change.
#ifndef SLUICE_TESTS_FUZZ_FUZZ_UTIL_H_
#define SLUICE_TESTS_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "google/protobuf/stubs/logging.h"

namespace sluice::fuzz {

// protobuf logs every string field that is not UTF-8 as it parses; fuzz
// input is mostly that. Silenced in every target that includes this file.
[[maybe_unused]] static const bool kQuietProtobuf = (google::protobuf::SetLogHandler(nullptr), true);

// The input as a string.
inline std::string Bytes(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A scratch folder of this process's own, removed at exit; readers that
// take a path read the input from a file in it.
inline const std::string& ScratchDir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sluice-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    auto* path = new std::string(pattern);
    std::atexit([] { std::system(("rm -rf '" + ScratchDir() + "'").c_str()); });
    return path;
  }();
  return *dir;
}

// Replaces the file `name` in ScratchDir() with `bytes`; returns its path.
inline std::string WriteScratchFile(const std::string& name, std::string_view bytes) {
  const std::string path = ScratchDir() + "/" + name;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() ||
      std::fclose(file) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

// The folder SLUICE_FUZZ_WRITE_SEEDS names, or "" when unset.
inline std::string SeedDir() {
  const char* dir = std::getenv("SLUICE_FUZZ_WRITE_SEEDS");
  return dir == nullptr ? "" : dir;
}

// LLVMFuzzerInitialize of a target whose seeds Sluice's own writers make:
// with SLUICE_FUZZ_WRITE_SEEDS set, `write_seeds` fills that folder and the
// process exits; otherwise fuzzing goes on.
inline int WriteSeedsIfAsked(void (*write_seeds)(const std::string& dir)) {
  if (const std::string dir = SeedDir(); !dir.empty()) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

// Writes one seed `name` into `dir`.
inline void WriteSeed(const std::string& dir, const std::string& name, std::string_view bytes) {
  const std::string path = dir + "/" + name;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() ||
      std::fclose(file) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
}

}  // namespace sluice::fuzz

#endif  // SLUICE_TESTS_FUZZ_FUZZ_UTIL_H_
