#include "client/read/trainer_wait.h"

#include <atomic>
#include <cmath>

namespace sluice::reader {
namespace {

std::atomic<bool> measured{false};
std::atomic<double> waited{0};

}  // namespace

void AddTrainerWait(double seconds) {
  if (!measured.load(std::memory_order_relaxed)) measured.store(true, std::memory_order_relaxed);
  if (std::isfinite(seconds) && seconds > 0) waited.fetch_add(seconds, std::memory_order_relaxed);
}

std::optional<double> TrainerWaitSeconds() {
  if (!measured.load(std::memory_order_relaxed)) return std::nullopt;
  return waited.load(std::memory_order_relaxed);
}

}  // namespace sluice::reader
