#include "bench/control_plane/sim_fleet.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "service/grpc_util.h"

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRpcDeadline = std::chrono::seconds(10);

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// One asynchronous call: its context and messages live until its callback.
template <typename Request, typename Response>
struct Call {
  grpc::ClientContext context;
  Request request;
  Response response;
  Clock::time_point start = Clock::now();
  Call() {
    context.set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
    if constexpr (requires { request.mutable_version(); }) {
      request.mutable_version()->set_protocol_version(kProtocolVersion);
    }
  }
};

template <typename Request, typename Response, typename Method>
absl::Status CallNow(Method method, Request request, Response* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  request.mutable_version()->set_protocol_version(kProtocolVersion);
  grpc::Status status = method(&context, request, response);
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  return absl::OkStatus();
}

}  // namespace

void LatencyLog::Add(double micros, bool ok) {
  absl::MutexLock lock(&mu_);
  micros_.push_back(static_cast<float>(micros));
  if (!ok) ++errors_;
}

void LatencyLog::Reset() {
  absl::MutexLock lock(&mu_);
  micros_.clear();
  errors_ = 0;
}

LatencyLog::Summary LatencyLog::Summarize() const {
  std::vector<float> sorted;
  Summary summary;
  {
    absl::MutexLock lock(&mu_);
    sorted = micros_;
    summary.errors = errors_;
  }
  summary.calls = static_cast<int64_t>(sorted.size());
  if (sorted.empty()) return summary;
  std::sort(sorted.begin(), sorted.end());
  auto at = [&](double q) {
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(std::ceil(q * sorted.size())) - 1);
    return static_cast<double>(sorted[i]);
  };
  summary.p50 = at(0.5);
  summary.p99 = at(0.99);
  summary.p999 = at(0.999);
  summary.max = sorted.back();
  return summary;
}

std::string SimFleet::WorkerAddress(int index) {
  // Distinct loopback addresses on port 1, where nothing listens: the
  // dispatcher's pushes of new tasks fail at once, and the heartbeats carry
  // the tasks, as they do for any worker a push does not reach.
  return absl::StrCat("127.1.", index / 250, ".", index % 250 + 1, ":1");
}

