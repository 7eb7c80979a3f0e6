// DispatcherImpl's face to people and scrapers: /status.json for the
// status page, and the gauges /metrics computes from the state at each
// scrape.
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "dispatcher/dispatcher_impl.h"
#include "pipeline/builder.h"
#include "service/grpc_util.h"
#include "service/job_params.h"

namespace sluice::dispatcher {
namespace {

void AppendKey(const char* key, std::string* out) {
  AppendJsonString(key, out);
  out->push_back(':');
}

void AppendString(const char* key, const std::string& value, std::string* out) {
  AppendKey(key, out);
  AppendJsonString(value, out);
}

void AppendNumber(const char* key, double value, std::string* out) {
  AppendKey(key, out);
  absl::StrAppend(out, value);
}

// Warnings and errors, kept for the page's "recent errors": one sink on
// the default logger, added at first use.
std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> RecentProblems() {
  static auto* sink = [] {
    auto* made = new std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt>(
        std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(20));
    (*made)->set_level(spdlog::level::warn);
    spdlog::default_logger()->sinks().push_back(*made);
    return made;
  }();
  return *sink;
}

}  // namespace

void DispatcherImpl::KeepRecentProblems() { RecentProblems(); }

int64_t DispatcherImpl::SplitsTotal(const DispatcherState::Iteration& iteration,
                                    const proto::JobParams& params) const {
  if (params.processing_mode() != proto::DISTRIBUTED_EPOCH || iteration.infinite) return -1;
  auto total = splits_total_.find(params.dataset_id());
  return total == splits_total_.end() ? -1 : total->second;
}

std::string DispatcherImpl::StatusJson() {
  const int64_t now_ms = UnixMillis();
  std::string out = "{";
  AppendString("version", kServerVersion, &out);
  out.push_back(',');
  AppendNumber("now_ms", static_cast<double>(now_ms), &out);
  out.push_back(',');
  AppendNumber("uptime_seconds", std::chrono::duration<double>(Clock::now() - created_).count(), &out);
  absl::MutexLock lock(&mu_);
  out += ",\"workers\":[";
  bool first = true;
  for (const auto& [address, worker] : state_.workers()) {
    if (!first) out.push_back(',');
    first = false;
    out.push_back('{');
    AppendString("address", address, &out);
    out += ",\"tags\":[";
    for (size_t i = 0; i < worker.tags.size(); ++i) {
      if (i > 0) out.push_back(',');
      AppendJsonString(worker.tags[i], &out);
    }
    out += "],";
    AppendString("state", "alive", &out);
    out.push_back(',');
    auto heartbeat = worker_heartbeat_unix_ms_.find(address);
    AppendNumber(
        "last_heartbeat_ms_ago",
        heartbeat == worker_heartbeat_unix_ms_.end() ? -1 : static_cast<double>(now_ms - heartbeat->second),
        &out);
    int64_t tasks = 0;
    for (const auto* task : state_.TasksOfWorker(address)) tasks += task->finished ? 0 : 1;
    out.push_back(',');
    AppendNumber("tasks", static_cast<double>(tasks), &out);
    auto throughput = worker_throughput_.find(address);
    const bool known = throughput != worker_throughput_.end();
    out.push_back(',');
    AppendNumber("elements_per_second", known ? throughput->second.elements_per_second : 0, &out);
    out.push_back(',');
    AppendNumber("bytes_per_second", known ? throughput->second.bytes_per_second : 0, &out);
    out.push_back('}');
  }
  out += "],\"datasets\":[";
  first = true;
  for (const auto& [id, dataset] : state_.datasets()) {
    if (!first) out.push_back(',');
    first = false;
    out.push_back('{');
    AppendString("dataset_id", id, &out);
    out.push_back(',');
    AppendString("fingerprint", dataset.fingerprint, &out);
    out.push_back('}');
  }
  out += "],\"jobs\":[";
  first = true;
  for (const auto& [id, job] : state_.jobs()) {
    if (!first) out.push_back(',');
    first = false;
    out.push_back('{');
    AppendNumber("job_id", static_cast<double>(id), &out);
    out.push_back(',');
    AppendString("name", job.params.job_name(), &out);
    out.push_back(',');
    AppendString("dataset_id", job.params.dataset_id(), &out);
    out.push_back(',');
    AppendString("processing_mode", ProcessingModeName(job.params.processing_mode()), &out);
    out.push_back(',');
    AppendNumber("num_consumers", static_cast<double>(job.params.num_consumers()), &out);
    out.push_back('}');
  }
  out += "],\"iterations\":[";
  first = true;
  for (const auto& [id, iteration] : state_.iterations()) {
    const DispatcherState::Job* job = state_.FindJob(iteration.job_id);
    if (!first) out.push_back(',');
    first = false;
    int64_t returned = 0;
    for (const auto& [seq, run] : iteration.returned_splits) returned += run.count;
    out.push_back('{');
    AppendNumber("iteration_id", static_cast<double>(id), &out);
    out.push_back(',');
    AppendNumber("job_id", static_cast<double>(iteration.job_id), &out);
    out.push_back(',');
    AppendNumber("repetition", static_cast<double>(iteration.repetition), &out);
    out += iteration.finished || iteration.collected ? ",\"finished\":true," : ",\"finished\":false,";
    AppendNumber("clients", static_cast<double>(iteration.clients.size()), &out);
    out.push_back(',');
    AppendNumber("splits_done", static_cast<double>(iteration.next_split_seq - 1 - returned), &out);
    out.push_back(',');
    AppendNumber("splits_total",
                 job == nullptr ? -1 : static_cast<double>(SplitsTotal(iteration, job->params)), &out);
    out.push_back('}');
  }
  out += "],\"recent_errors\":[";
  first = true;
  for (const spdlog::details::log_msg_buffer& message : RecentProblems()->last_raw()) {
    if (!first) out.push_back(',');
    first = false;
    out.push_back('{');
    AppendNumber(
        "time_ms",
        static_cast<double>(
            std::chrono::duration_cast<std::chrono::milliseconds>(message.time.time_since_epoch()).count()),
        &out);
    out.push_back(',');
    AppendString("message", std::string(message.payload.data(), message.payload.size()), &out);
    out.push_back('}');
  }
  out += "]}";
  return out;
}

void DispatcherImpl::NoteWorkerSent(const std::string& address, int64_t elements, int64_t bytes) {
  const int64_t now_ms = UnixMillis();
  WorkerThroughput& throughput = worker_throughput_[address];
  const int64_t elapsed_ms = now_ms - throughput.unix_ms;
  if (throughput.unix_ms > 0 && elapsed_ms > 0 && elements >= throughput.elements &&
      bytes >= throughput.bytes) {
    throughput.elements_per_second =
        static_cast<double>(elements - throughput.elements) * 1000.0 / elapsed_ms;
    throughput.bytes_per_second = static_cast<double>(bytes - throughput.bytes) * 1000.0 / elapsed_ms;
  }
  throughput.unix_ms = now_ms;
  throughput.elements = elements;
  throughput.bytes = bytes;
}

void DispatcherImpl::ExportMetrics(MetricsRegistry& registry) {
  auto locked = [this](std::function<MetricSamples()> read) {
    return [this, read = std::move(read)] {
      absl::MutexLock lock(&mu_);
      return read();
    };
  };
  metric_handles_.push_back(
      registry.AddGaugeCallback("sluice_workers", "workers registered and heard from", {},
                                locked([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                  return MetricSamples{{{}, static_cast<double>(state_.workers().size())}};
                                })));
  metric_handles_.push_back(registry.AddGaugeCallback(
      "sluice_datasets", "datasets registered", {}, locked([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return MetricSamples{{{}, static_cast<double>(state_.datasets().size())}};
      })));
  metric_handles_.push_back(
      registry.AddGaugeCallback("sluice_jobs", "jobs", {}, locked([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                  return MetricSamples{{{}, static_cast<double>(state_.jobs().size())}};
                                })));
  metric_handles_.push_back(registry.AddGaugeCallback(
      "sluice_iterations", "iterations by state", {"state"}, locked([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        double active = 0, finished = 0, collected = 0, failed = 0;
        for (const auto& [id, iteration] : state_.iterations()) {
          if (iteration.error_code != 0) {
            ++failed;
          } else if (iteration.collected) {
            ++collected;
          } else if (iteration.finished) {
            ++finished;
          } else {
            ++active;
          }
        }
        return MetricSamples{
            {{"active"}, active}, {{"finished"}, finished}, {{"collected"}, collected}, {{"failed"}, failed}};
      })));
  metric_handles_.push_back(registry.AddGaugeCallback(
      "sluice_splits_awaiting_reissue", "splits of lost tasks waiting to be handed out again", {},
      locked([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        double returned = 0;
        for (const auto& [id, iteration] : state_.iterations()) {
          for (const auto& [seq, run] : iteration.returned_splits) returned += static_cast<double>(run.count);
        }
        return MetricSamples{{{}, returned}};
      })));
}

}  // namespace sluice::dispatcher
