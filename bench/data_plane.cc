// data_plane: how fast the data service moves elements from one local
// worker to one consumer, against baselines measured in the same run:
//
//   a. 1 MiB elements through the service (dispatcherd + one workerd on
//      127.0.0.1): from_tensors(uint8 [1 MiB]) -> repeat -> distribute
//   b. iperf3 on loopback, one TCP stream, with its default 128 KiB writes
//      and again with 1 MiB writes (-l 1M), the elements' size (skipped
//      when iperf3 is missing)
//   c. a bare gRPC server stream of 1 MiB bytes messages (in process, on
//      127.0.0.1): gRPC and protobuf, nothing of Sluice
//   d. 64-byte elements through the service, elements per second (and the
//      same pipeline run locally, for scale)
//   e. 2 KiB batches through the service: range -> batch(256) of int64,
//      MB/s (and the same pipeline run locally)
//
// and the ratios a/c, a/b and a/b2 (a/c also as the median of each round's
// ratio). MB is 10^6 bytes. Every figure is the best of
// R rounds; the cases take turns within a round, so that load from other
// processes falls on all of them alike. Each timed read follows a short
// warm-up, so buffers are in their steady state when the clock starts.
//
//   data_plane [--seconds S] [--repeats R] [--cases abcdefghi] [--max-outstanding K] [--connections N]
//
// Case f is case a over N TCP connections to the worker (distribute's
// connections_per_worker; --connections, default 4), against the same
// baselines. Case g is the physical reference for a reader on the worker's
// host: one thread memcpy-ing the same 1 MiB blocks (a / g is printed).
// Cases a to f read over TCP (distribute's transport: tcp). Case h is case a
// through shared memory (transport: auto, the reader being on the worker's
// host), against g; case i is cases d and e through shared memory.
// --cases runs only some of the cases (for profiling one, say);
// --max-outstanding sets distribute's max_outstanding_requests (0: its
// default).
// Every process it starts is killed when it exits, on error paths too, and
// also if it is killed itself (PR_SET_PDEATHSIG). A watchdog alarm ends a
// run that hangs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_daemons.h"
#include "bench_stream.grpc.pb.h"
#include "client/dataset_internal.h"
#include "service/daemon.h"
#include "service/grpc_util.h"
#include "service/malloc_tuning.h"
#include "sluice/dataset.h"
#include "sluice/proto/service.grpc.pb.h"

