// Issue 32's attacks on the dispatcher's journal through real daemons:
// definitions that grew the snapshot past what recovery read (finding 2),
// a bit flipped in the last journal record dropped as torn, whose job id
// was then issued again (13), and journal files any local user could
// read (17).
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "service/grpc_util.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"
#include "tests/integration/test_cluster.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::ReadToEnd;
using testing::TestCluster;

grpc::Status Register(const std::string& address, const Dataset& dataset) {
  auto stub = proto::DispatcherService::NewStub(MakeChannel(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  proto::GetOrRegisterDatasetRequest request;
  *request.mutable_version() = CurrentVersion();
  *request.mutable_dataset() = internal::DefinitionOf(dataset);
  proto::GetOrRegisterDatasetResponse response;
  return stub->GetOrRegisterDataset(&context, request, &response);
}

std::vector<std::filesystem::path> JournalFiles(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("journal-") || name.starts_with("snapshot-")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST_CASE("journal attacks: definitions past the quota are refused, the dispatcher restarts, files are 0600",
          "[service][hardening][tenants]") {
  testing::TempDir dir;
  const std::string work = dir.File("work");
  TestCluster cluster(
      {.num_workers = 1, .dispatcher_args = {"--work-dir", work, "--max-definition-bytes", "3000000"}});
  // Definitions of 1 MiB of inline data each, all different.
  const Tensor megabyte(DType::kUInt8, {int64_t{1} << 20});
  int registered = 0;
  grpc::Status refused;
  for (int i = 1; i <= 5 && refused.ok(); ++i) {
    refused = Register(cluster.DispatcherAddress(), Dataset::FromTensors({megabyte}).Repeat(i));
    if (refused.ok()) ++registered;
  }
  CHECK(registered == 2);
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(refused.error_message(),
             Contains("GetOrRegisterDataset: the clients hold ") &&
                 Contains(" bytes of definitions and this adds ") &&
                 Contains("; that would pass the dispatcher's quota max_definition_bytes = 3000000 for all"));
  // It restarts with what it held, and serves.
  cluster.RestartDispatcher();
  std::vector<int64_t> values;
  REQUIRE(ReadToEnd(Dataset::Range(3).ReadFromService({.service = cluster.ServiceUrl()}), &values).ok());
  CHECK(values == std::vector<int64_t>{0, 1, 2});
  const std::vector<std::filesystem::path> files = JournalFiles(work);
  REQUIRE(files.size() >= 2);
  for (const auto& file : files) {
    INFO(file);
    struct stat info {};
    REQUIRE(stat(file.c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0600);
  }
}

TEST_CASE(
    "journal attacks: a bit flipped in the last record is refused naming file and offset, a torn one dropped",
    "[service][hardening][tenants]") {
  testing::TempDir dir;
  const std::string work = dir.File("work");
  {
    TestCluster cluster({.num_workers = 1, .dispatcher_args = {"--work-dir", work}});
    std::vector<int64_t> values;
    REQUIRE(ReadToEnd(Dataset::Range(5).ReadFromService({.service = cluster.ServiceUrl(), .job_name = "j"}),
                      &values)
                .ok());
    cluster.dispatcher().Kill();
  }
  // The journal file with records: 8 bytes of magic, then records of a
  // 4-byte length, its checksum, the payload and the payload's checksum.
  std::filesystem::path journal;
  for (const auto& file : JournalFiles(work)) {
    if (file.filename().string().starts_with("journal-") && std::filesystem::file_size(file) > 8)
      journal = file;
  }
  REQUIRE(!journal.empty());
  const std::string original = testing::ReadFileOrEmpty(journal.string());
  size_t offset = 8;
  size_t last = 0;
  while (offset + 8 <= original.size()) {
    const uint32_t length = static_cast<uint8_t>(original[offset]) |
                            static_cast<uint8_t>(original[offset + 1]) << 8 |
                            static_cast<uint8_t>(original[offset + 2]) << 16 |
                            static_cast<uint32_t>(static_cast<uint8_t>(original[offset + 3])) << 24;
    last = offset;
    offset += 8 + length + 4;
  }
  REQUIRE(offset == original.size());
  auto start_dispatcher = [&](const std::string& log) {
    absl::StatusOr<std::unique_ptr<testing::Process>> process = testing::Process::Start(
        {SLUICE_DISPATCHERD, "--work-dir", work, "--port", "0", "--port-file", dir.File("port")}, log);
    REQUIRE(process.ok());
    return *std::move(process);
  };

  std::string flipped = original;
  flipped[last + 8] ^= 0x10;
  testing::WriteFile(journal.string(), flipped);
  auto refused = start_dispatcher(dir.File("refused.log"));
  CHECK(refused->Wait(std::chrono::seconds(20)) == 1);
  CHECK_THAT(testing::ReadFileOrEmpty(dir.File("refused.log")),
             Contains(absl::StrCat(journal.string(), ": byte ", last, ": record checksum mismatch")));

  // The same record cut short, as a crash mid-write leaves it: dropped.
  testing::WriteFile(journal.string(), original.substr(0, original.size() - 3));
  auto started = start_dispatcher(dir.File("started.log"));
  CHECK(!testing::WaitForFile(dir.File("port"), std::chrono::seconds(20)).empty());
  CHECK(started->Terminate() == 0);
  CHECK_THAT(testing::ReadFileOrEmpty(dir.File("started.log")), Contains("cut short"));
}

}  // namespace
}  // namespace sluice
