// DispatcherImpl's face to people and scrapers: /status.json for the
// status page, and the registration of the gauges /metrics computes from
// the state at each scrape (dispatcher/state_metrics.h).
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/json_writer.h"
#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/state_metrics.h"
#include "pipeline/builder.h"
#include "service/grpc_util.h"
#include "service/job_params.h"

namespace sluice::dispatcher {
namespace {

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
  auto source = source_splits_.find(params.dataset_id());
  const DispatcherState::Dataset* dataset = state_.FindDataset(params.dataset_id());
  if (source == source_splits_.end() || !source->second.ok() || dataset == nullptr) return -1;
  const int64_t per_split =
      PositionsPerSplit(dataset->def, source->second->per_file, SplitOptionsFor(params));
  return (source->second->num_positions + per_split - 1) / per_split;
}

std::string DispatcherImpl::StatusJson(const Caller& caller) {
  const int64_t now_ms = UnixMillis();
  std::string out;
  JsonWriter json(&out);
  json.BeginObject()
      .String("version", kServerVersion)
      .Int("now_ms", now_ms)
      .Double("uptime_seconds", std::chrono::duration<double>(Clock::now() - created_).count());
  if (!caller.SeesAll()) json.String("tenant", *caller.tenant);
  absl::MutexLock lock(&mu_);
  json.BeginArray("workers");
  for (const auto& [address, worker] : state_.workers()) {
    json.BeginObject().String("address", address).BeginArray("tags");
    for (const std::string& tag : worker.tags) json.String(nullptr, tag);
    json.End(']').String("state", "alive");
    auto heartbeat = worker_heartbeat_unix_ms_.find(address);
    json.Int("last_heartbeat_ms_ago",
             heartbeat == worker_heartbeat_unix_ms_.end() ? -1 : now_ms - heartbeat->second);
    int64_t tasks = 0;
    for (const auto* task : state_.TasksOfWorker(address)) {
      tasks += !task->finished && MaySeeIteration(caller, task->iteration_id) ? 1 : 0;
    }
    json.Int("tasks", tasks);
    if (caller.SeesAll()) {
      auto throughput = worker_throughput_.find(address);
      const bool known = throughput != worker_throughput_.end();
      json.Double("elements_per_second", known ? throughput->second.elements_per_second : 0)
          .Double("bytes_per_second", known ? throughput->second.bytes_per_second : 0);
    }
    json.End('}');
  }
  json.End(']').BeginArray("datasets");
  for (const auto& [id, dataset] : state_.datasets()) {
    if (!caller.MaySee(dataset.tenant)) continue;
    json.BeginObject().String("dataset_id", id).String("fingerprint", dataset.fingerprint).End('}');
  }
  json.End(']').BeginArray("jobs");
  for (const auto& [id, job] : state_.jobs()) {
    if (!caller.MaySee(job.params.tenant())) continue;
    json.BeginObject()
        .Int("job_id", id)
        .String("name", job.params.job_name())
        .String("dataset_id", job.params.dataset_id())
        .String("processing_mode", ProcessingModeName(job.params.processing_mode()))
        .Int("num_consumers", job.params.num_consumers())
        .End('}');
  }
  json.End(']').BeginArray("iterations");
  for (const auto& [id, iteration] : state_.iterations()) {
    if (!MaySeeIteration(caller, id)) continue;
    const DispatcherState::Job* job = state_.FindJob(iteration.job_id);
    int64_t returned = 0;
    for (const auto& [seq, run] : iteration.returned_splits) returned += run.count;
    json.BeginObject()
        .Int("iteration_id", id)
        .Int("job_id", iteration.job_id)
        .Int("repetition", iteration.repetition)
        .Bool("finished", iteration.finished || iteration.collected)
        .Int("clients", static_cast<int64_t>(iteration.clients.size()))
        .Int("splits_done", iteration.next_split_seq - 1 - returned)
        .Int("splits_total", job == nullptr ? -1 : SplitsTotal(iteration, job->params))
        .End('}');
  }
  json.End(']').BeginArray("recent_errors");
  if (caller.SeesAll()) {
    for (const spdlog::details::log_msg_buffer& message : RecentProblems()->last_raw()) {
      json.BeginObject()
          .Int("time_ms",
               std::chrono::duration_cast<std::chrono::milliseconds>(message.time.time_since_epoch()).count())
          .String("message", std::string_view(message.payload.data(), message.payload.size()))
          .End('}');
    }
  }
  json.End(']').End('}');
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
  for (const StateGauge& gauge : StateGauges()) {
    metric_handles_.push_back(
        registry.AddGaugeCallback(gauge.name, gauge.help, gauge.labels, [this, samples = gauge.samples] {
          absl::MutexLock lock(&mu_);
          return samples(state_);
        }));
  }
}

}  // namespace sluice::dispatcher
