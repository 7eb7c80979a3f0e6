// tokenize_baseline: SentencePiece's C++ encoder alone, the physical
// reference of bench/text_pipeline.py. It encodes the lines of a text file,
// held in memory, again and again for the given seconds on the given
// threads, and prints one line: "tokens_per_second N lines L threads T".
// No JSON, no packing, no tensors: what any tokenizing pipeline must at
// least spend.
//
//   tokenize_baseline MODEL TEXT_FILE SECONDS THREADS
#include <sentencepiece_processor.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL TEXT_FILE SECONDS THREADS\n", argv[0]);
    return 2;
  }
  sentencepiece::SentencePieceProcessor processor;
  if (const auto status = processor.Load(argv[1]); !status.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], status.ToString().c_str());
    return 1;
  }
  std::vector<std::string> lines;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.empty()) {
    std::fprintf(stderr, "%s: no lines\n", argv[2]);
    return 1;
  }
  const double seconds = std::atof(argv[3]);
  const int threads = std::atoi(argv[4]);
  std::atomic<long long> tokens{0};
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<int> ids;
      long long mine = 0;
      for (size_t i = t; std::chrono::steady_clock::now() < deadline; i = (i + threads) % lines.size()) {
        ids.clear();
        if (!processor.Encode(lines[i], &ids).ok()) std::abort();
        mine += static_cast<long long>(ids.size());
      }
      tokens += mine;
    });
  }
  for (std::thread& thread : pool) thread.join();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("tokens_per_second %.0f lines %zu threads %d\n", static_cast<double>(tokens) / elapsed,
              lines.size(), threads);
  return 0;
}