namespace {

constexpr int64_t kBigElementBytes = 1 << 20;
constexpr int64_t kSmallElementBytes = 64;
// Rows of int64 in case e's batches: 2 KiB each.
constexpr int64_t kSmallBatchRows = 256;
constexpr double kWarmupSeconds = 0.5;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------
// Measurements. Each returns a rate (bytes or elements per second).

// Reads elements of `dataset` for kWarmupSeconds, then for `seconds`;
// returns bytes per second, or elements per second when !count_bytes. The
// clock is read every `check_every` elements, so that reading it does not
// weigh on fast pipelines.
double ReadRate(const sluice::DatasetPtr& dataset, double seconds, int64_t expected_bytes, bool count_bytes,
                int check_every = 1) {
  auto iterator = dataset->MakeIterator(sluice::IteratorContext{});
  if (!iterator.ok()) Fail(std::string(iterator.status().message()));
  auto next = [&] {
    sluice::Element element;
    bool end = false;
    absl::Status status = (*iterator)->GetNext(&element, &end);
    if (!status.ok()) Fail("reading: " + std::string(status.message()));
    if (end) Fail("the pipeline ended early");
    const int64_t bytes = static_cast<int64_t>(element.components.at(0).ByteSize());
    if (bytes != expected_bytes)
      Fail("expected " + std::to_string(expected_bytes) + "-byte elements, got " + std::to_string(bytes));
    return bytes;
  };
  const auto warmup = Clock::now();
  while (SecondsSince(warmup) < kWarmupSeconds) {
    for (int i = 0; i < check_every; ++i) next();
  }
  int64_t counted = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while ((elapsed = SecondsSince(start)) < seconds) {
    for (int i = 0; i < check_every; ++i) counted += count_bytes ? next() : (next(), 1);
  }
  return counted / elapsed;
}

sluice::DatasetPtr BuildOrDie(const sluice::Dataset& dataset) {
  auto built = sluice::internal::BuildPipeline(dataset);
  if (!built.ok()) Fail("building the pipeline: " + std::string(built.status().message()));
  return *built;
}

// The bare stream: the same bytes as `Chunk.data`, written as fast as the
// stream takes them.
class StreamService final : public sluice::bench::BenchStream::Service {
  grpc::Status Stream(grpc::ServerContext* context, const sluice::bench::StreamRequest* request,
                      grpc::ServerWriter<sluice::bench::Chunk>* writer) override {
    sluice::bench::Chunk chunk;
    chunk.mutable_data()->assign(static_cast<size_t>(request->message_bytes()), '\0');
    while (!context->IsCancelled() && writer->Write(chunk)) {
    }
    return grpc::Status::OK;
  }
};

// Bytes/s of one thread copying 1 MiB blocks with memcpy between two
// 64 MiB regions (larger than the caches, as a stream of elements is): the
// physical reference for a reader on the worker's host, where shared memory
// would leave one copy of each byte.
double MemcpyRate(double seconds) {
  constexpr size_t kRegion = size_t{64} << 20;
  std::vector<char> from(kRegion, 1), to(kRegion, 0);
  const auto start = std::chrono::steady_clock::now();
  const auto stop = start + std::chrono::duration<double>(seconds);
  size_t copied = 0;
  size_t at = 0;
  while (std::chrono::steady_clock::now() < stop) {
    for (int i = 0; i < 16; ++i) {
      std::memcpy(to.data() + at, from.data() + at, kBigElementBytes);
      copied += kBigElementBytes;
      at = (at + kBigElementBytes) % kRegion;
    }
  }
  // Keeps the copies from being optimized away.
  if (to[at] == 2) std::printf(" ");
  return static_cast<double>(copied) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double GrpcStreamRate(sluice::bench::BenchStream::Stub* stub, double seconds) {
  grpc::ClientContext context;
  sluice::bench::StreamRequest request;
  request.set_message_bytes(kBigElementBytes);
  auto reader = stub->Stream(&context, request);
  sluice::bench::Chunk chunk;
  auto next = [&] {
    if (!reader->Read(&chunk)) Fail("the bare gRPC stream ended: " + reader->Finish().error_message());
    if (static_cast<int64_t>(chunk.data().size()) != kBigElementBytes) Fail("short chunk on the bare stream");
    return static_cast<int64_t>(chunk.data().size());
  };
  const auto warmup = Clock::now();
  while (SecondsSince(warmup) < kWarmupSeconds) next();
  int64_t bytes = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while ((elapsed = SecondsSince(start)) < seconds) bytes += next();
  context.TryCancel();
  while (reader->Read(&chunk)) {
  }
  (void)reader->Finish();
  return bytes / elapsed;
}

std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// bits_per_second of end.sum_received in iperf3's JSON, or nullopt.
std::optional<double> ParseIperfJson(const std::string& json) {
  const size_t end = json.find("\"end\"");
  if (end == std::string::npos) return std::nullopt;
  const size_t sum = json.find("\"sum_received\"", end);
  if (sum == std::string::npos) return std::nullopt;
  const size_t key = json.find("\"bits_per_second\"", sum);
  if (key == std::string::npos) return std::nullopt;
  const size_t colon = json.find(':', key);
  if (colon == std::string::npos) return std::nullopt;
  char* parsed_end = nullptr;
  const double value = std::strtod(json.c_str() + colon + 1, &parsed_end);
  if (parsed_end == json.c_str() + colon + 1 || value <= 0) return std::nullopt;
  return value;
}

// One iperf3 run on loopback: bytes per second received, or an error.
std::optional<double> IperfRate(const std::string& iperf3, const std::string& dir, double seconds,
                                const std::vector<std::string>& extra_args, std::string* error) {
  const std::string port = std::to_string(FreePort());
  const std::string seconds_arg = std::to_string(std::max(1, static_cast<int>(seconds + 0.5)));
  const pid_t server = Spawn({iperf3, "-s", "-1", "-p", port, "-B", "127.0.0.1"}, dir + "/iperf3_server.log");
  std::optional<double> rate;
  for (int attempt = 0; attempt < 20 && !rate; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the server listen
    const std::string out = dir + "/iperf3_client.json";
    std::filesystem::remove(out);
    std::vector<std::string> argv = {iperf3, "-c", "127.0.0.1", "-p", port, "-t", seconds_arg, "-J"};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    const pid_t client = Spawn(argv, out);
    const std::optional<int> code = WaitFor(client, std::chrono::seconds(std::stoi(seconds_arg) + 20));
    if (!code) {
      Stop(client);
      *error = "the iperf3 client did not finish";
      break;
    }
    const std::string json = ReadFile(out);
    if (*code == 0) {
      if (std::optional<double> bits = ParseIperfJson(json)) rate = *bits / 8.0;
    }
    if (!rate) {
      *error = "iperf3 exit code " + std::to_string(*code) + ": " + json.substr(0, 300);
      // Refused: the server is not listening yet; try again.
      if (json.find("unable to connect") == std::string::npos) break;
    }
  }
  if (!WaitFor(server, std::chrono::seconds(5))) Stop(server);
  return rate;
}

void PrintRate(const std::string& name, double best, double worst, const char* unit, double scale) {
  std::printf("%-52s %12.1f %s   (worst round %.1f)\n", name.c_str(), best / scale, unit, worst / scale);
  std::fflush(stdout);
}

struct Samples {
  std::vector<double> values;
  double best() const { return values.empty() ? 0 : *std::max_element(values.begin(), values.end()); }
  double worst() const { return values.empty() ? 0 : *std::min_element(values.begin(), values.end()); }
};

}  // namespace

int main(int argc, char** argv) {
  g_program = "data_plane";
  sluice::TurnOffMutexDeadlockDetection();
  double seconds = 3;
  int repeats = 3;
  std::string cases = "abcdefghi";
  int64_t max_outstanding = 0;
  int64_t connections = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 < argc && flag == "--seconds") {
      seconds = std::atof(argv[++i]);
    } else if (i + 1 < argc && flag == "--repeats") {
      repeats = std::atoi(argv[++i]);
    } else if (i + 1 < argc && flag == "--cases") {
      cases = argv[++i];
    } else if (i + 1 < argc && flag == "--max-outstanding") {
      max_outstanding = std::atoll(argv[++i]);
    } else if (i + 1 < argc && flag == "--connections") {
      connections = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: data_plane [--seconds S] [--repeats R] [--cases abcdefghi] [--max-outstanding K] "
                   "[--connections N]\n");
      return 2;
    }
  }
  if (seconds <= 0 || repeats <= 0 || max_outstanding < 0 || connections < 1 || connections > 16 ||
      cases.find_first_not_of("abcdefghi") != std::string::npos) {
    std::fprintf(
        stderr,
        "data_plane: --seconds and --repeats must be positive, --connections 1 to 16, --cases letters of "
        "abcdefg\n");
    return 2;
  }
  auto run = [&](char c) { return cases.find(c) != std::string::npos; };
  // Per round: four timed reads with warm-up, two iperf3 runs with their
  // start-up; plus start-up and shutdown. Generous.
  const unsigned watchdog = static_cast<unsigned>(repeats * (6 * (seconds + kWarmupSeconds) + 50) + 90);
  InstallHandlers(watchdog);
  signal(SIGPIPE, SIG_IGN);

  char dir_template[] = "/tmp/sluice_data_plane.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) Fail("mkdtemp failed");
  const std::string dir = dir_template;
  std::printf("data_plane: %d round(s) of %.1f s per case; load average at start %s (%u cores)\n", repeats,
              seconds, LoadAverage().c_str(), std::thread::hardware_concurrency());
  // This process is the reader: it tunes malloc as the reader does, before
  // any case runs, so that a and c run under the same settings.
  std::printf("reader's malloc: %s\n", sluice::TuneMallocForLargeMessages().reason.c_str());
  std::fflush(stdout);

  Cluster cluster = StartCluster(dir);

  // The bare gRPC stream's server, in this process.
  StreamService stream_service;
  grpc::ServerBuilder builder;
  int stream_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &stream_port);
  builder.SetMaxReceiveMessageSize(sluice::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(sluice::kMaxMessageBytes);
  builder.RegisterService(&stream_service);
  std::unique_ptr<grpc::Server> stream_server = builder.BuildAndStart();
  if (stream_server == nullptr || stream_port == 0) Fail("cannot start the bare gRPC stream server");
  auto stream_stub =
      sluice::bench::BenchStream::NewStub(sluice::MakeChannel("127.0.0.1:" + std::to_string(stream_port)));

  const std::string iperf3 = FindInPath("iperf3");

  // Pipelines. repeat() forever: each read stops after its time.
  // `local` read from the service over `transport` with `connections`.
  auto served = [&](const sluice::Dataset& local, const std::string& transport, int64_t connections = 0) {
    return BuildOrDie(local.ReadFromService({.service = cluster.url(),
                                             .max_outstanding_requests = max_outstanding,
                                             .timeout_ms = 20000,
                                             .connections_per_worker = connections,
                                             .transport = transport}));
  };
  const sluice::Dataset big_local =
      sluice::Dataset::FromTensors({sluice::Tensor(sluice::DType::kUInt8, {kBigElementBytes})}).Repeat(-1);
  const sluice::DatasetPtr big = served(big_local, "tcp");
  const sluice::DatasetPtr big_shared = served(big_local, "auto");
  const sluice::DatasetPtr big_connections = served(big_local, "tcp", connections);
  const sluice::Dataset small_local =
      sluice::Dataset::FromTensors({sluice::Tensor(sluice::DType::kUInt8, {kSmallElementBytes})}).Repeat(-1);
  const sluice::DatasetPtr small = served(small_local, "tcp");
  const sluice::DatasetPtr small_shared = served(small_local, "auto");
  const sluice::DatasetPtr local = BuildOrDie(small_local);
  const sluice::Dataset batches_local = sluice::Dataset::Range(int64_t{1} << 62).Batch(kSmallBatchRows);
  const sluice::DatasetPtr batches = served(batches_local, "tcp");
  const sluice::DatasetPtr batches_shared = served(batches_local, "auto");
  const sluice::DatasetPtr local_batches = BuildOrDie(batches_local);

  Samples memcpy_rate, shared_big, shared_small, shared_batches;
  Samples sluice_big, sluice_big_connections, grpc_stream, iperf, iperf_1m, sluice_small, local_small,
      sluice_batches, local_batches_rate;
  std::string iperf_error = iperf3.empty() ? "iperf3 not found in PATH" : "";
  for (int round = 0; round < repeats; ++round) {
    // a and c take turns going first, so that neither always runs on the
    // heels of the other.
    for (int turn = 0; turn < 2; ++turn) {
      if (run('a') && turn == round % 2)
        sluice_big.values.push_back(ReadRate(big, seconds, kBigElementBytes, true));
      if (run('c') && turn != round % 2)
        grpc_stream.values.push_back(GrpcStreamRate(stream_stub.get(), seconds));
    }
    if (run('g')) memcpy_rate.values.push_back(MemcpyRate(seconds));
    if (run('h')) shared_big.values.push_back(ReadRate(big_shared, seconds, kBigElementBytes, true));
    if (run('i')) {
      shared_small.values.push_back(ReadRate(small_shared, seconds, kSmallElementBytes, false, 16));
      shared_batches.values.push_back(ReadRate(batches_shared, seconds, kSmallBatchRows * 8, true, 16));
    }
    if (run('f'))
      sluice_big_connections.values.push_back(ReadRate(big_connections, seconds, kBigElementBytes, true));
    if (run('b') && !iperf3.empty() && iperf_error.empty()) {
      std::string error;
      if (std::optional<double> rate = IperfRate(iperf3, dir, seconds, {}, &error))
        iperf.values.push_back(*rate);
      else
        iperf_error = error;
      if (std::optional<double> rate = IperfRate(iperf3, dir, seconds, {"-l", "1M"}, &error))
        iperf_1m.values.push_back(*rate);
      else
        iperf_error = error;
    }
    if (run('d')) {
      sluice_small.values.push_back(ReadRate(small, seconds, kSmallElementBytes, false, 16));
      local_small.values.push_back(ReadRate(local, seconds, kSmallElementBytes, false, 1024));
    }
    if (run('e')) {
      sluice_batches.values.push_back(ReadRate(batches, seconds, kSmallBatchRows * 8, true, 16));
      local_batches_rate.values.push_back(ReadRate(local_batches, seconds, kSmallBatchRows * 8, true, 1024));
    }
  }

  const bool have_a = !sluice_big.values.empty(), have_b = !iperf.values.empty() && !iperf_1m.values.empty(),
             have_c = !grpc_stream.values.empty();
  if (have_a)
    PrintRate("a. sluice: 1 MiB elements, 1 worker -> 1 consumer", sluice_big.best(), sluice_big.worst(),
              "MB/s", 1e6);
  if (have_b) {
    PrintRate("b. iperf3: loopback, 1 TCP stream", iperf.best(), iperf.worst(), "MB/s", 1e6);
    PrintRate("b2. iperf3 -l 1M: the same, 1 MiB writes", iperf_1m.best(), iperf_1m.worst(), "MB/s", 1e6);
  } else if (run('b')) {
    std::printf("%-52s skipped (%s)\n", "b. iperf3: loopback, 1 TCP stream", iperf_error.c_str());
  }
  if (have_c)
    PrintRate("c. bare gRPC server stream: 1 MiB bytes messages", grpc_stream.best(), grpc_stream.worst(),
              "MB/s", 1e6);
  if (run('f'))
    PrintRate("f. sluice: 1 MiB elements over " + std::to_string(connections) + " connections",
              sluice_big_connections.best(), sluice_big_connections.worst(), "MB/s", 1e6);
  if (run('d')) {
    PrintRate("d. sluice: 64-byte elements, 1 worker -> 1 consumer", sluice_small.best(),
              sluice_small.worst(), "elem/s", 1);
    PrintRate("   (same 64-byte pipeline run locally, no service)", local_small.best(), local_small.worst(),
              "elem/s", 1);
  }
  if (run('e')) {
    PrintRate("e. sluice: 2 KiB batches (range -> batch(256))", sluice_batches.best(), sluice_batches.worst(),
              "MB/s", 1e6);
    PrintRate("   (same pipeline run locally, no service)", local_batches_rate.best(),
              local_batches_rate.worst(), "MB/s", 1e6);
  }
  if (have_a && have_c) {
    std::printf("%-52s %11.1f%%   (goal >= 90%%)\n", "ratio a / c (sluice / bare gRPC stream)",
                100.0 * sluice_big.best() / grpc_stream.best());
    // Each round's a / c, from runs seconds apart: less at the mercy of
    // one lucky round than the ratio of the bests.
    std::vector<double> ratios;
    for (size_t i = 0; i < sluice_big.values.size() && i < grpc_stream.values.size(); ++i) {
      ratios.push_back(sluice_big.values[i] / grpc_stream.values[i]);
    }
    std::sort(ratios.begin(), ratios.end());
    const size_t n = ratios.size();
    const double median = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
    std::printf("%-52s %11.1f%%   (rounds: %.1f%% to %.1f%%)\n", "median of each round's a / c",
                100.0 * median, 100.0 * ratios.front(), 100.0 * ratios.back());
  }
  if (have_a && have_b) {
    std::printf("%-52s %11.1f%%\n", "ratio a / b (sluice / iperf3)",
                100.0 * sluice_big.best() / iperf.best());
    std::printf("%-52s %11.1f%%\n", "ratio a / b2 (sluice / iperf3 -l 1M)",
                100.0 * sluice_big.best() / iperf_1m.best());
  }
  if (run('g')) {
    PrintRate("g. memcpy of 1 MiB blocks, one thread (64 MiB regions)", memcpy_rate.best(),
              memcpy_rate.worst(), "MB/s", 1e6);
    if (have_a)
      std::printf("%-52s %11.1f%%   (shared memory's goal >= 50%%; this is TCP)\n",
                  "ratio a / g (sluice over loopback TCP / memcpy)",
                  100.0 * sluice_big.best() / memcpy_rate.best());
  }
  if (run('h')) {
    PrintRate("h. sluice: 1 MiB elements through shared memory", shared_big.best(), shared_big.worst(),
              "MB/s", 1e6);
    if (run('g'))
      std::printf("%-52s %11.1f%%   (goal >= 50%%)\n", "ratio h / g (shared memory / memcpy)",
                  100.0 * shared_big.best() / memcpy_rate.best());
    if (have_a)
      std::printf("%-52s %11.1f%%\n", "ratio h / a (shared memory / TCP)",
                  100.0 * shared_big.best() / sluice_big.best());
  }
  if (run('i')) {
    PrintRate("i. sluice: 64-byte elements through shared memory", shared_small.best(), shared_small.worst(),
              "elem/s", 1);
    PrintRate("i. sluice: 2 KiB batches through shared memory", shared_batches.best(), shared_batches.worst(),
              "MB/s", 1e6);
  }
  if (run('f') && have_b) {
    std::printf("%-52s %11.1f%%   (goal >= 90%%)\n", "ratio f / b2 (N connections / iperf3 -l 1M)",
                100.0 * sluice_big_connections.best() / iperf_1m.best());
  }
  if (run('f') && have_a) {
    std::printf("%-52s %11.1f%%\n", "ratio f / a (N connections / one)",
                100.0 * sluice_big_connections.best() / sluice_big.best());
  }
  if (have_c && have_b) {
    std::printf("%-52s %11.1f%%\n", "ratio c / b (bare gRPC stream / iperf3)",
                100.0 * grpc_stream.best() / iperf.best());
    std::printf("%-52s %11.1f%%\n", "ratio c / b2 (bare gRPC stream / iperf3 -l 1M)",
                100.0 * grpc_stream.best() / iperf_1m.best());
  }
  std::printf("workerd at the end: %s; load average at end %s\n", WorkerSummary(cluster).c_str(),
              LoadAverage().c_str());
  std::fflush(stdout);

  stream_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  Stop(cluster.worker);
  Stop(cluster.dispatcher);
  std::filesystem::remove_all(dir);
  return 0;
}
