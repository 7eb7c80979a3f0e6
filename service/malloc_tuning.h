// Large messages and glibc's malloc. By default glibc raises its mmap
// threshold to the size of the largest freed block and trims the heap
// whenever more than twice that is free at its top, so a process that
// receives a steady stream of megabyte messages hands memory back to the
// kernel and faults it in again, page by page, for nearly every message.
// Measured on a 16-core machine (bench/README.md, data_plane), that halved a
// reader's throughput: 1.8-2.2 GB/s against 3.4-4.0 GB/s with the
// thresholds fixed. The data service reader therefore fixes them, once per
// process, unless the user has chosen malloc settings of their own.
#ifndef SLUICE_SERVICE_MALLOC_TUNING_H_
#define SLUICE_SERVICE_MALLOC_TUNING_H_

#include <cstddef>
#include <string>

namespace sluice {

// Blocks below this come from the heap, above it from mmap.
inline constexpr size_t kTunedMmapThreshold = size_t{32} << 20;  // glibc's largest allowed
// Free memory at the top of a heap is kept up to this much.
inline constexpr size_t kTunedTrimThreshold = size_t{256} << 20;

struct MallocTuningDecision {
  bool tune = false;
  std::string reason;  // one line, for logs and benchmarks
};

// Decides from the values of GLIBC_TUNABLES and SLUICE_MALLOC_TUNING
// (nullptr when unset): no tuning when GLIBC_TUNABLES sets any
// glibc.malloc tunable (the user's choice wins) or SLUICE_MALLOC_TUNING is
// "off"; tuning when it is unset or "on". Any other value of
// SLUICE_MALLOC_TUNING tunes, and the reason says the value was not
// understood.
MallocTuningDecision DecideMallocTuning(const char* glibc_tunables, const char* sluice_malloc_tuning);

// The first call decides from the environment and, if so decided, sets both
// thresholds with mallopt; every call returns that first decision (with
// reason "mallopt failed: ..." if glibc refused). Does nothing where the C
// library is not glibc.
const MallocTuningDecision& TuneMallocForLargeMessages();

}  // namespace sluice

#endif  // SLUICE_SERVICE_MALLOC_TUNING_H_
