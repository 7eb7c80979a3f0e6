// Memory stays bounded on both ends of the data plane (issue 19): the
// worker buffers up to its buffer_bytes, and a reader holds and asks for at
// most max_outstanding_requests elements, over TCP and shared memory alike.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "service/metrics.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/read_helpers.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using testing::TestCluster;

constexpr int64_t kElementBytes = 64 << 10;
constexpr int64_t kWorkerBufferBytes = 1 << 20;
constexpr int64_t kReaderBudget = 4;

// What this process's readers have received from workers so far.
double ClientBytesReceived() {
  std::istringstream lines(ProcessMetrics().Render());
  for (std::string line; std::getline(lines, line);) {
    const std::string name = "sluice_client_bytes_received_total ";
    if (line.rfind(name, 0) == 0) return std::stod(line.substr(name.size()));
  }
  return 0;  // nothing received yet
}

proto::WorkerStatusResponse WorkerStatus(int port) {
  auto stub = proto::WorkerService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  proto::WorkerStatusResponse status;
  REQUIRE(stub->GetStatus(&context, proto::WorkerStatusRequest{}, &status).ok());
  return status;
}

}  // namespace

TEST_CASE("memory bounds: a worker buffers up to buffer_bytes and a reader takes up to its budget",
          "[service][frame][memory]") {
  const std::string transport = GENERATE(std::string("tcp"), std::string("auto"));
  INFO("transport " << transport);
  TestCluster cluster(
      {.num_workers = 1,
       .worker_args = {"--buffer-bytes", std::to_string(kWorkerBufferBytes), "--log-level", "info"}});
  const double received_before = ClientBytesReceived();
  Iterator iterator = testing::MakeOrFail(Dataset::FromTensors({Tensor(DType::kUInt8, {kElementBytes})})
                                              .Repeat()
                                              .ReadFromService({.service = cluster.ServiceUrl(),
                                                                .max_outstanding_requests = kReaderBudget,
                                                                .transport = transport}));
  absl::StatusOr<std::optional<Element>> element = iterator.GetNextAsOptional();
  REQUIRE(element.ok());
  REQUIRE(element->has_value());
  REQUIRE((*element)->components.at(0).ByteSize() == static_cast<size_t>(kElementBytes));
  // The consumer stops here; the worker's pipeline is endless. Wait until
  // the worker's buffer is as full as it gets (bounded to 10 s).
  proto::WorkerStatusResponse status;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    status = WorkerStatus(cluster.WorkerPort(0));
  } while (status.buffered_bytes() < kWorkerBufferBytes && std::chrono::steady_clock::now() < give_up);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  status = WorkerStatus(cluster.WorkerPort(0));
  // A task takes one more element while under its limit, and no more.
  CHECK(status.buffered_bytes() >= kWorkerBufferBytes);
  CHECK(status.buffered_bytes() <= kWorkerBufferBytes + kElementBytes);
  // The reader has the element it handed out and at most its budget more,
  // each with a response's few hundred bytes of headers.
  const double received = ClientBytesReceived() - received_before;
  CHECK(received >= kElementBytes);
  CHECK(received <= (1 + kReaderBudget) * (kElementBytes + 512));
  // auto did read through shared memory (tcp never opens a session).
  const std::string log = testing::ReadFileOrEmpty(cluster.worker(0).log_path());
  CHECK(testing::CountOf(log, absl::StrCat("opened: reader pid ", getpid())) ==
        (transport == "auto" ? 1 : 0));
}

}  // namespace sluice
