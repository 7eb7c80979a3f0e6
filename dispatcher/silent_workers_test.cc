#include "dispatcher/silent_workers.h"

#include <catch2/catch.hpp>

namespace sluice::dispatcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using TimePoint = std::chrono::steady_clock::time_point;

std::vector<std::string> Removed(const SilentWorkers& silent) {
  std::vector<std::string> addresses;
  for (const auto& [address, timeout] : silent.to_remove) addresses.push_back(address);
  return addresses;
}

TEST_CASE("silent workers: a few silent past the timeout are removed, sorted", "[dispatcher][liveness]") {
  const TimePoint now{seconds(1000)};
  const std::map<std::string, TimePoint> heard = {
      {"c:1", now - seconds(11)}, {"a:1", now - seconds(12)}, {"b:1", now - seconds(1)}, {"d:1", now}};
  const SilentWorkers silent = FindSilentWorkers(heard, now, seconds(10), seconds(60));
  CHECK(silent.silent == 2);
  CHECK(silent.known == 4);
  CHECK_FALSE(silent.majority_silent);  // half is not most
  CHECK(silent.to_remove ==
        std::vector<std::pair<std::string, milliseconds>>{{"a:1", seconds(10)}, {"c:1", seconds(10)}});
}

TEST_CASE("silent workers: most silent at once wait for the longer timeout", "[dispatcher][liveness]") {
  const TimePoint now{seconds(1000)};
  std::map<std::string, TimePoint> heard = {
      {"a:1", now - seconds(15)}, {"b:1", now - seconds(15)}, {"c:1", now - milliseconds(200)}};
  SilentWorkers silent = FindSilentWorkers(heard, now, seconds(10), seconds(60));
  CHECK(silent.silent == 2);
  CHECK(silent.majority_silent);
  CHECK(silent.to_remove.empty());
  // Past the longer timeout they go; the one still heard stays.
  heard["a:1"] = now - seconds(61);
  silent = FindSilentWorkers(heard, now, seconds(10), seconds(60));
  CHECK(silent.to_remove == std::vector<std::pair<std::string, milliseconds>>{{"a:1", seconds(60)}});
  // A lone worker silent is a silent majority too.
  silent = FindSilentWorkers({{"only:1", now - seconds(15)}}, now, seconds(10), seconds(60));
  CHECK(silent.majority_silent);
  CHECK(silent.to_remove.empty());
}

TEST_CASE("silent workers: the first of workers cut off together to time out is judged with the others",
          "[dispatcher][liveness]") {
  // Cut off at once, they cross the timeout a heartbeat interval apart:
  // when the first does, the other is silent past half of it.
  const TimePoint now{seconds(1000)};
  const std::map<std::string, TimePoint> heard = {{"a:1", now - milliseconds(10100)},
                                                  {"b:1", now - milliseconds(9100)}};
  SilentWorkers silent = FindSilentWorkers(heard, now, seconds(10), seconds(60));
  CHECK(silent.silent == 2);
  CHECK(silent.majority_silent);
  CHECK(silent.to_remove.empty());
  // Nobody past the timeout yet: nothing is suspected.
  silent = FindSilentWorkers({{"a:1", now - seconds(9)}, {"b:1", now - seconds(9)}}, now, seconds(10),
                             seconds(60));
  CHECK(silent.silent == 2);
  CHECK_FALSE(silent.majority_silent);
  CHECK(silent.to_remove.empty());
  // One silent and one heard: the silent one alone is lost at the timeout.
  silent = FindSilentWorkers({{"a:1", now - milliseconds(10100)}, {"b:1", now - milliseconds(300)}}, now,
                             seconds(10), seconds(60));
  CHECK_FALSE(silent.majority_silent);
  CHECK(Removed(silent) == std::vector<std::string>{"a:1"});
}

TEST_CASE("silent workers: when most are heard again, the rest keep the longer timeout for that long",
          "[dispatcher][liveness]") {
  const TimePoint now{seconds(1000)};
  // a:1 and b:1 came back 5 s ago; c:1, silent for 20 s, has not yet: its
  // connection attempt from the cut may still be in its SYN retries.
  const TimePoint majority_ended = now - seconds(5);
  const std::map<std::string, TimePoint> heard = {
      {"a:1", now - milliseconds(100)}, {"b:1", now - milliseconds(50)}, {"c:1", now - seconds(20)}};
  const WorkerHeardTimes excused = {{"c:1", majority_ended}};
  SilentWorkers silent = FindSilentWorkers(heard, now, seconds(10), seconds(60), excused);
  CHECK_FALSE(silent.majority_silent);
  CHECK(silent.to_remove.empty());
  // Not excused, it is lost at the timeout.
  silent = FindSilentWorkers(heard, now, seconds(10), seconds(60));
  CHECK(silent.to_remove == std::vector<std::pair<std::string, milliseconds>>{{"c:1", seconds(10)}});
  // Heard once since the majority ended, then silent past the timeout
  // while the others are heard: its connection may be waiting out TCP's
  // backed-off retransmission timer. Still excused; not excused, lost.
  const TimePoint checked = now + seconds(10);
  const std::map<std::string, TimePoint> stalled = {{"a:1", checked - milliseconds(100)},
                                                    {"b:1", checked - milliseconds(50)},
                                                    {"c:1", majority_ended + seconds(1)}};
  silent = FindSilentWorkers(stalled, checked, seconds(10), seconds(60), excused);
  CHECK_FALSE(silent.majority_silent);
  CHECK(silent.to_remove.empty());
  silent = FindSilentWorkers(stalled, checked, seconds(10), seconds(60));
  CHECK(Removed(silent) == std::vector<std::string>{"c:1"});
  // The excuse ends 60 s after the majority did: then the timeout is 10 s.
  const TimePoint minute_on = majority_ended + seconds(60);
  silent = FindSilentWorkers({{"a:1", minute_on - milliseconds(100)},
                              {"b:1", minute_on - milliseconds(50)},
                              {"c:1", minute_on - seconds(11)}},
                             minute_on, seconds(10), seconds(60), excused);
  CHECK(silent.to_remove == std::vector<std::pair<std::string, milliseconds>>{{"c:1", seconds(10)}});
  // Excused but silent past the longer timeout too: lost.
  const std::map<std::string, TimePoint> later = {
      {"a:1", now - milliseconds(100)}, {"b:1", now - milliseconds(50)}, {"c:1", now - seconds(61)}};
  silent = FindSilentWorkers(later, now, seconds(10), seconds(60), excused);
  CHECK(silent.to_remove == std::vector<std::pair<std::string, milliseconds>>{{"c:1", seconds(60)}});
  // The silent ones are what the next excuse is made of.
  CHECK(silent.silent_workers == WorkerHeardTimes{{"c:1", now - seconds(61)}});
}

TEST_CASE("silent workers: a longer timeout below worker_timeout_ms changes nothing, and none known is none",
          "[dispatcher][liveness]") {
  const TimePoint now{seconds(1000)};
  const SilentWorkers silent = FindSilentWorkers({{"a:1", now - seconds(11)}}, now, seconds(10), seconds(5));
  CHECK(silent.to_remove == std::vector<std::pair<std::string, milliseconds>>{{"a:1", seconds(10)}});
  const SilentWorkers none = FindSilentWorkers({}, now, seconds(10), seconds(60));
  CHECK(none.known == 0);
  CHECK_FALSE(none.majority_silent);
  CHECK(none.to_remove.empty());
}

}  // namespace
}  // namespace sluice::dispatcher
