// Reads an iterator's values on a thread of its own, a few ahead, so that
// the Python thread waits in a loop it can leave: Ctrl-C during a blocking
// read raises KeyboardInterrupt within kSignalCheckInterval, which a wait
// inside the C++ iterator could not do. The GIL is released while the
// Python thread waits, and the reading thread takes it only inside
// Python callables (map and filter functions).
//
// The hand-off costs a mutex per value when values are ready; while they
// come quickly the Python thread spins briefly before it sleeps, so that a
// fast source is not slowed by a wake-up per value.
#ifndef SLUICE_PYTHON_SRC_READ_AHEAD_H_
#define SLUICE_PYTHON_SRC_READ_AHEAD_H_

#include <pybind11/pybind11.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice::python {

inline constexpr absl::Duration kSignalCheckInterval = absl::Milliseconds(100);
// How long a destroyed reader waits for a read in flight before it leaves
// the thread to finish alone (a read stuck on an unreachable service).
inline constexpr absl::Duration kStopWait = absl::Milliseconds(200);

// A spin-wait hint: the core's resources go to its sibling hyperthread.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

template <typename T>
class ReadAhead {
 public:
  // The next value, an empty optional at the end, or an error.
  using Producer = std::function<absl::StatusOr<std::optional<T>>()>;

  // How many bytes a value holds, to bound the read-ahead by memory too.
  using ByteSize = std::function<size_t(const T&)>;

  // `capacity`: values read ahead at most, and `max_bytes` their bytes
  // (ignored without `byte_size`). Once full, the reader waits until the
  // Python thread has taken half, so that it is woken once per half a
  // buffer rather than once per value. With `stop_after_error` the first
  // error ends the reading, as it ends a sluice::Iterator.
  ReadAhead(Producer produce, size_t capacity, bool stop_after_error, ByteSize byte_size = nullptr,
            size_t max_bytes = 0)
      : state_(std::make_shared<State>()) {
    state_->produce = std::move(produce);
    state_->byte_size = std::move(byte_size);
    state_->capacity = capacity;
    state_->max_bytes = max_bytes;
    state_->stop_after_error = stop_after_error;
    std::thread([state = state_] { Run(*state); }).detach();
  }

  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Stops the reading thread and waits (GIL released) until it has
  // dropped the C++ iterator, or kStopWait.
  ~ReadAhead() {
    std::optional<pybind11::gil_scoped_release> release;
    if (PyGILState_Check()) release.emplace();
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    state_->mu.AwaitWithTimeout(absl::Condition(&state_->finished), kStopWait);
  }

  // Runs `inspect` on the values read ahead and not yet taken, while the
  // reading thread is between two values (so the source is too), and
  // returns what it returns. Called with the GIL held; waits without it.
  template <typename R>
  R WhilePaused(const std::function<R(const std::deque<absl::StatusOr<std::optional<T>>>&)>& inspect) {
    pybind11::gil_scoped_release release;
    absl::MutexLock lock(&state_->mu);
    ++state_->pauses;
    state_->mu.Await(absl::Condition(
        +[](State* state) ABSL_SHARED_LOCKS_REQUIRED(state->mu) { return !state->producing; }, state_.get()));
    R result = inspect(state_->values);
    --state_->pauses;
    return result;
  }

  // Called with the GIL held. Raises KeyboardInterrupt (or whatever a
  // Python signal handler raises) if a signal arrives while it waits.
  absl::StatusOr<std::optional<T>> Next() {
    if (std::optional<absl::StatusOr<std::optional<T>>> ready = TryPop()) {
      NoteWait(std::chrono::nanoseconds(0));
      return *std::move(ready);
    }
    pybind11::gil_scoped_release release;
    const auto wait_start = std::chrono::steady_clock::now();
    // Spin first (pausing, without the lock) while values have been arriving
    // within a few hundred microseconds, where sleeping would cost a
    // wake-up and a context switch per value (measurable on 1 MiB batches
    // that take ~90 us to make); sleep at once when they take longer
    // (images, the network), where spinning would only take a core from the
    // threads that make them. One core alone never spins.
    const std::chrono::nanoseconds typical_wait(typical_wait_ns_.load(std::memory_order_relaxed));
    if (spin_allowed_ && typical_wait < kMaxSpin) {
      const auto spin_until = wait_start + std::max<std::chrono::nanoseconds>(kMinSpin, 2 * typical_wait);
      while (std::chrono::steady_clock::now() < spin_until) {
        if (state_->pushed.load(std::memory_order_acquire) != popped_.load(std::memory_order_relaxed)) {
          if (std::optional<absl::StatusOr<std::optional<T>>> ready = TryPop()) {
            NoteWait(std::chrono::steady_clock::now() - wait_start);
            return *std::move(ready);
          }
        }
        // The pause instruction leaves the core's resources to a sibling
        // hyperthread, which may be the one making the values.
        for (int i = 0; i < 32; ++i) CpuRelax();
      }
    }
    absl::StatusOr<std::optional<T>> value = WaitForValue();
    NoteWait(std::chrono::steady_clock::now() - wait_start);
    return value;
  }

 private:
  static constexpr std::chrono::nanoseconds kMaxSpin = std::chrono::microseconds(250);
  static constexpr std::chrono::nanoseconds kMinSpin = std::chrono::microseconds(50);

  // An average of the recent waits, which decides whether to spin.
  // Relaxed: two Python threads reading one iterator may both be here with
  // the GIL released; a stale value only changes how long one of them spins.
  void NoteWait(std::chrono::nanoseconds wait) {
    const int64_t typical = typical_wait_ns_.load(std::memory_order_relaxed);
    typical_wait_ns_.store((typical * 7 + wait.count()) / 8, std::memory_order_relaxed);
  }

