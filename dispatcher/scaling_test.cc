#include "dispatcher/scaling.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "client/dataset_internal.h"
#include "sluice/dataset.h"

namespace sluice::dispatcher {
namespace {

void ApplyOk(DispatcherState& state, const proto::Update& update) {
  const absl::Status status = state.Apply(update);
  INFO(status.ToString());
  REQUIRE(status.ok());
}

// Job 1 (tenant alpha) runs iteration 1 on three workers, one of them
// draining, with two clients; job 2 (tenant beta) only has a finished
// iteration.
DispatcherState TwoJobs() {
  DispatcherState state;
  proto::Update update;
  auto* dataset = update.mutable_register_dataset();
  dataset->set_dataset_id("d");
  dataset->set_fingerprint("f");
  *dataset->mutable_dataset() = internal::DefinitionOf(Dataset::Range(10));
  ApplyOk(state, update);
  for (const std::string address : {"w:1", "w:2", "w:3"}) {
    update.Clear();
    update.mutable_register_worker()->set_address(address);
    ApplyOk(state, update);
  }
  for (int64_t job : {1, 2}) {
    update.Clear();
    update.mutable_create_job()->set_job_id(job);
    update.mutable_create_job()->mutable_params()->set_dataset_id("d");
    update.mutable_create_job()->mutable_params()->set_job_name(job == 1 ? "train" : "eval");
    update.mutable_create_job()->mutable_params()->set_tenant(job == 1 ? "alpha" : "beta");
    ApplyOk(state, update);
    update.Clear();
    update.mutable_create_iteration()->set_iteration_id(job);
    update.mutable_create_iteration()->set_job_id(job);
    ApplyOk(state, update);
  }
  int64_t task = 0;
  for (int64_t iteration : {1, 2}) {
    for (const std::string address : {"w:1", "w:2", "w:3"}) {
      update.Clear();
      update.mutable_create_task()->set_task_id(++task);
      update.mutable_create_task()->set_iteration_id(iteration);
      update.mutable_create_task()->set_worker_address(address);
      ApplyOk(state, update);
    }
  }
  for (int64_t client : {10, 11}) {
    update.Clear();
    update.mutable_acquire_iteration_client()->set_iteration_client_id(client);
    update.mutable_acquire_iteration_client()->set_iteration_id(1);
    ApplyOk(state, update);
  }
  update.Clear();
  update.mutable_acquire_iteration_client()->set_iteration_client_id(20);
  update.mutable_acquire_iteration_client()->set_iteration_id(2);
  ApplyOk(state, update);
  for (int64_t finished : {4, 5, 6}) {
    update.Clear();
    update.mutable_finish_task()->set_task_id(finished);
    ApplyOk(state, update);
  }
  update.Clear();
  update.mutable_drain_worker()->set_address("w:3");
  ApplyOk(state, update);
  return state;
}

TEST_CASE("scaling: the inputs are the running iterations' clients, live tasks and serving workers",
          "[dispatcher][autoscaler]") {
  const DispatcherState state = TwoJobs();
  REQUIRE(state.FindIteration(2)->finished);
  const std::vector<Autoscaler::JobInput> inputs = ScalingInputs(state);
  REQUIRE(inputs.size() == 1);
  CHECK(inputs[0].job_id == 1);
  CHECK(inputs[0].job_name == "train");
  CHECK(inputs[0].tenant == "alpha");
  CHECK(inputs[0].clients == std::vector<int64_t>{10, 11});
  // w:3 drains: its task still serves, but it is not a worker to count on.
  CHECK(inputs[0].tasks == std::vector<int64_t>{1, 2, 3});
  CHECK(inputs[0].workers == 2);
  CHECK(ServingWorkers(state) == 2);
}

Autoscaler::Advice TwoTenants() {
  Autoscaler::Advice advice;
  advice.jobs.push_back({.job_id = 1,
                         .job_name = "train",
                         .tenant = "alpha",
                         .wait_fraction = 0.5,
                         .utilisation = 1,
                         .workers = 2,
                         .recommended_workers = 4});
  advice.jobs.push_back({.job_id = 2,
                         .job_name = "eval",
                         .tenant = "beta",
                         .wait_fraction = 0,
                         .utilisation = 0.25,
                         .workers = 2,
                         .recommended_workers = 1});
  advice.wait_fraction = 0.25;
  advice.utilisation = 0.5;
  advice.workers = 2;
  advice.recommended_workers = 4;
  return advice;
}

TEST_CASE("scaling: a tenant sees its own jobs' advice, and the totals are the cluster's",
          "[dispatcher][autoscaler]") {
  const Autoscaler::Advice advice = TwoTenants();
  proto::ScalingAdvice alpha;
  FillScalingAdvice(advice, Caller{.tenant = "alpha"}, &alpha);
  REQUIRE(alpha.jobs_size() == 1);
  CHECK(alpha.jobs(0).job_name() == "train");
  CHECK(alpha.jobs(0).recommended_workers() == 4);
  CHECK(alpha.recommended_workers() == 0);
  CHECK(alpha.advice().empty());
  proto::ScalingAdvice all;
  FillScalingAdvice(advice, Caller{}, &all);
  CHECK(all.jobs_size() == 2);
  CHECK(all.recommended_workers() == 4);
  CHECK(all.workers() == 2);
  CHECK(all.advice() == "trainers wait 25% of the time; about 2 more workers would remove it");

  std::string json;
  JsonWriter writer(&json);
  writer.BeginObject();
  WriteScalingJson(advice, Caller{.tenant = "beta"}, writer);
  writer.End('}');
  CHECK(json ==
        "{\"scaling\":{\"jobs\":[{\"job_id\":2,\"name\":\"eval\",\"wait_fraction\":0,\"utilisation\":0.25,"
        "\"workers\":2,\"recommended_workers\":1}]}}");

  // On /metrics the per-job gauges carry the tenant, which a tenant's
  // scrape keeps to its own; the totals carry none.
  for (const ScalingGauge& gauge : ScalingGauges()) {
    const MetricSamples samples = gauge.samples(advice);
    if (gauge.labels.empty()) {
      REQUIRE(samples.size() == 1);
    } else {
      REQUIRE(samples.size() == 2);
      CHECK(samples[0].first == std::vector<std::string>{"alpha", "1", "train"});
    }
    if (gauge.name == "sluice_recommended_workers") CHECK(samples[0].second == 4);
    if (gauge.name == "sluice_job_recommended_workers") CHECK(samples[1].second == 1);
    // Nothing before the first evaluation.
    if (gauge.labels.empty()) CHECK(gauge.samples(Autoscaler::Advice()).empty());
  }
}

}  // namespace
}  // namespace sluice::dispatcher