SimFleet::SimFleet(Options options) : options_(std::move(options)) {
  for (int i = 0; i < std::max(1, options_.connections); ++i) {
    grpc::ChannelArguments args;
    // A channel of its own, not one shared connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("sluice.bench.connection", i);
    args.SetMaxReceiveMessageSize(-1);
    channels_.push_back(
        grpc::CreateCustomChannel(options_.dispatcher, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(proto::DispatcherService::NewStub(channels_.back()));
  }
  for (int i = 0; i < options_.workers; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->address = WorkerAddress(i);
    worker->incarnation = absl::StrCat("sim", i);
    workers_.push_back(std::move(worker));
  }
}

SimFleet::~SimFleet() {
  stopping_ = true;
  if (scheduler_.joinable()) scheduler_.join();
  const auto give_up = Clock::now() + std::chrono::seconds(15);
  while ((leasers_running_ > 0 || worker_in_flight_ > 0 || client_in_flight_ > 0) && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void SimFleet::SendWorkerHeartbeat(int index, std::function<void()> done) {
  Worker& worker = *workers_[index];
  if (options_.baseline && !done) {
    auto* call = new Call<proto::GetVersionRequest, proto::GetVersionResponse>;
    ++worker_in_flight_;
    StubFor(index).async()->GetVersion(&call->context, &call->request, &call->response,
                                       [this, call](grpc::Status status) {
                                         worker_heartbeats_.Add(MicrosSince(call->start), status.ok());
                                         delete call;
                                         --worker_in_flight_;
                                       });
    return;
  }
  auto* call = new Call<proto::WorkerHeartbeatRequest, proto::WorkerHeartbeatResponse>;
  call->request.set_worker_address(worker.address);
  call->request.set_incarnation(worker.incarnation);
  {
    absl::MutexLock lock(&worker.mu);
    for (int64_t task : worker.tasks) call->request.add_current_tasks(task);
  }
  ++worker_in_flight_;
  StubFor(index).async()->WorkerHeartbeat(
      &call->context, &call->request, &call->response, [this, call, &worker, done](grpc::Status status) {
        worker_heartbeats_.Add(MicrosSince(call->start), status.ok());
        if (status.ok()) {
          std::vector<Task> added;
          {
            absl::MutexLock lock(&worker.mu);
            for (const proto::TaskDef& task : call->response.new_tasks()) {
              if (std::find(worker.tasks.begin(), worker.tasks.end(), task.task_id()) != worker.tasks.end())
                continue;
              worker.tasks.push_back(task.task_id());
              added.push_back({task.task_id(), task.iteration_id()});
            }
            for (int64_t gone : call->response.tasks_to_delete()) {
              worker.tasks.erase(std::remove(worker.tasks.begin(), worker.tasks.end(), gone),
                                 worker.tasks.end());
            }
          }
          if (!added.empty()) {
            absl::MutexLock lock(&tasks_mu_);
            for (const Task& task : added) {
              if (task_index_.emplace(task.task_id, static_cast<int>(tasks_.size())).second)
                tasks_.push_back(task);
            }
          }
        }
        delete call;
        --worker_in_flight_;
        if (done) done();
      });
}

void SimFleet::SendClientHeartbeat(int index) {
  const Client& client = clients_[index];
  auto* call = new Call<proto::ClientHeartbeatRequest, proto::ClientHeartbeatResponse>;
  call->request.set_iteration_client_id(client.client_id);
  call->request.set_client_secret(client.secret);
  call->request.set_known_task_list(known_task_lists_[index].load());
  {
    absl::MutexLock lock(&tasks_mu_);
    std::vector<int64_t>& done = completed_[client.iteration_id];
    call->request.mutable_completed_splits()->Add(done.begin(), done.end());
    done.clear();
  }
  ++client_in_flight_;
  StubFor(index).async()->ClientHeartbeat(
      &call->context, &call->request, &call->response, [this, call, index](grpc::Status status) {
        const bool ok = status.ok() && call->response.error_code() == 0;
        if (ok) known_task_lists_[index] = call->response.task_list();
        client_heartbeats_.Add(MicrosSince(call->start), ok);
        if (ok) {
          response_bytes_ += static_cast<int64_t>(call->response.ByteSizeLong());
          ++responses_;
          if (call->response.lost_tasks_size() > 0) {
            const Clock::time_point now = Clock::now();
            absl::MutexLock lock(&tasks_mu_);
            for (const proto::LostTask& lost : call->response.lost_tasks()) {
              lost_seen_.emplace(lost.worker_address(), now);
            }
          }
        }
        delete call;
        --client_in_flight_;
      });
}

void SimFleet::SendGetSplits() {
  if (stopping_) {
    --leasers_running_;
    return;
  }
  Task task{};
  {
    thread_local std::mt19937_64 random(std::random_device{}());
    absl::MutexLock lock(&tasks_mu_);
    task = tasks_[random() % tasks_.size()];
  }
  auto* call = new Call<proto::GetSplitsRequest, proto::GetSplitsResponse>;
  call->request.set_iteration_id(task.iteration_id);
  call->request.set_task_id(task.task_id);
  call->request.set_max_splits(options_.splits_per_request);
  call->request.set_request_id(++request_ids_);
  StubFor(static_cast<int>(task.task_id))
      .async()
      ->GetSplits(&call->context, &call->request, &call->response, [this, call](grpc::Status status) {
        get_splits_.Add(MicrosSince(call->start), status.ok());
        if (status.ok() && call->response.splits_size() > 0) {
          int64_t leased = 0;
          absl::MutexLock lock(&tasks_mu_);
          std::vector<int64_t>& done = completed_[call->request.iteration_id()];
          for (const proto::SplitProto& split : call->response.splits()) {
            const int64_t count = std::max<int64_t>(1, split.count());
            for (int64_t s = 0; s < count; ++s) done.push_back(split.seq() + s);
            leased += count;
          }
          splits_leased_ += leased;
        }
        if (!status.ok())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));  // not a tight retry loop
        delete call;
        SendGetSplits();
      });
}

absl::Status SimFleet::CreateJobsAndClients() {
  proto::DispatcherService::Stub& stub = *stubs_[0];
  proto::GetOrRegisterDatasetRequest dataset;
  proto::RangeOp* range = dataset.mutable_dataset()->add_steps()->mutable_range();
  range->set_stop(int64_t{1} << 50);
  range->set_step(1);
  proto::GetOrRegisterDatasetResponse registered;
  if (absl::Status s =
          CallNow([&](auto* c, const auto& r, auto* p) { return stub.GetOrRegisterDataset(c, r, p); },
                  dataset, &registered);
      !s.ok()) {
    return s;
  }
  const int jobs = std::max(1, std::min(options_.jobs, std::max(1, options_.clients)));
  std::vector<int64_t> job_ids;
  for (int j = 0; j < jobs; ++j) {
    proto::GetOrCreateJobRequest request;
    request.mutable_params()->set_dataset_id(registered.dataset_id());
    request.mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
    request.mutable_params()->set_job_name(absl::StrCat("sim-job-", j));
    proto::GetOrCreateJobResponse job;
    if (absl::Status s = CallNow(
            [&](auto* c, const auto& r, auto* p) { return stub.GetOrCreateJob(c, r, p); }, request, &job);
        !s.ok()) {
      return s;
    }
    job_ids.push_back(job.job_id());
  }
  known_task_lists_ = std::make_unique<std::atomic<int64_t>[]>(std::max(1, options_.clients));
  for (int c = 0; c < options_.clients; ++c) {
    known_task_lists_[c] = 0;
    proto::GetOrCreateIterationRequest request;
    request.set_job_id(job_ids[c % jobs]);
    proto::GetOrCreateIterationResponse iteration;
    if (absl::Status s =
            CallNow([&](auto* ctx, const auto& r, auto* p) { return stub.GetOrCreateIteration(ctx, r, p); },
                    request, &iteration);
        !s.ok()) {
      return s;
    }
    clients_.push_back({job_ids[c % jobs], iteration.iteration_id(), iteration.iteration_client_id(),
                        iteration.client_secret()});
  }
  return absl::OkStatus();
}

absl::Status SimFleet::Start(std::chrono::seconds timeout) {
  const auto give_up = Clock::now() + timeout;
  // Registration: every worker's first heartbeat, a bounded number at once.
  std::atomic<int> registered{0};
  for (int i = 0; i < options_.workers; ++i) {
    while (worker_in_flight_ >= 256) std::this_thread::sleep_for(std::chrono::microseconds(200));
    SendWorkerHeartbeat(i, [&registered] { ++registered; });  // a real heartbeat, even for the baseline
  }
  while (registered < options_.workers) {
    if (Clock::now() > give_up) return absl::DeadlineExceededError("workers did not register in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (absl::Status s = CreateJobsAndClients(); !s.ok()) return s;
  window_start_ = Clock::now();
  scheduler_ = std::thread([this] { Schedule(); });
  const size_t expected =
      static_cast<size_t>(options_.workers) * std::max(1, std::min(options_.jobs, options_.clients));
  while (true) {
    {
      absl::MutexLock lock(&tasks_mu_);
      if (options_.clients == 0 || options_.baseline || tasks_.size() >= expected) break;
    }
    if (Clock::now() > give_up)
      return absl::DeadlineExceededError("workers were not given their tasks in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (options_.clients > 0) {
    for (int i = 0; i < options_.leasers; ++i) {
      ++leasers_running_;
      SendGetSplits();
    }
  }
  return absl::OkStatus();
}

void SimFleet::Schedule() {
  // Calls are spread evenly: the k-th heartbeat of the fleet is due at
  // k * interval / fleet size.
  const Clock::time_point start = Clock::now();
  int64_t worker_sent = 0, client_sent = 0;
  while (!stopping_) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const auto due = [elapsed](std::chrono::milliseconds interval, int fleet) {
      return static_cast<int64_t>(elapsed * 1000.0 / static_cast<double>(interval.count()) * fleet);
    };
    for (const int64_t worker_due = due(options_.worker_heartbeat, options_.workers);
         worker_sent < worker_due; ++worker_sent) {
      const int index = static_cast<int>(worker_sent % options_.workers);
      if (workers_[index]->silenced) continue;
      if (worker_in_flight_ >= options_.max_in_flight) {
        ++late_;
        continue;
      }
      SendWorkerHeartbeat(index);
    }
    for (const int64_t client_due = due(options_.client_heartbeat, options_.clients);
         client_sent < client_due; ++client_sent) {
      if (client_in_flight_ >= options_.max_in_flight) {
        ++late_;
        continue;
      }
      SendClientHeartbeat(static_cast<int>(client_sent % options_.clients));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void SimFleet::ResetCounters() {
  worker_heartbeats_.Reset();
  client_heartbeats_.Reset();
  get_splits_.Reset();
  late_ = 0;
  splits_leased_ = 0;
  response_bytes_ = 0;
  responses_ = 0;
  window_start_ = Clock::now();
}

SimFleet::Report SimFleet::Snapshot() const {
  Report report;
  report.seconds = std::chrono::duration<double>(Clock::now() - window_start_).count();
  report.worker_heartbeat = worker_heartbeats_.Summarize();
  report.client_heartbeat = client_heartbeats_.Summarize();
  report.get_splits = get_splits_.Summarize();
  report.splits_leased = splits_leased_;
  report.late_heartbeats = late_;
  report.client_response_bytes =
      responses_ > 0 ? static_cast<double>(response_bytes_) / static_cast<double>(responses_) : 0;
  absl::MutexLock lock(&tasks_mu_);
  report.tasks_known = static_cast<int64_t>(tasks_.size());
  return report;
}

std::vector<double> SimFleet::LoseWorkers(int count, std::chrono::seconds timeout) {
  count = std::min(count, options_.workers);
  const Clock::time_point silenced = Clock::now();
  for (int i = 0; i < count; ++i) workers_[i]->silenced = true;
  std::vector<double> seconds(count, -1);
  const auto give_up = silenced + timeout;
  while (Clock::now() < give_up) {
    int seen = 0;
    {
      absl::MutexLock lock(&tasks_mu_);
      for (int i = 0; i < count; ++i) {
        auto found = lost_seen_.find(workers_[i]->address);
        if (found == lost_seen_.end()) continue;
        seconds[i] = std::chrono::duration<double>(found->second - silenced).count();
        ++seen;
      }
    }
    if (seen == count) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return seconds;
}

}  // namespace sluice::bench