  // Sleeps until a value is ready, taking the GIL every
  // kSignalCheckInterval to run Python's signal handlers. Called with the
  // GIL released.
  absl::StatusOr<std::optional<T>> WaitForValue() {
    while (true) {
      {
        absl::MutexLock lock(&state_->mu);
        auto has_value = [this]() ABSL_SHARED_LOCKS_REQUIRED(state_->mu) { return !state_->values.empty(); };
        state_->mu.AwaitWithTimeout(absl::Condition(&has_value), kSignalCheckInterval);
        if (!state_->values.empty()) return PopLocked();
      }
      pybind11::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    }
  }

  struct State {
    Producer produce;    // used only by the reading thread
    ByteSize byte_size;  // likewise
    size_t capacity = 1;
    size_t max_bytes = 0;
    bool stop_after_error = true;
    absl::Mutex mu;
    std::deque<absl::StatusOr<std::optional<T>>> values ABSL_GUARDED_BY(mu);
    size_t bytes ABSL_GUARDED_BY(mu) = 0;  // of the values held
    bool stopping ABSL_GUARDED_BY(mu) = false;
    bool finished ABSL_GUARDED_BY(mu) = false;
    // The reading thread is inside produce(); WhilePaused callers in
    // progress, which it waits for before the next value.
    bool producing ABSL_GUARDED_BY(mu) = false;
    int pauses ABSL_GUARDED_BY(mu) = 0;
    // Values pushed so far, read without the lock by the spinning consumer.
    std::atomic<uint64_t> pushed{0};
  };

  static void Run(State& state) {
    while (true) {
      {
        absl::MutexLock lock(&state.mu);
        const bool full =
            state.values.size() >= state.capacity || (state.max_bytes > 0 && state.bytes >= state.max_bytes);
        if (full) {
          auto half_taken = [&state]() ABSL_SHARED_LOCKS_REQUIRED(state.mu) {
            return state.stopping ||
                   (state.values.size() <= state.capacity / 2 && state.bytes <= state.max_bytes / 2);
          };
          state.mu.Await(absl::Condition(&half_taken));
        }
        auto unpaused = [&state]() ABSL_SHARED_LOCKS_REQUIRED(state.mu) {
          return state.stopping || state.pauses == 0;
        };
        state.mu.Await(absl::Condition(&unpaused));
        if (state.stopping) break;
        state.producing = true;
      }
      absl::StatusOr<std::optional<T>> value = state.produce();
      const bool last = value.ok() ? !value->has_value() : state.stop_after_error;
      const size_t bytes = value.ok() && value->has_value() && state.byte_size ? state.byte_size(**value) : 0;
      absl::MutexLock lock(&state.mu);
      state.producing = false;
      state.bytes += bytes;
      state.values.push_back(std::move(value));
      state.pushed.fetch_add(1, std::memory_order_release);
      if (last || state.stopping) break;
    }
    // The iterator goes before `finished`, so that a destroyed reader has
    // released what the iterator held (its job, its Python callables).
    state.produce = nullptr;
    absl::MutexLock lock(&state.mu);
    state.finished = true;
  }

  std::optional<absl::StatusOr<std::optional<T>>> TryPop() {
    absl::MutexLock lock(&state_->mu);
    if (state_->values.empty()) return std::nullopt;
    return PopLocked();
  }

  absl::StatusOr<std::optional<T>> PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    absl::StatusOr<std::optional<T>> value = std::move(state_->values.front());
    state_->values.pop_front();
    popped_.fetch_add(1, std::memory_order_relaxed);
    if (value.ok() && value->has_value() && state_->byte_size) state_->bytes -= state_->byte_size(**value);
    // The end and a final error stay for later calls.
    const bool terminal = value.ok() ? !value->has_value() : state_->stop_after_error;
    if (terminal) {
      state_->values.push_front(value);
      popped_.fetch_sub(1, std::memory_order_relaxed);
    }
    return value;
  }

  std::shared_ptr<State> state_;
  std::atomic<int64_t> typical_wait_ns_{0};
  // Values taken (changed under State::mu), to compare with State::pushed.
  std::atomic<uint64_t> popped_{0};
  const bool spin_allowed_ = UsableCores() > 1;

  static int UsableCores() {
    cpu_set_t cores;
    if (sched_getaffinity(0, sizeof(cores), &cores) != 0) return 1;
    return CPU_COUNT(&cores);
  }
};

// Runs `call` on a thread of its own and waits for it as ReadAhead::Next
// does, so that Ctrl-C interrupts a call that blocks (building a pipeline
// that reaches a dispatcher which does not answer). Called with the GIL
// held; `call` must not need it, or take it itself. An interrupted call
// finishes alone and its result is dropped.
template <typename T>
T CallInterruptibly(std::function<T()> call) {
  struct Shared {
    absl::Mutex mu;
    std::optional<T> result ABSL_GUARDED_BY(mu);
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, call = std::move(call)]() mutable {
    T result = call();
    absl::MutexLock lock(&shared->mu);
    shared->result.emplace(std::move(result));
  }).detach();
  while (true) {
    {
      pybind11::gil_scoped_release release;
      absl::MutexLock lock(&shared->mu);
      auto done = [&shared]() ABSL_SHARED_LOCKS_REQUIRED(shared->mu) { return shared->result.has_value(); };
      shared->mu.AwaitWithTimeout(absl::Condition(&done), kSignalCheckInterval);
      if (shared->result.has_value()) return *std::move(shared->result);
    }
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
}

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_READ_AHEAD_H_
