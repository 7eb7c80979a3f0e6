// Seeded randomness that gives the same sequence on every platform: the
// standard distributions are implementation-defined, so shuffles draw
// through UniformBelow instead.
#ifndef SLUICE_PIPELINE_RANDOM_H_
#define SLUICE_PIPELINE_RANDOM_H_

#include <atomic>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

namespace sluice {

// SplitMix64 finalizer: derives independent seeds (per epoch, per shard).
inline uint64_t MixSeed(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (salt + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias (Lemire's method); n > 0. `rng()`
// returns 64 uniform bits.
template <typename Generator>
uint64_t UniformBelow(Generator& rng, uint64_t n) {
  unsigned __int128 product = static_cast<unsigned __int128>(rng()) * n;
  uint64_t low = static_cast<uint64_t>(product);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      product = static_cast<unsigned __int128>(rng()) * n;
      low = static_cast<uint64_t>(product);
    }
  }
  return static_cast<uint64_t>(product >> 64);
}

// A seed from the OS, for unseeded shuffles.
inline uint64_t RandomSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// The order of a file source's positions for its next epoch (list_files,
// image_folder): 0..count-1, shuffled when `shuffle` is set. Seeded, each
// epoch mixes in its number, from `epochs`; unseeded, each draws afresh.
inline std::vector<int64_t> EpochOrder(size_t count, bool shuffle, const std::optional<int64_t>& seed,
                                       std::atomic<uint64_t>& epochs) {
  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  std::mt19937_64 rng(seed.has_value() ? MixSeed(static_cast<uint64_t>(*seed), epochs.fetch_add(1))
                                       : RandomSeed());
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[UniformBelow(rng, i)]);
  return order;
}

// A file source's order for `context`: each epoch's own when it reads all
// its files; under a split provider the dispatcher orders the splits, and
// positions are the sorted files, or the seeded order's (epoch 0) for
// batch-aligned splits.
template <typename Context>
std::vector<int64_t> FileSourceOrder(size_t count, bool shuffle, const std::optional<int64_t>& seed,
                                     std::atomic<uint64_t>& epochs, const Context& context) {
  if (context.split_provider == nullptr) return EpochOrder(count, shuffle, seed, epochs);
  // Salted: the dispatcher orders the splits from the same seed, and the
  // two permutations must not be one. Each repetition has its own.
  std::atomic<uint64_t> salt = 0x5eedf11e5 + static_cast<uint64_t>(context.split_order_epoch);
  return EpochOrder(count, shuffle && context.split_positions_in_seeded_order && seed.has_value(), seed,
                    salt);
}

}  // namespace sluice

#endif  // SLUICE_PIPELINE_RANDOM_H_
