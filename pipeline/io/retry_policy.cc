#include "pipeline/io/retry_policy.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"

namespace sluice::io {

bool IsRetryableHttpStatus(long status) { return status >= 500 || status == 429 || status == 408; }

absl::Duration BackoffBefore(const RetryPolicy& policy, int retry, double unit_random) {
  absl::Duration ceiling = policy.initial_backoff;
  for (int i = 1; i < retry && ceiling < policy.max_backoff; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, policy.max_backoff);
  const double random = std::clamp(unit_random, 0.0, 1.0);
  return ceiling / 2 + (ceiling / 2) * random;
}

RetryEnvironment RetryEnvironment::Real() {
  return {.sleep = [](absl::Duration wait) { absl::SleepFor(wait); },
          .unit_random =
              [] {
                thread_local std::mt19937_64 engine{std::random_device{}()};
                return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
              }};
}

absl::Status RetryLoop(const RetryPolicy& policy, const RetryEnvironment& environment,
                       const std::function<AttemptResult(int attempt)>& attempt) {
  const int attempts = std::max(policy.max_attempts, 1);
  for (int n = 1;; ++n) {
    AttemptResult result = attempt(n);
    if (result.status.ok() || !result.retryable) return result.status;
    if (n >= attempts) {
      return absl::Status(result.status.code(),
                          absl::StrCat(result.status.message(), " (after ", n, " attempts)"));
    }
    environment.sleep(BackoffBefore(policy, n, environment.unit_random()));
  }
}

}  // namespace sluice::io
