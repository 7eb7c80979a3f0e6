// Reads an iterator's values on a thread of its own, a few ahead, so that
// the Python thread waits in a loop it can leave: Ctrl-C during a blocking
// read raises KeyboardInterrupt within kSignalCheckInterval, which a wait
// inside the C++ iterator could not do. The GIL is released while the
// Python thread waits, and the reading thread takes it only inside
// Python callables (map and filter functions).
//
// The hand-off costs a mutex per value when values are ready; the Python
// thread spins briefly before it sleeps, so a fast source is not slowed
// by a wake-up per value.
#ifndef SLUICE_PYTHON_SRC_READ_AHEAD_H_
#define SLUICE_PYTHON_SRC_READ_AHEAD_H_

#include <pybind11/pybind11.h>

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

template <typename T>
class ReadAhead {
 public:
  // The next value, an empty optional at the end, or an error.
  using Producer = std::function<absl::StatusOr<std::optional<T>>()>;

  // `capacity`: values read ahead at most. With `stop_after_error` the
  // first error ends the reading, as it ends a sluice::Iterator.
  ReadAhead(Producer produce, size_t capacity, bool stop_after_error) : state_(std::make_shared<State>()) {
    state_->produce = std::move(produce);
    state_->capacity = capacity;
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

  // Called with the GIL held. Raises KeyboardInterrupt (or whatever a
  // Python signal handler raises) if a signal arrives while it waits.
  absl::StatusOr<std::optional<T>> Next() {
    if (std::optional<absl::StatusOr<std::optional<T>>> ready = TryPop()) return *std::move(ready);
    {
      pybind11::gil_scoped_release release;
      // Spin first: a value is usually a few microseconds away.
      const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (std::chrono::steady_clock::now() < spin_until) {
        if (std::optional<absl::StatusOr<std::optional<T>>> ready = TryPop()) return *std::move(ready);
        std::this_thread::yield();
      }
    }
    while (true) {
      {
        pybind11::gil_scoped_release release;
        absl::MutexLock lock(&state_->mu);
        auto has_value = [this]() ABSL_SHARED_LOCKS_REQUIRED(state_->mu) { return !state_->values.empty(); };
        state_->mu.AwaitWithTimeout(absl::Condition(&has_value), kSignalCheckInterval);
        if (!state_->values.empty()) return PopLocked();
      }
      if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    }
  }

 private:
  struct State {
    Producer produce;  // used only by the reading thread
    size_t capacity = 1;
    bool stop_after_error = true;
    absl::Mutex mu;
    std::deque<absl::StatusOr<std::optional<T>>> values ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    bool finished ABSL_GUARDED_BY(mu) = false;
  };

  static void Run(State& state) {
    while (true) {
      {
        absl::MutexLock lock(&state.mu);
        auto may_read = [&state]() ABSL_SHARED_LOCKS_REQUIRED(state.mu) {
          return state.stopping || state.values.size() < state.capacity;
        };
        state.mu.Await(absl::Condition(&may_read));
        if (state.stopping) break;
      }
      absl::StatusOr<std::optional<T>> value = state.produce();
      const bool last = value.ok() ? !value->has_value() : state.stop_after_error;
      absl::MutexLock lock(&state.mu);
      state.values.push_back(std::move(value));
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
    // The end and a final error stay for later calls.
    const bool terminal = value.ok() ? !value->has_value() : state_->stop_after_error;
    if (terminal) state_->values.push_front(value);
    return value;
  }

  std::shared_ptr<State> state_;
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
