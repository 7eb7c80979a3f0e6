#include "dispatcher/status_views.h"

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string_view>

#include "common/json_writer.h"
#include "dispatcher/scaling.h"
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

void FillWorkerInfo(const StatusSources& sources, const DispatcherState::Worker& worker, const Caller& caller,
                    proto::WorkerInfo* info) {
  info->set_address(worker.address);
  info->set_draining(sources.state.IsDraining(worker.address));
  for (const std::string& tag : worker.tags) info->add_tags(tag);
  for (const auto* task : sources.state.TasksOfWorker(worker.address)) {
    if (!task->finished && MaySeeIteration(sources.state, caller, task->iteration_id))
      info->add_tasks(task->id);
  }
  if (std::optional<int64_t> heartbeat = sources.workers.LastHeartbeatUnixMs(worker.address))
    info->set_last_heartbeat_unix_ms(*heartbeat);
}

}  // namespace

bool MaySeeIteration(const DispatcherState& state, const Caller& caller, int64_t iteration_id) {
  if (caller.SeesAll()) return true;
  const auto* iteration = state.FindIteration(iteration_id);
  return iteration != nullptr && caller.MaySee(state.FindJob(iteration->job_id)->params.tenant());
}

void FillWorkers(const StatusSources& sources, const Caller& caller, proto::GetWorkersResponse* response) {
  for (const auto& [address, worker] : sources.state.workers())
    FillWorkerInfo(sources, worker, caller, response->add_workers());
}

void FillStatusSnapshot(const StatusSources& sources, const Caller& caller, proto::StatusSnapshot* response) {
  const DispatcherState& state = sources.state;
  // A tenant sees the workers (which serve every tenant), and only its
  // own datasets, jobs, iterations and tasks.
  for (const auto& [address, worker] : state.workers())
    FillWorkerInfo(sources, worker, caller, response->add_workers());
  for (const auto& [id, dataset] : state.datasets()) {
    if (!caller.MaySee(dataset.tenant)) continue;
    auto* d = response->add_datasets();
    d->set_dataset_id(id);
    d->set_fingerprint(dataset.fingerprint);
  }
  for (const auto& [id, job] : state.jobs()) {
    if (!caller.MaySee(job.params.tenant())) continue;
    auto* j = response->add_jobs();
    j->set_job_id(id);
    *j->mutable_params() = job.params;
  }
  for (const auto& [id, iteration] : state.iterations()) {
    if (!MaySeeIteration(state, caller, id)) continue;
    auto* i = response->add_iterations();
    i->set_iteration_id(id);
    i->set_job_id(iteration.job_id);
    i->set_repetition(iteration.repetition);
    i->set_finished(iteration.finished);
    i->set_num_clients(static_cast<int64_t>(iteration.clients.size()));
    i->set_collected(iteration.collected);
    i->set_held_splits(CountSplits(iteration.held_splits));
    i->set_awaiting_reports(static_cast<int64_t>(iteration.awaiting_reports.size()));
  }
  for (const auto& [id, task] : state.tasks()) {
    if (!MaySeeIteration(state, caller, task.iteration_id)) continue;
    auto* t = response->add_tasks();
    t->set_task_id(id);
    t->set_iteration_id(task.iteration_id);
    t->set_worker_address(task.worker_address);
  }
}

std::string StatusJson(const StatusSources& sources, const Caller& caller, int64_t now_ms,
                       double uptime_seconds) {
  const DispatcherState& state = sources.state;
  std::string out;
  JsonWriter json(&out);
  json.BeginObject()
      .String("version", kServerVersion)
      .Int("now_ms", now_ms)
      .Double("uptime_seconds", uptime_seconds);
  if (!caller.SeesAll()) json.String("tenant", *caller.tenant);
  json.BeginArray("workers");
  for (const auto& [address, worker] : state.workers()) {
    json.BeginObject().String("address", address).BeginArray("tags");
    for (const std::string& tag : worker.tags) json.String(nullptr, tag);
    json.End(']').String("state", state.IsDraining(address) ? "draining" : "alive");
    const std::optional<int64_t> heartbeat = sources.workers.LastHeartbeatUnixMs(address);
    json.Int("last_heartbeat_ms_ago", heartbeat.has_value() ? now_ms - *heartbeat : -1);
    int64_t tasks = 0;
    for (const auto* task : state.TasksOfWorker(address)) {
      tasks += !task->finished && MaySeeIteration(state, caller, task->iteration_id) ? 1 : 0;
    }
    json.Int("tasks", tasks);
    if (caller.SeesAll()) {
      const WorkerActivity::Rate rate = sources.workers.RateOf(address);
      json.Double("elements_per_second", rate.elements_per_second)
          .Double("bytes_per_second", rate.bytes_per_second);
    }
    json.End('}');
  }
  json.End(']').BeginArray("datasets");
  for (const auto& [id, dataset] : state.datasets()) {
    if (!caller.MaySee(dataset.tenant)) continue;
    json.BeginObject().String("dataset_id", id).String("fingerprint", dataset.fingerprint).End('}');
  }
  json.End(']').BeginArray("jobs");
  for (const auto& [id, job] : state.jobs()) {
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
  for (const auto& [id, iteration] : state.iterations()) {
    if (!MaySeeIteration(state, caller, id)) continue;
    const DispatcherState::Job* job = state.FindJob(iteration.job_id);
    int64_t returned = 0;
    for (const auto& [seq, run] : iteration.returned_splits) returned += run.count;
    // Held splits are not done either: they run again once reported.
    const int64_t held = CountSplits(iteration.held_splits);
    json.BeginObject()
        .Int("iteration_id", id)
        .Int("job_id", iteration.job_id)
        .Int("repetition", iteration.repetition)
        .Bool("finished", iteration.finished || iteration.collected)
        .Int("clients", static_cast<int64_t>(iteration.clients.size()))
        .Int("splits_done", iteration.next_split_seq - 1 - returned - held)
        .Int("splits_total", job == nullptr ? -1 : sources.splits_total(iteration, job->params))
        .Int("held_splits", held)
        .Int("awaiting_reports", static_cast<int64_t>(iteration.awaiting_reports.size()))
        .End('}');
  }
  json.End(']');
  if (sources.scaling != nullptr) WriteScalingJson(*sources.scaling, caller, json);
  json.BeginArray("recent_errors");
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

void KeepRecentProblems() { RecentProblems(); }

}  // namespace sluice::dispatcher
