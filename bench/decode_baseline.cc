// decode_baseline: the physical reference for what a JPEG decoder can do per
// core. Reads every .jpg/.jpeg under a folder into memory once, then decodes
// them all, whole images to RGB, with libjpeg-turbo's libjpeg API
// (jpeg_mem_src, JDCT_ISLOW, default fancy upsampling, into a reused buffer)
// in a plain loop, repeating the set until --seconds have passed.
//
//   g++ -std=c++20 -O2 bench/decode_baseline.cc -ljpeg -lpthread -o /tmp/decode_baseline
//   /tmp/decode_baseline DIR [--seconds 5] [--threads N]
//
// Prints `decode images/s (1 thread): R (N images, M MB/s of JPEG)`; with
// --threads N, N threads (each its own decompressor) decode interleaved parts
// of the set and the line gives their aggregate. Self-contained on purpose:
// no Sluice code, only <jpeglib.h> and the standard library.

#include <jpeglib.h>

#include <atomic>
#include <chrono>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct File {
  std::string path;
  std::vector<unsigned char> bytes;
};

// libjpeg reports errors by calling error_exit, which must not return: jump
// back to the decode call, which then reports the file as bad.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (e.g. premature end of data) are counted by libjpeg, not printed.
void OutputMessage(j_common_ptr) {}

// One decompressor and output buffer, reused for every image of a thread.
class Decoder {
 public:
  Decoder() {
    cinfo_.err = jpeg_std_error(&err_.pub);
    err_.pub.error_exit = ErrorExit;
    err_.pub.output_message = OutputMessage;
    jpeg_create_decompress(&cinfo_);
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo_); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Decodes `file` to packed RGB in the reused buffer. Returns false, with
  // the reason in error(), when libjpeg fails.
  bool Decode(const File& file) {
    if (setjmp(err_.jump)) {
      jpeg_abort_decompress(&cinfo_);  // ready for the next image
      return false;
    }
    jpeg_mem_src(&cinfo_, file.bytes.data(), static_cast<unsigned long>(file.bytes.size()));
    jpeg_read_header(&cinfo_, TRUE);
    cinfo_.out_color_space = JCS_RGB;
    cinfo_.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&cinfo_);
    const size_t stride = size_t{cinfo_.output_width} * cinfo_.output_components;
    const size_t needed = stride * cinfo_.output_height;
    if (buffer_.size() < needed) buffer_.resize(needed);
    while (cinfo_.output_scanline < cinfo_.output_height) {
      // Up to rec_outbuf_height rows per call, as libjpeg prefers.
      JSAMPROW rows[4];
      int n = 0;
      for (; n < cinfo_.rec_outbuf_height && n < 4 && cinfo_.output_scanline + n < cinfo_.output_height;
           ++n) {
        rows[n] = buffer_.data() + stride * (cinfo_.output_scanline + n);
      }
      jpeg_read_scanlines(&cinfo_, rows, n);
    }
    warnings_ = err_.pub.num_warnings;  // read before finish resets them
    jpeg_finish_decompress(&cinfo_);
    pixels_ += size_t{cinfo_.output_width} * cinfo_.output_height;
    return true;
  }

  const char* error() const { return err_.message; }
  // Warnings of the last successful decode (corrupt data libjpeg recovered
  // from, e.g. a truncated file: its missing rows come out grey).
  long warnings() const { return warnings_; }
  size_t pixels() const { return pixels_; }
  unsigned char checksum() const { return buffer_.empty() ? 0 : buffer_[buffer_.size() / 2]; }

 private:
  jpeg_decompress_struct cinfo_{};
  ErrorManager err_{};
  std::vector<unsigned char> buffer_;
  size_t pixels_ = 0;
  long warnings_ = 0;
};

[[noreturn]] void Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s DIR [--seconds S] [--threads N]\n", argv0);
  std::exit(2);
}

bool IsJpeg(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".jpg" || ext == ".jpeg";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  double seconds = 5;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!arg.starts_with("-") && dir.empty()) {
      dir = arg;
    } else {
      Usage(argv[0]);
    }
  }
  if (dir.empty() || seconds <= 0 || threads < 1) Usage(argv[0]);

  // Read every JPEG once; the timed loop touches memory only.
  std::vector<File> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file() || !IsJpeg(it->path())) continue;
    std::ifstream in(it->path(), std::ios::binary);
    File f{it->path().string(), {std::istreambuf_iterator<char>(in), {}}};
    if (!in.bad()) files.push_back(std::move(f));
  }
  if (ec) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }

  // One untimed pass: drops (and names) files libjpeg cannot decode, and
  // warms the caches and the decoder.
  size_t pixels = 0;
  {
    Decoder d;
    std::vector<File> good;
    for (auto& f : files) {
      if (d.Decode(f)) {
        if (d.warnings())
          std::fprintf(stderr, "%s: decodes with %ld libjpeg warning(s); kept\n", f.path.c_str(),
                       d.warnings());
        good.push_back(std::move(f));
      } else {
        std::fprintf(stderr, "skipping %s: %s\n", f.path.c_str(), d.error());
      }
    }
    files = std::move(good);
    pixels = d.pixels();
  }
  if (files.empty()) {
    std::fprintf(stderr, "no decodable .jpg files under %s\n", dir.c_str());
    return 1;
  }
  size_t set_bytes = 0;
  for (const auto& f : files) set_bytes += f.bytes.size();
  std::printf("libjpeg-turbo %s: %zu files, %.1f MB, mean %.1f KB, mean %.0f pixels\n",
#ifdef LIBJPEG_TURBO_VERSION
#define SLUICE_STR2(x) #x
#define SLUICE_STR(x) SLUICE_STR2(x)
              SLUICE_STR(LIBJPEG_TURBO_VERSION),
#else
              "(not turbo)",
#endif
              files.size(), set_bytes / 1e6, set_bytes / 1e3 / files.size(),
              static_cast<double>(pixels) / files.size());

  // Thread t decodes files t, t + N, t + 2N, ... round and round until the
  // deadline, checked after each image.
  struct Result {
    size_t images = 0, bytes = 0, pixels = 0, failed = 0;
    unsigned char checksum = 0;
  };
  std::vector<Result> results(threads);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  auto work = [&](int t) {
    Decoder d;
    Result& r = results[t];
    ready.fetch_add(1);
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (size_t i = t;; i += threads) {
      if (i >= files.size()) i = t % files.size();
      const File& f = files[i];
      if (d.Decode(f)) {
        ++r.images;
        r.bytes += f.bytes.size();
      } else {
        ++r.failed;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
    }
    r.pixels = d.pixels();
    r.checksum = d.checksum();
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  while (ready.load() < threads - 1) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  work(0);
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  Result total;
  for (const auto& r : results) {
    total.images += r.images;
    total.bytes += r.bytes;
    total.pixels += r.pixels;
    total.failed += r.failed;
    total.checksum ^= r.checksum;  // keeps the decode from being optimised away
  }
  if (total.failed) std::fprintf(stderr, "%zu decodes failed in the timed loop\n", total.failed);
  std::printf(
      "decode images/s (%d thread%s): %.1f (%zu images, %.1f MB/s of JPEG, %.1f Mpixel/s, %.2f s) [%u]\n",
      threads, threads == 1 ? "" : "s", total.images / elapsed, total.images, total.bytes / 1e6 / elapsed,
      total.pixels / 1e6 / elapsed, elapsed, static_cast<unsigned>(total.checksum));
  return 0;
}
