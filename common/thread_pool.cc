#include "common/thread_pool.h"

#include <algorithm>

#include "common/large_buffer_allocator.h"

namespace sluice {

ThreadPool::ThreadPool(int num_threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(num_threads);
  try {
    for (int i = 0; i < num_threads; ++i)
      threads_.push_back(ThreadInAllocatorScope([this] { WorkerLoop(); }));
  } catch (...) {
    // Out of threads: the ones started are joined before the error goes
    // on (a joinable std::thread destroyed would call std::terminate).
    Shutdown();
    throw;
  }
}

ThreadPool::~ThreadPool() { Shutdown(); }

void ThreadPool::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (max_queued_ > 0) {
    mu_.Await(absl::Condition(
        +[](ThreadPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
          return pool->stopping_ || pool->tasks_.size() < pool->max_queued_;
        },
        this));
  }
  tasks_.push_back(std::move(task));
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* pool)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) { return pool->stopping_ || !pool->tasks_.empty(); },
          this));
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

int ResolveParallelism(int64_t num_parallel_calls) {
  if (num_parallel_calls < 0) {
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return static_cast<int>(std::clamp<int64_t>(num_parallel_calls, 1, kMaxParallelCalls));
}

}  // namespace sluice
