// `sluice status`: one GetStatus call to the dispatcher, shown as tables or
// JSON.
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "google/protobuf/util/json_util.h"
#include "service/dispatcher_client.h"
#include "service/grpc_util.h"
#include "service/job_params.h"
#include "sluice/proto/service.grpc.pb.h"

namespace sluice::cli {
namespace {

using Row = std::vector<std::string>;

// Columns padded to their widest cell, two spaces apart, under a heading
// that counts the rows; no table when there are none.
void AppendTable(const std::string& title, const Row& header, const std::vector<Row>& rows,
                 std::string* out) {
  absl::StrAppend(out, title, ": ", rows.size(), "\n");
  if (rows.empty()) return;
  std::vector<size_t> widths(header.size());
  for (size_t column = 0; column < header.size(); ++column) {
    widths[column] = header[column].size();
    for (const Row& row : rows) widths[column] = std::max(widths[column], row[column].size());
  }
  auto append_row = [&](const Row& row) {
    std::string line = " ";
    for (size_t column = 0; column < row.size(); ++column) {
      absl::StrAppend(&line, " ", row[column]);
      // The last column is not padded: no trailing spaces.
      if (column + 1 < row.size()) line.append(widths[column] - row[column].size() + 1, ' ');
    }
    absl::StrAppend(out, line, "\n");
  };
  append_row(header);
  for (const Row& row : rows) append_row(row);
}

template <typename Container>
std::string JoinOrDash(const Container& values) {
  return values.empty() ? "-" : absl::StrJoin(values, ",");
}

std::string HeartbeatAge(int64_t last_unix_ms, int64_t now_unix_ms) {
  if (last_unix_ms <= 0) return "never";
  return absl::StrFormat("%.1f s ago", std::max<int64_t>(0, now_unix_ms - last_unix_ms) / 1000.0);
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One GetStatus call within `timeout`, retries of a dispatcher that is not
// up yet included.
absl::StatusOr<proto::StatusSnapshot> FetchStatus(const std::string& address,
                                                  std::chrono::milliseconds timeout) {
  DispatcherClient dispatcher(address);
  proto::StatusSnapshot snapshot;
  // Every attempt ends by the same deadline, so that the command ends
  // within the timeout rather than a timeout after the last retry.
  absl::Status status =
      dispatcher.GetStatus({}, &snapshot,
                           {.attempt_timeout = timeout,
                            .retry_for = timeout,
                            .what = absl::StrCat("getting the status of the dispatcher at ", address)});
  if (IsUnreachable(status)) {
    return absl::UnavailableError(
        absl::StrCat("no dispatcher answered at ", address, " within ", timeout.count(), " ms"));
  }
  if (!status.ok()) {
    return absl::Status(
        status.code(), absl::StrCat("the dispatcher at ", address, " refused GetStatus: ", status.message()));
  }
  return snapshot;
}

}  // namespace

std::string FormatStatusTables(const proto::StatusSnapshot& snapshot, int64_t now_unix_ms) {
  std::string out;
  std::vector<Row> rows;
  for (const proto::WorkerInfo& worker : snapshot.workers()) {
    rows.push_back({worker.draining() ? absl::StrCat(worker.address(), " (draining)") : worker.address(),
                    JoinOrDash(worker.tags()), JoinOrDash(worker.tasks()),
                    HeartbeatAge(worker.last_heartbeat_unix_ms(), now_unix_ms)});
  }
  AppendTable("workers", {"ADDRESS", "TAGS", "TASKS", "LAST HEARTBEAT"}, rows, &out);

  rows.clear();
  for (const proto::StatusSnapshot::Dataset& dataset : snapshot.datasets()) {
    rows.push_back({dataset.dataset_id(), dataset.fingerprint()});
  }
  out += "\n";
  AppendTable("datasets", {"ID", "FINGERPRINT"}, rows, &out);

  rows.clear();
  for (const proto::StatusSnapshot::Job& job : snapshot.jobs()) {
    rows.push_back({absl::StrCat(job.job_id()), job.params().dataset_id(),
                    ProcessingModeName(job.params().processing_mode()),
                    job.params().job_name().empty() ? "-" : job.params().job_name()});
  }
  out += "\n";
  AppendTable("jobs", {"ID", "DATASET", "MODE", "NAME"}, rows, &out);

  rows.clear();
  for (const proto::StatusSnapshot::Iteration& iteration : snapshot.iterations()) {
    std::string state = iteration.collected() ? "collected" : iteration.finished() ? "finished" : "running";
    if (iteration.held_splits() > 0) {
      absl::StrAppend(&state, ", ", iteration.held_splits(), " split",
                      iteration.held_splits() == 1 ? "" : "s", " held until ", iteration.awaiting_reports(),
                      " consumer", iteration.awaiting_reports() == 1 ? " reports" : "s report");
    }
    rows.push_back({absl::StrCat(iteration.iteration_id()), absl::StrCat(iteration.job_id()),
                    absl::StrCat(iteration.repetition()), absl::StrCat(iteration.num_clients()), state});
  }
  out += "\n";
  AppendTable("iterations", {"ID", "JOB", "REPETITION", "CLIENTS", "STATE"}, rows, &out);

  rows.clear();
  for (const proto::TaskInfo& task : snapshot.tasks()) {
    rows.push_back({absl::StrCat(task.task_id()), absl::StrCat(task.iteration_id()), task.worker_address()});
  }
  out += "\n";
  AppendTable("tasks", {"ID", "ITERATION", "WORKER"}, rows, &out);

  // The autoscaling advice, once a job has readers that count: per job,
  // and (for the cluster token) the cluster's line.
  const proto::ScalingAdvice& scaling = snapshot.scaling();
  if (scaling.jobs().empty()) return out;
  rows.clear();
  for (const proto::ScalingAdvice::Job& job : scaling.jobs()) {
    rows.push_back({absl::StrCat(job.job_id()), job.job_name().empty() ? "-" : job.job_name(),
                    absl::StrFormat("%.0f%%", job.wait_fraction() * 100),
                    absl::StrFormat("%.0f%%", job.utilisation() * 100), absl::StrCat(job.workers()),
                    absl::StrCat(job.recommended_workers())});
  }
  out += "\n";
  AppendTable("scaling", {"JOB", "NAME", "WAITING", "BUSY", "WORKERS", "RECOMMENDED"}, rows, &out);
  if (!scaling.advice().empty()) {
    absl::StrAppend(&out, scaling.advice(), " (recommended: ", scaling.recommended_workers(), " workers, ",
                    scaling.workers(), " serving)\n");
  }
  return out;
}

std::string StatusToJson(const proto::StatusSnapshot& snapshot) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Fails only for messages with Any fields or invalid UTF-8, which a
  // snapshot of proto3 strings from the dispatcher does not have.
  (void)google::protobuf::util::MessageToJsonString(snapshot, &json, options);
  return json;
}

absl::StatusOr<std::string> DispatcherAddress(const std::string& service, int64_t timeout_ms) {
  absl::StatusOr<std::string> address = ParseServiceAddress(service);
  if (!address.ok()) return address.status();
  if (timeout_ms <= 0)
    return absl::InvalidArgumentError(absl::StrCat("--timeout-ms must be > 0, got ", timeout_ms));
  return address;
}

int ShowStatus(const StatusOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::string> address = DispatcherAddress(options.service, options.timeout_ms);
  if (!address.ok()) return Fail(address.status(), err, true);
  absl::StatusOr<proto::StatusSnapshot> snapshot =
      FetchStatus(*address, std::chrono::milliseconds(options.timeout_ms));
  if (!snapshot.ok()) return Fail(snapshot.status(), err, false);
  if (options.json) {
    out << StatusToJson(*snapshot) << "\n";
  } else {
    out << "dispatcher: " << *address << "\n\n" << FormatStatusTables(*snapshot, NowUnixMs());
  }
  out.flush();
  return 0;
}

}  // namespace sluice::cli
