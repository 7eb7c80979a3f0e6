// When a request to object storage is tried again, and how long to wait:
// exponential backoff with jitter, bounded in attempts. The clock and the
// random draw are passed in, so that the tests run the policy on a fake
// clock and exact numbers.
#ifndef SLUICE_PIPELINE_IO_RETRY_POLICY_H_
#define SLUICE_PIPELINE_IO_RETRY_POLICY_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sluice::io {

struct RetryPolicy {
  // Tries in all, the first included; 1 means no retry.
  int max_attempts = 6;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
};

// An HTTP status worth trying again: 5xx, 429 (and S3's SlowDown, a 503),
// 408. Other 4xx fail at once.
bool IsRetryableHttpStatus(long status);

// The wait before retry number `retry` (1 for the second attempt):
// "equal jitter", half of min(max_backoff, initial * 2^(retry-1)) plus
// `unit_random` (in [0, 1)) times the other half, so waits grow, never
// synchronise across readers, and never reach zero.
absl::Duration BackoffBefore(const RetryPolicy& policy, int retry, double unit_random);

// What RetryLoop needs from time and chance; the real one sleeps.
struct RetryEnvironment {
  std::function<void(absl::Duration)> sleep;
  std::function<double()> unit_random;
  static RetryEnvironment Real();
};

// One attempt's outcome: OK, a failure worth retrying, or a final one.
struct AttemptResult {
  absl::Status status;
  bool retryable = false;
};

// Runs `attempt` (given its number, from 1) until it succeeds, fails for
// good, or max_attempts are spent; returns its last status, which for a
// retryable failure after the last attempt says how many were made.
absl::Status RetryLoop(const RetryPolicy& policy, const RetryEnvironment& environment,
                       const std::function<AttemptResult(int attempt)>& attempt);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_RETRY_POLICY_H_
