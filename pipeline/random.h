// Seeded randomness that gives the same sequence on every platform: the
// standard distributions are implementation-defined, so shuffles draw
// through UniformBelow instead.
#ifndef SLUICE_PIPELINE_RANDOM_H_
#define SLUICE_PIPELINE_RANDOM_H_

#include <cstdint>
#include <random>

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

}  // namespace sluice

#endif  // SLUICE_PIPELINE_RANDOM_H_
