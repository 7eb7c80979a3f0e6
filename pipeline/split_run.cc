#include "pipeline/split_run.h"

#include <cstdint>

namespace sluice {
namespace {

int64_t SizeOfSplits(const Split& run) { return run.count == 1 ? run.end - run.begin : run.split_size; }

}  // namespace

bool ExtendSplitRun(Split* run, const Split& next) {
  const int64_t size = SizeOfSplits(*run);
  const bool last_full = run->end - run->begin == run->count * size;
  if (size <= 0 || !last_full || next.count != 1 || next.seq != run->seq + run->count ||
      next.begin != run->end || next.end <= next.begin || next.end - next.begin > size) {
    return false;
  }
  run->end = next.end;
  run->split_size = size;
  ++run->count;
  return true;
}

Split SplitRunPart(const Split& run, int64_t first, int64_t n) {
  if (run.count == 1) return run;
  const int64_t begin = run.begin + first * run.split_size;
  const int64_t end = std::min(begin + n * run.split_size, run.end);
  return Split{begin, end, run.seq + first, n, n == 1 ? 0 : run.split_size};
}

bool ValidSplitRunSize(const Split& run) {
  return run.count == 1 || (run.count > 1 && run.split_size > 0 && run.split_size <= INT64_MAX / run.count);
}

}  // namespace sluice
