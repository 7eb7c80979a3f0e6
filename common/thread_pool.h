// A fixed-size pool of worker threads. Parallel ops bound the work they hand
// it (at most num_parallel_calls in flight), so the queue stays short.
#ifndef SLUICE_COMMON_THREAD_POOL_H_
#define SLUICE_COMMON_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice {

class ThreadPool {
 public:
  // Throws std::system_error when a thread cannot be started, having
  // joined the ones that were. `max_queued` > 0 bounds the tasks waiting
  // for a thread: Schedule then blocks until one is taken.
  explicit ThreadPool(int num_threads, size_t max_queued = 0);
  // Runs every task already scheduled, then joins the threads.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // With a bound, waits while the queue is full.
  void Schedule(std::function<void()> task);
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  void WorkerLoop();
  void Shutdown();

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // constant after construction
};

// Threads to use for num_parallel_calls: -1 (autotune) is the core count;
// anything is capped at kMaxParallelCalls.
inline constexpr int kMaxParallelCalls = 256;
int ResolveParallelism(int64_t num_parallel_calls);

}  // namespace sluice

#endif  // SLUICE_COMMON_THREAD_POOL_H_
