// `sluice bench`: how fast a pipeline's consumer can read it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/input_reader.h"

namespace sluice::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kProgressInterval = std::chrono::milliseconds(500);

double PerSecond(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0; }

double Seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

const char* StopName(BenchStats::Stop stop) {
  switch (stop) {
    case BenchStats::Stop::kEndOfInput:
      return "end of input";
    case BenchStats::Stop::kError:
      return "stopped by an error";
    default:
      return "time limit";
  }
}

}  // namespace

std::string FormatBenchProgress(const BenchStats& stats) {
  return absl::StrFormat("%.1f s: %d batches, %.1f batches/s, %.1f elements/s, %.2f MB/s, %.0f%% waiting",
                         stats.wall_seconds, stats.batches, PerSecond(stats.batches, stats.wall_seconds),
                         PerSecond(stats.elements, stats.wall_seconds),
                         PerSecond(stats.bytes / 1e6, stats.wall_seconds),
                         100 * PerSecond(stats.wait_seconds, stats.wall_seconds));
}

std::string FormatBenchSummary(const BenchStats& stats) {
  std::string out;
  if (stats.replicas > 0) {
    absl::StrAppend(&out, "replicas:  ", stats.replicas,
                    " (a batch is one step; elements are summed over replicas)\n");
  }
  absl::StrAppend(&out,
                  absl::StrFormat("time:      %.2f s (%s)\n", stats.wall_seconds, StopName(stats.stopped_by)),
                  absl::StrFormat("batches:   %d (%.1f batches/s)\n", stats.batches,
                                  PerSecond(stats.batches, stats.wall_seconds)),
                  absl::StrFormat("elements:  %d (%.1f elements/s)\n", stats.elements,
                                  PerSecond(stats.elements, stats.wall_seconds)),
                  absl::StrFormat("bytes:     %d (%.2f MB/s)\n", stats.bytes,
                                  PerSecond(stats.bytes / 1e6, stats.wall_seconds)),
                  absl::StrFormat("waiting:   %.2f s in GetNext (%.1f%% of wall time)\n", stats.wait_seconds,
                                  100 * PerSecond(stats.wait_seconds, stats.wall_seconds)));
  // Start-up (a job, its tasks, a worker's first batch) weighs on a short run.
  if (stats.tokens >= 0) {
    absl::StrAppend(&out, absl::StrFormat("tokens:    %d (%.0f tokens/s), padding %.1f%% of %d positions\n",
                                          stats.tokens, PerSecond(stats.tokens, stats.wall_seconds),
                                          100 * PerSecond(stats.padding, stats.tokens + stats.padding),
                                          stats.tokens + stats.padding));
  }
  if (stats.first_batch_seconds >= 0) {
    absl::StrAppend(&out,
                    absl::StrFormat("first:     %.3f s to the first batch\n", stats.first_batch_seconds));
  }
  return out;
}

int RunBench(const BenchOptions& options, std::ostream& out, std::ostream& err) {
  if (!(options.seconds > 0) || !std::isfinite(options.seconds)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--seconds must be > 0, got ", options.seconds)), err,
                true);
  }
  absl::StatusOr<std::unique_ptr<InputReader>> reader =
      InputReader::Open(options.read, /*service_required=*/false);
  if (!reader.ok()) return Fail(reader.status(), err, !IsUnreachable(reader.status()));
  if (const int code = (*reader)->StartOrFail(err); code != 0) return code;

  BenchStats stats;
  stats.replicas = static_cast<int>(options.read.replicas.size());
  absl::Status failure;
  const Clock::time_point start = Clock::now();
  const Clock::time_point stop =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));
  Clock::time_point next_progress = start + kProgressInterval;
  while (true) {
    const Clock::time_point before = Clock::now();
    if (before >= stop) break;
    absl::StatusOr<bool> more = (*reader)->Next();
    const Clock::time_point now = Clock::now();
    stats.wait_seconds += Seconds(now - before);
    if (!more.ok()) {
      failure = more.status();
      stats.stopped_by = BenchStats::Stop::kError;
      break;
    }
    if (!*more) {
      stats.stopped_by = BenchStats::Stop::kEndOfInput;
      break;
    }
    const StepSize size = (*reader)->CurrentSize();
    if (stats.batches == 0) stats.first_batch_seconds = Seconds(now - start);
    ++stats.batches;
    stats.elements += size.rows;
    stats.bytes += size.bytes;
    if (size.tokens >= 0) {
      stats.tokens = std::max<int64_t>(stats.tokens, 0) + size.tokens;
      stats.padding += size.padding;
    }
    if (options.live_progress && now >= next_progress) {
      stats.wall_seconds = Seconds(now - start);
      // \033[K clears what a longer previous line left.
      out << "\r" << FormatBenchProgress(stats) << "\033[K" << std::flush;
      next_progress = now + kProgressInterval;
    }
  }
  stats.wall_seconds = Seconds(Clock::now() - start);
  if (options.live_progress) out << "\r\033[K";
  out << FormatBenchSummary(stats);
  out.flush();
  if (!failure.ok()) return Fail(failure, err, false);
  return 0;
}

}  // namespace sluice::cli
