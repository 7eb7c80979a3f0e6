#include "common/thread_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"

namespace sluice {
namespace {

TEST_CASE("thread_pool: runs every scheduled task, also those queued at destruction", "[common]") {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2);
    for (int i = 0; i < 100; ++i) pool.Schedule([&] { ran.fetch_add(1); });
  }
  CHECK(ran.load() == 100);
}

TEST_CASE("thread_pool: a bounded queue makes Schedule wait until a task is taken", "[common]") {
  absl::Notification release;
  std::atomic<int> ran{0};
  ThreadPool pool(/*num_threads=*/1, /*max_queued=*/2);
  pool.Schedule([&] {
    release.WaitForNotification();
    ran.fetch_add(1);
  });
  // The thread holds the first task: two more fit in the queue...
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.Schedule([&] { ran.fetch_add(1); });
  pool.Schedule([&] { ran.fetch_add(1); });
  // ...and the fourth waits for room.
  std::atomic<bool> scheduled{false};
  std::thread producer([&] {
    pool.Schedule([&] { ran.fetch_add(1); });
    scheduled = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_FALSE(scheduled.load());
  release.Notify();
  producer.join();
  CHECK(scheduled.load());
  while (ran.load() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(ran.load() == 4);
}

}  // namespace
}  // namespace sluice
