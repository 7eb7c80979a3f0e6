#include "pipeline/io/retry_policy.h"

#include <catch2/catch.hpp>
#include <vector>

namespace sluice::io {
namespace {

// A clock that only records the waits asked of it, and a fixed draw.
struct FakeEnvironment {
  std::vector<absl::Duration> waits;
  double draw = 0.5;
  RetryEnvironment Get() {
    return {.sleep = [this](absl::Duration wait) { waits.push_back(wait); },
            .unit_random = [this] { return draw; }};
  }
};

TEST_CASE("retry policy: which HTTP statuses are tried again", "[io][retry]") {
  for (long status : {500L, 502L, 503L, 504L, 429L, 408L}) CHECK(IsRetryableHttpStatus(status));
  for (long status : {400L, 401L, 403L, 404L, 412L, 416L}) CHECK_FALSE(IsRetryableHttpStatus(status));
}

TEST_CASE("retry policy: backoff doubles with equal jitter up to its ceiling", "[io][retry]") {
  const RetryPolicy policy{.max_attempts = 10,
                           .initial_backoff = absl::Milliseconds(100),
                           .max_backoff = absl::Milliseconds(1000)};
  CHECK(BackoffBefore(policy, 1, 0.0) == absl::Milliseconds(50));
  CHECK(BackoffBefore(policy, 1, 1.0) == absl::Milliseconds(100));
  CHECK(BackoffBefore(policy, 2, 0.5) == absl::Milliseconds(150));
  CHECK(BackoffBefore(policy, 3, 0.0) == absl::Milliseconds(200));
  CHECK(BackoffBefore(policy, 4, 0.0) == absl::Milliseconds(400));
  CHECK(BackoffBefore(policy, 5, 0.0) == absl::Milliseconds(500));  // 1600 capped at 1000
  CHECK(BackoffBefore(policy, 60, 1.0) == absl::Milliseconds(1000));
}

TEST_CASE("retry policy: the loop retries what may pass, stops at once on what cannot", "[io][retry]") {
  const RetryPolicy policy{
      .max_attempts = 4, .initial_backoff = absl::Milliseconds(10), .max_backoff = absl::Milliseconds(1000)};
  FakeEnvironment fake;
  std::vector<int> attempts;
  absl::Status status = RetryLoop(policy, fake.Get(), [&](int attempt) -> AttemptResult {
    attempts.push_back(attempt);
    if (attempt < 3) return {absl::UnavailableError("GET u: HTTP 503 SlowDown"), true};
    return {absl::OkStatus(), false};
  });
  CHECK(status.ok());
  CHECK(attempts == std::vector<int>{1, 2, 3});
  CHECK(fake.waits == std::vector<absl::Duration>{absl::Milliseconds(7.5), absl::Milliseconds(15)});

  fake.waits.clear();
  attempts.clear();
  status = RetryLoop(policy, fake.Get(), [&](int attempt) -> AttemptResult {
    attempts.push_back(attempt);
    return {absl::UnavailableError("GET u: Connection reset by peer"), true};
  });
  CHECK(status.code() == absl::StatusCode::kUnavailable);
  CHECK(status.message() == "GET u: Connection reset by peer (after 4 attempts)");
  CHECK(attempts.size() == 4);
  CHECK(fake.waits.size() == 3);

  fake.waits.clear();
  attempts.clear();
  status = RetryLoop(policy, fake.Get(), [&](int attempt) -> AttemptResult {
    attempts.push_back(attempt);
    return {absl::NotFoundError("GET u: HTTP 404 NoSuchKey"), false};
  });
  CHECK(status.message() == "GET u: HTTP 404 NoSuchKey");
  CHECK(attempts.size() == 1);
  CHECK(fake.waits.empty());
}

}  // namespace
}  // namespace sluice::io
