#include "dispatcher/scaling.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace sluice::dispatcher {
namespace {

// The job's samples that `advice` has, one per active job.
MetricSamples PerJob(const Autoscaler::Advice& advice, double (*value)(const Autoscaler::JobAdvice&)) {
  MetricSamples samples;
  for (const Autoscaler::JobAdvice& job : advice.jobs) {
    samples.push_back({{job.tenant, absl::StrCat(job.job_id), job.job_name}, value(job)});
  }
  return samples;
}

MetricSamples Total(const Autoscaler::Advice& advice, double value) {
  if (advice.recommended_workers == 0) return {};  // not evaluated yet
  return {{{}, value}};
}

}  // namespace

std::vector<Autoscaler::JobInput> ScalingInputs(const DispatcherState& state) {
  std::vector<Autoscaler::JobInput> inputs;
  for (const auto& [job_id, job] : state.jobs()) {
    Autoscaler::JobInput input{
        .job_id = job_id, .job_name = job.params.job_name(), .tenant = job.params.tenant()};
    std::set<std::string> workers;
    for (const auto& [repetition, iteration_id] : job.iterations) {
      const auto* iteration = state.FindIteration(iteration_id);
      if (iteration == nullptr || iteration->finished || iteration->collected || iteration->error_code != 0) {
        continue;
      }
      input.clients.insert(input.clients.end(), iteration->clients.begin(), iteration->clients.end());
      for (int64_t task_id : iteration->tasks) {
        const auto* task = state.FindTask(task_id);
        if (task->finished || task->lost || state.FindWorker(task->worker_address) == nullptr) continue;
        input.tasks.push_back(task_id);
        if (!state.IsDraining(task->worker_address)) workers.insert(task->worker_address);
      }
    }
    if (input.clients.empty()) continue;
    input.workers = static_cast<int64_t>(workers.size());
    inputs.push_back(std::move(input));
  }
  return inputs;
}

int64_t ServingWorkers(const DispatcherState& state) {
  int64_t workers = 0;
  for (const auto& [address, worker] : state.workers()) workers += state.IsDraining(address) ? 0 : 1;
  return workers;
}

void FillScalingAdvice(const Autoscaler::Advice& advice, const Caller& caller, proto::ScalingAdvice* out) {
  for (const Autoscaler::JobAdvice& job : advice.jobs) {
    if (!caller.MaySee(job.tenant)) continue;
    proto::ScalingAdvice::Job* row = out->add_jobs();
    row->set_job_id(job.job_id);
    row->set_job_name(job.job_name);
    row->set_wait_fraction(job.wait_fraction);
    row->set_utilisation(job.utilisation);
    row->set_workers(job.workers);
    row->set_recommended_workers(job.recommended_workers);
  }
  if (!caller.SeesAll()) return;
  out->set_wait_fraction(advice.wait_fraction);
  out->set_utilisation(advice.utilisation);
  out->set_workers(advice.workers);
  out->set_recommended_workers(advice.recommended_workers);
  out->set_advice(AdviceLine(advice));
}

void WriteScalingJson(const Autoscaler::Advice& advice, const Caller& caller, JsonWriter& json) {
  json.BeginObject("scaling").BeginArray("jobs");
  for (const Autoscaler::JobAdvice& job : advice.jobs) {
    if (!caller.MaySee(job.tenant)) continue;
    json.BeginObject()
        .Int("job_id", job.job_id)
        .String("name", job.job_name)
        .Double("wait_fraction", job.wait_fraction)
        .Double("utilisation", job.utilisation)
        .Int("workers", job.workers)
        .Int("recommended_workers", job.recommended_workers)
        .End('}');
  }
  json.End(']');
  if (caller.SeesAll()) {
    json.Double("wait_fraction", advice.wait_fraction)
        .Double("utilisation", advice.utilisation)
        .Int("workers", advice.workers)
        .Int("recommended_workers", advice.recommended_workers)
        .String("advice", AdviceLine(advice));
  }
  json.End('}');
}

const std::vector<ScalingGauge>& ScalingGauges() {
  static const std::vector<std::string> kJobLabels = {"tenant", "job_id", "job_name"};
  static const auto* gauges = new std::vector<ScalingGauge>{
      {"sluice_recommended_workers",
       "workers the autoscaling model recommends for the active jobs (docs/design.md, Autoscaling)",
       {},
       [](const Autoscaler::Advice& advice) {
         return Total(advice, static_cast<double>(advice.recommended_workers));
       }},
      {"sluice_trainer_wait_fraction",
       "fraction of the trainers' time spent waiting for elements (smoothed)",
       {},
       [](const Autoscaler::Advice& advice) { return Total(advice, advice.wait_fraction); }},
      {"sluice_worker_utilisation",
       "fraction of the active tasks' pipeline time spent producing, not waiting for room (smoothed)",
       {},
       [](const Autoscaler::Advice& advice) { return Total(advice, advice.utilisation); }},
      {"sluice_job_recommended_workers", "workers the autoscaling model recommends for one job", kJobLabels,
       [](const Autoscaler::Advice& advice) {
         return PerJob(advice, [](const Autoscaler::JobAdvice& job) {
           return static_cast<double>(job.recommended_workers);
         });
       }},
      {"sluice_job_wait_fraction",
       "fraction of one job's trainers' time spent waiting for elements (smoothed)", kJobLabels,
       [](const Autoscaler::Advice& advice) {
         return PerJob(advice, [](const Autoscaler::JobAdvice& job) { return job.wait_fraction; });
       }},
      {"sluice_job_utilisation", "fraction of one job's tasks' pipeline time spent producing (smoothed)",
       kJobLabels,
       [](const Autoscaler::Advice& advice) {
         return PerJob(advice, [](const Autoscaler::JobAdvice& job) { return job.utilisation; });
       }},
  };
  return *gauges;
}

}  // namespace sluice::dispatcher
