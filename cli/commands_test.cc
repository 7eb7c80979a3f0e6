// Tests of the `sluice` subcommands (cli/commands.cc), called with string
// streams, and one end-to-end run of the real binary.
#include "cli/commands.h"

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "pipeline/builder.h"
#include "pipeline/record_io.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::WriteFile;

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::Equals;
using Catch::Matchers::Matches;
using Catch::Matchers::StartsWith;

const std::string kPlugin = SLUICE_EXAMPLE_PLUGIN;

constexpr char kIssueExample[] =
    "pipeline:\n"
    "  - range: 10                 # shorthand for {start: 0, stop: 10, step: 1}\n"
    "  - map: {fn: square}\n"
    "  - batch: {batch_size: 4}\n";

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result Run(const std::string& path, int64_t limit = -1, std::vector<std::string> plugins = {}) {
  cli::RunOptions options;
  options.pipeline_path = path;
  options.limit = limit;
  options.plugins = std::move(plugins);
  std::ostringstream out, err;
  const int code = cli::RunPipeline(options, out, err);
  return {code, out.str(), err.str()};
}

Result Inspect(const std::string& path) {
  cli::RunOptions options;
  options.pipeline_path = path;
  std::ostringstream out, err;
  const int code = cli::InspectPipeline(options, out, err);
  return {code, out.str(), err.str()};
}

// Runs a shell command; its exit status and standard output.
Result Shell(const std::string& command) {
  Result result{-1, "", ""};
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, got);
  const int status = pclose(pipe);
  REQUIRE(WIFEXITED(status));
  result.code = WEXITSTATUS(status);
  return result;
}

// ---------------------------------------------------------------------------
// run

TEST_CASE("cli: run prints one JSON line per element", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, kIssueExample);
  const Result result = Run(path);
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals("[0, 1, 4, 9]\n[16, 25, 36, 49]\n[64, 81]\n"));
  CHECK_THAT(result.err, Equals(""));

  WriteFile(path, "pipeline:\n  - from_tensor_slices: {name: [a, \"b\\\"c\"], score: [0.5, 2]}\n");
  const Result named = Run(path);
  CHECK(named.code == 0);
  CHECK_THAT(named.out, Equals("{\"name\": \"a\", \"score\": 0.5}\n{\"name\": \"b\\\"c\", \"score\": 2}\n"));
  CHECK_THAT(named.err, Equals(""));
}

TEST_CASE("cli: run --summary prints a batch as dtype, shape, first values and mean", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  testing::WriteFile(path, "pipeline:\n  - range: 200\n  - batch: 100\n  - enumerate\n");
  cli::RunOptions options;
  options.pipeline_path = path;
  options.summary = true;
  std::ostringstream out, err;
  CHECK(cli::RunPipeline(options, out, err) == 0);
  CHECK_THAT(out.str(), Equals("[0, \"int64[100] 0, 1, 2, ... mean 49.5\"]\n"
                               "[1, \"int64[100] 100, 101, 102, ... mean 149.5\"]\n"));
  CHECK_THAT(err.str(), Equals(""));
}

TEST_CASE("cli: run --limit", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, kIssueExample);
  Result result = Run(path, 2);
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals("[0, 1, 4, 9]\n[16, 25, 36, 49]\n"));
  result = Run(path, 0);
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals(""));
  result = Run(path, 10);
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals("[0, 1, 4, 9]\n[16, 25, 36, 49]\n[64, 81]\n"));

  // A limit bounds an infinite pipeline.
  WriteFile(path, "pipeline:\n  - range: 3\n  - repeat\n");
  result = Run(path, 5);
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals("0\n1\n2\n0\n1\n"));
  CHECK_THAT(result.err, Equals(""));
}

TEST_CASE("cli: run: a pipeline that does not load exits 2", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("bad.yaml");
  WriteFile(path, "pipeline:\n  - range: 10\n  - bach: 4\n");
  Result result = Run(path);
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err, Equals("sluice: " + path + ":3:5: unknown op 'bach'; did you mean 'batch'?\n"));

  WriteFile(path, "pipeline:\n  - range: 10\n  - batch: {batch_size: 0}\n");
  result = Run(path);
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err, StartsWith("sluice: " + path + ":3:5: step 2 (batch): "));
  CHECK_THAT(result.err, Contains("batch_size must be > 0, got 0\n"));

  WriteFile(path, "pipeline:\n  - map: {fn: sqaure}\n");
  result = Run(path);
  CHECK(result.code == 2);
  CHECK_THAT(result.err,
             Equals("sluice: " + path + ":2:15: map: unknown function 'sqaure'; did you mean 'square'?\n"));

  const std::string missing = dir.File("missing.yaml");
  result = Run(missing);
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err, Equals("sluice: cannot read pipeline file '" + missing + "'\n"));
}

TEST_CASE("cli: run: a failure while running exits 1", "[cli]") {
  testing::TempDir dir;
  const std::string records = dir.File("data.tfrecord");
  {
    absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer = TFRecordWriter::Create(records);
    REQUIRE(writer.ok());
    REQUIRE((*writer)->Write("alpha").ok());
    REQUIRE((*writer)->Write("bravo").ok());
    REQUIRE((*writer)->Close().ok());
  }
  std::string bytes;
  {
    std::ifstream file(records, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  REQUIRE(bytes.size() == 42);
  bytes[21 + 12] ^= 0x01;  // the first byte of "bravo"
  WriteFile(records, bytes);

  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, absl::StrCat("pipeline:\n  - tfrecord: ", records, "\n"));
  const Result result = Run(path);
  CHECK(result.code == 1);
  CHECK_THAT(result.out, Equals("\"alpha\"\n"));
  CHECK_THAT(result.err,
             Equals("sluice: corrupt TFRecord in '" + records + "' at offset 21: data checksum mismatch\n"));

  // The limit stops before the corrupt record.
  const Result limited = Run(path, 1);
  CHECK(limited.code == 0);
  CHECK_THAT(limited.out, Equals("\"alpha\"\n"));
  CHECK_THAT(limited.err, Equals(""));

  // A file that is not there is found missing only when read.
  WriteFile(path, absl::StrCat("pipeline:\n  - text_line: ", dir.File("nope.txt"), "\n"));
  const Result missing = Run(path);
  CHECK(missing.code == 1);
  CHECK_THAT(missing.out, Equals(""));
  CHECK_THAT(missing.err,
             Equals("sluice: cannot open '" + dir.File("nope.txt") + "': No such file or directory\n"));
}

TEST_CASE("cli: run with --plugin", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, "pipeline:\n  - range: 5\n  - map: {fn: example.affine, scale: 3, offset: 1}\n");
  Result result = Run(path, -1, {kPlugin});
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals("1\n4\n7\n10\n13\n"));
  CHECK_THAT(result.err, Equals(""));

  const std::string missing = dir.File("libmissing.so");
  result = Run(path, -1, {missing});
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err, StartsWith("sluice: cannot load plugin '" + missing + "': "));
}

// ---------------------------------------------------------------------------
// inspect

TEST_CASE("cli: inspect prints fingerprint, spec, cardinality and steps", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, kIssueExample);
  const Result result = Inspect(path);
  CHECK(result.code == 0);
  CHECK_THAT(result.err, Equals(""));
  CHECK_THAT(result.out, Equals("pipeline:     " + path +
                                "\n"
                                "fingerprint:  " +
                                Dataset::Range(10).Map("square").Batch(4).Fingerprint() +
                                "\n"
                                "element_spec: TensorSpec(shape=[?], dtype=int64)\n"
                                "cardinality:  3\n"
                                "splittable:   yes\n"
                                "steps:\n"
                                "  1. range { stop: 10 step: 1 }\n"
                                "  2. map { fn { name: \"square\" } deterministic: true }\n"
                                "  3. batch { batch_size: 4 deterministic: true }\n"));
}

TEST_CASE("cli: inspect of other pipelines", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, "pipeline:\n  - zip: [[{range: 3}], [{range: 2}]]\n  - repeat\n  - unbatch\n");
  Result result = Inspect(path);
  // unbatch of scalars fails to build: a load error.
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err, StartsWith("sluice: " + path + ":4:5: step 3 (unbatch): "));

  WriteFile(path, "pipeline:\n  - zip: [[{range: 3}], [{range: 2}]]\n  - repeat\n");
  result = Inspect(path);
  CHECK(result.code == 0);
  CHECK_THAT(result.err, Equals(""));
  CHECK_THAT(
      result.out,
      Equals(
          "pipeline:     " + path + "\n" +
          "fingerprint:  " + Dataset::Zip({Dataset::Range(3), Dataset::Range(2)}).Repeat().Fingerprint() +
          "\n"
          "element_spec: (TensorSpec(shape=[], dtype=int64), TensorSpec(shape=[], dtype=int64))\n"
          "cardinality:  infinite\n"
          "splittable:   no (a pipeline whose source is 'zip' cannot be split for distributed_epoch; start "
          "it with range, from_tensor_slices, list_files, image_folder, webdataset, text_line, json_lines, "
          "tfrecord or "
          "fixed_length_record)\n"
          "steps:\n"
          "  1. zip { datasets { steps { range { stop: 3 step: 1 } } } datasets { steps { range { stop: 2 "
          "step: 1 } } } }\n"
          "  2. repeat { count: -1 }\n"));
}

TEST_CASE("cli: inspect says which of issue 34's ops keep a pipeline splittable", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  - range: 4\n  - concatenate: [{range: 2}]\n",
       "splittable:   no (the pipeline cannot be split for distributed_epoch: step 2 (concatenate) would "
       "read its "
       "whole pipeline on every worker)\n"},
      {"  - range: 4\n  - unique\n",
       "splittable:   no (the pipeline cannot be split for distributed_epoch: step 2 (unique) would drop "
       "repeats "
       "only within each worker's elements)\n"},
      {"  - sample_from_datasets: {datasets: [[range: 2], [range: 3]], seed: 1}\n",
       "splittable:   no (a pipeline whose source is 'sample_from_datasets' cannot be split for "
       "distributed_epoch; start it with range, from_tensor_slices, list_files, image_folder, webdataset, "
       "text_line, json_lines, tfrecord or fixed_length_record)\n"},
      {"  - range: 4\n  - flat_map: [{range: 2}]\n", "splittable:   yes\n"},
  };
  for (const auto& [steps, splittable] : cases) {
    INFO(steps);
    WriteFile(path, "pipeline:\n" + steps);
    const Result result = Inspect(path);
    CHECK(result.code == 0);
    CHECK_THAT(result.out, Contains(splittable));
  }
}

TEST_CASE("cli: inspect: a pipeline that does not load exits 2", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("bad.yaml");
  WriteFile(path, "pipeline:\n  - range: 10\n  - batch: {batch_sise: 4}\n");
  const Result result = Inspect(path);
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err,
             Equals("sluice: " + path +
                    ":3:13: unknown argument 'batch_sise' for op 'batch'; did you mean 'batch_size'?\n"));
}

// ---------------------------------------------------------------------------
// functions

TEST_CASE("cli: functions lists the registry, with plugins", "[cli]") {
  std::ostringstream out, err;
  CHECK(cli::ListFunctions({kPlugin}, out, err) == 0);
  CHECK_THAT(err.str(), Equals(""));
  CHECK_THAT(
      out.str(),
      Equals(
          "accumulate\t(state, x) -> (state + x, state + x): a running sum for scan\n"
          "add\tx + value\n"
          "cast\tconverts to dtype\n"
          "center_crop\tthe central window of size\n"
          "decode_and_random_crop\tdecodes only a random window of an image (RandomResizedCrop's) and "
          "resizes it to size\n"
          "decode_image\tdecodes a JPEG or PNG to uint8 [height, width, channels]\n"
          "decode_raw\treinterprets string bytes as a vector of dtype\n"
          "equal\tx == value\n"
          "example.affine\tx * scale + offset (example plugin)\n"
          "example.is_even\ttrue for even int64 values (example plugin)\n"
          "floordiv\tfloor(x / value)\n"
          "greater\tx > value\n"
          "greater_equal\tx >= value\n"
          "less\tx < value\n"
          "less_equal\tx <= value\n"
          "mod\tx mod value, with the sign of value\n"
          "multiply\tx * value\n"
          "negate\t-x\n"
          "normalize\t(pixel / 255 - mean) / std per channel, to float32, float16 or bfloat16, HWC or CHW\n"
          "not_equal\tx != value\n"
          "parse_example\tparses a serialized tf.train.Example\n"
          "random_crop\ta window of size at a random place\n"
          "random_flip_left_right\tmirrors half of the images left to right\n"
          "random_flip_up_down\tmirrors half of the images top to bottom\n"
          "random_resized_crop\tRandomResizedCrop's window of a decoded image, resized to size (bilinear)\n"
          "resize\tresizes an image to size (bilinear with antialias, area or nearest)\n"
          "select\tkeeps the listed components\n"
          "square\tx * x\n"
          "subtract\tx - value\n"));

  std::ostringstream out2, err2;
  const std::string missing = "/nonexistent/libsluice_missing_plugin.so";
  CHECK(cli::ListFunctions({missing}, out2, err2) == 2);
  CHECK_THAT(out2.str(), Equals(""));
  CHECK_THAT(err2.str(), StartsWith("sluice: cannot load plugin '" + missing + "': "));
}

// ---------------------------------------------------------------------------
// The real binary.

TEST_CASE("cli: the sluice binary runs a pipeline end to end", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, kIssueExample);
  Result result = Shell(absl::StrCat("'", SLUICE_CLI, "' run '", path, "'"));
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals("[0, 1, 4, 9]\n[16, 25, 36, 49]\n[64, 81]\n"));

  result = Shell(absl::StrCat("'", SLUICE_CLI, "' run '", path, "' --limit 1"));
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Equals("[0, 1, 4, 9]\n"));

  const std::string bad = dir.File("bad.yaml");
  WriteFile(bad, "pipeline:\n  - range: 10\n  - bach: 4\n");
  result = Shell(absl::StrCat("'", SLUICE_CLI, "' run '", bad, "' 2>&1"));
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals("sluice: " + bad + ":3:5: unknown op 'bach'; did you mean 'batch'?\n"));

  result = Shell(
      absl::StrCat("'", SLUICE_CLI, "' run --plugin '", kPlugin, "' '", dir.File("plugin.yaml"), "' 2>&1"));
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals("sluice: cannot read pipeline file '" + dir.File("plugin.yaml") + "'\n"));
}

TEST_CASE("cli: a seeded shuffle prints the same order in every process", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("shuffle.yaml");
  WriteFile(path,
            "pipeline:\n"
            "  - from_tensor_slices: [1, 2, 3, 4]\n"
            "  - repeat: 2\n"
            "  - shuffle: {buffer_size: 8, seed: 42}\n");
  const std::string command = absl::StrCat("'", SLUICE_CLI, "' run '", path, "'");
  Result first = Shell(command);
  Result second = Shell(command);
  CHECK(first.code == 0);
  CHECK(second.code == 0);
  CHECK(first.out == second.out);
  // Pinned: seeded shuffles draw through Sluice's own sampler, so this order
  // is the same on every machine and standard library.
  CHECK_THAT(first.out, Equals("2\n3\n2\n4\n3\n1\n1\n4\n"));
}

// ---------------------------------------------------------------------------
// status

proto::StatusSnapshot ExampleSnapshot() {
  proto::StatusSnapshot snapshot;
  proto::WorkerInfo* worker = snapshot.add_workers();
  worker->set_address("10.0.0.1:5001");
  worker->add_tags("gpu");
  worker->add_tags("east");
  worker->add_tasks(1);
  worker->add_tasks(2);
  worker->set_last_heartbeat_unix_ms(998'500);
  snapshot.add_workers()->set_address("worker-b.example:5002");  // no heartbeat yet
  proto::StatusSnapshot::Dataset* dataset = snapshot.add_datasets();
  dataset->set_dataset_id("1");
  dataset->set_fingerprint("00112233445566778899aabbccddeeff");
  proto::StatusSnapshot::Job* job = snapshot.add_jobs();
  job->set_job_id(1);
  job->mutable_params()->set_dataset_id("1");
  job->mutable_params()->set_processing_mode(proto::DISTRIBUTED_EPOCH);
  job->mutable_params()->set_job_name("train");
  job = snapshot.add_jobs();
  job->set_job_id(12);
  job->mutable_params()->set_dataset_id("1");
  job->mutable_params()->set_processing_mode(proto::PARALLEL_EPOCHS);
  proto::StatusSnapshot::Iteration* iteration = snapshot.add_iterations();
  iteration->set_iteration_id(1);
  iteration->set_job_id(1);
  iteration->set_num_clients(2);
  iteration = snapshot.add_iterations();
  iteration->set_iteration_id(2);
  iteration->set_job_id(12);
  iteration->set_finished(true);
  iteration = snapshot.add_iterations();
  iteration->set_iteration_id(3);
  iteration->set_job_id(12);
  iteration->set_repetition(1);
  iteration->set_finished(true);
  iteration->set_collected(true);
  proto::TaskInfo* task = snapshot.add_tasks();
  task->set_task_id(1);
  task->set_iteration_id(1);
  task->set_worker_address("10.0.0.1:5001");
  return snapshot;
}

TEST_CASE("cli: status tables align their columns", "[cli]") {
  CHECK_THAT(cli::FormatStatusTables(ExampleSnapshot(), 1'000'000),
             Equals("workers: 2\n"
                    "  ADDRESS                TAGS      TASKS  LAST HEARTBEAT\n"
                    "  10.0.0.1:5001          gpu,east  1,2    1.5 s ago\n"
                    "  worker-b.example:5002  -         -      never\n"
                    "\n"
                    "datasets: 1\n"
                    "  ID  FINGERPRINT\n"
                    "  1   00112233445566778899aabbccddeeff\n"
                    "\n"
                    "jobs: 2\n"
                    "  ID  DATASET  MODE               NAME\n"
                    "  1   1        distributed_epoch  train\n"
                    "  12  1        parallel_epochs    -\n"
                    "\n"
                    "iterations: 3\n"
                    "  ID  JOB  REPETITION  CLIENTS  STATE\n"
                    "  1   1    0           2        running\n"
                    "  2   12   0           0        finished\n"
                    "  3   12   1           0        collected\n"
                    "\n"
                    "tasks: 1\n"
                    "  ID  ITERATION  WORKER\n"
                    "  1   1          10.0.0.1:5001\n"));
}

TEST_CASE("cli: status shows a shared read's held splits in its iteration's state", "[cli]") {
  proto::StatusSnapshot snapshot;
  proto::StatusSnapshot::Iteration* iteration = snapshot.add_iterations();
  iteration->set_iteration_id(4);
  iteration->set_job_id(2);
  iteration->set_num_clients(3);
  iteration->set_held_splits(5);
  iteration->set_awaiting_reports(2);
  iteration = snapshot.add_iterations();
  iteration->set_iteration_id(5);
  iteration->set_job_id(2);
  iteration->set_num_clients(1);
  iteration->set_held_splits(1);
  iteration->set_awaiting_reports(1);
  CHECK_THAT(cli::FormatStatusTables(snapshot, 0),
             Equals("workers: 0\n\ndatasets: 0\n\njobs: 0\n\n"
                    "iterations: 2\n"
                    "  ID  JOB  REPETITION  CLIENTS  STATE\n"
                    "  4   2    0           3        running, 5 splits held until 2 consumers report\n"
                    "  5   2    0           1        running, 1 split held until 1 consumer reports\n"
                    "\ntasks: 0\n"));
}

TEST_CASE("cli: status tables of a dispatcher with nothing registered", "[cli]") {
  CHECK_THAT(cli::FormatStatusTables(proto::StatusSnapshot(), 0),
             Equals("workers: 0\n\ndatasets: 0\n\njobs: 0\n\niterations: 0\n\ntasks: 0\n"));
}

TEST_CASE("cli: status --json prints every field under its proto name", "[cli]") {
  proto::StatusSnapshot snapshot;
  proto::WorkerInfo* worker = snapshot.add_workers();
  worker->set_address("10.0.0.1:5001");
  worker->add_tasks(7);
  proto::StatusSnapshot::Job* job = snapshot.add_jobs();
  job->set_job_id(3);
  job->mutable_params()->set_dataset_id("1");
  job->mutable_params()->set_processing_mode(proto::PARALLEL_EPOCHS);
  CHECK_THAT(cli::StatusToJson(snapshot),
             Equals("{\"workers\":[{\"address\":\"10.0.0.1:5001\",\"tags\":[],\"tasks\":[\"7\"],"
                    "\"last_heartbeat_unix_ms\":\"0\",\"draining\":false}],\"datasets\":[],"
                    "\"jobs\":[{\"job_id\":\"3\",\"params\":{\"dataset_id\":\"1\","
                    "\"processing_mode\":\"PARALLEL_EPOCHS\",\"job_name\":\"\","
                    "\"sharding_policy\":\"SHARDING_POLICY_UNSET\",\"static_workers\":[],"
                    "\"exactly_once\":false,\"num_consumers\":\"0\",\"deterministic\":false,\"tenant\":\"\","
                    "\"cross_trainer_cache_bytes\":\"0\"}}],"
                    "\"iterations\":[],\"tasks\":[]}"));
}

TEST_CASE("cli: status refuses a malformed --service or --timeout-ms with exit 2", "[cli]") {
  for (const std::string service : {"localhost", "http://localhost:5000", "grpc://:5000", "host:port", ""}) {
    INFO(service);
    std::ostringstream out, err;
    CHECK(cli::ShowStatus({.service = service}, out, err) == 2);
    CHECK_THAT(out.str(), Equals(""));
    CHECK_THAT(err.str(), Equals("sluice: invalid service address '" + service +
                                 "': expected HOST:PORT or grpc://HOST:PORT\n"));
  }
  std::ostringstream out, err;
  CHECK(cli::ShowStatus({.service = "grpc://127.0.0.1:1", .timeout_ms = 0}, out, err) == 2);
  CHECK_THAT(out.str(), Equals(""));
  CHECK_THAT(err.str(), Equals("sluice: --timeout-ms must be > 0, got 0\n"));
}

TEST_CASE("cli: the sluice binary's status names a malformed --service", "[cli]") {
  Result result = Shell(absl::StrCat("timeout 60 '", SLUICE_CLI, "' status --service localhost 2>&1"));
  CHECK(result.code == 2);
  CHECK_THAT(result.out,
             Equals("sluice: invalid service address 'localhost': expected HOST:PORT or grpc://HOST:PORT\n"));

  result = Shell(absl::StrCat("timeout 60 '", SLUICE_CLI, "' status 2>&1"));
  CHECK(result.code == 2);
  CHECK_THAT(result.out, StartsWith("--service is required\n"));
}

// ---------------------------------------------------------------------------
// bench

TEST_CASE("cli: bench summary and progress lines", "[cli]") {
  cli::BenchStats stats;
  stats.wall_seconds = 2;
  stats.wait_seconds = 1.5;
  stats.batches = 10;
  stats.elements = 640;
  stats.bytes = 5'120'000;
  CHECK_THAT(cli::FormatBenchSummary(stats), Equals("time:      2.00 s (time limit)\n"
                                                    "batches:   10 (5.0 batches/s)\n"
                                                    "elements:  640 (320.0 elements/s)\n"
                                                    "bytes:     5120000 (2.56 MB/s)\n"
                                                    "waiting:   1.50 s in GetNext (75.0% of wall time)\n"));
  stats.first_batch_seconds = 0.25;
  CHECK_THAT(cli::FormatBenchSummary(stats), EndsWith("waiting:   1.50 s in GetNext (75.0% of wall time)\n"
                                                      "first:     0.250 s to the first batch\n"));
  CHECK_THAT(cli::FormatBenchProgress(stats),
             Equals("2.0 s: 10 batches, 5.0 batches/s, 320.0 elements/s, 2.56 MB/s, 75% waiting"));

  stats.stopped_by = cli::BenchStats::Stop::kEndOfInput;
  stats.replicas = 2;
  CHECK_THAT(cli::FormatBenchSummary(stats),
             StartsWith("replicas:  2 (a batch is one step; elements are summed over replicas)\n"
                        "time:      2.00 s (end of input)\n"));

  // Nothing read in no time: rates are 0, not NaN.
  CHECK_THAT(cli::FormatBenchSummary(cli::BenchStats()),
             Equals("time:      0.00 s (time limit)\n"
                    "batches:   0 (0.0 batches/s)\n"
                    "elements:  0 (0.0 elements/s)\n"
                    "bytes:     0 (0.00 MB/s)\n"
                    "waiting:   0.00 s in GetNext (0.0% of wall time)\n"));
}

Result Bench(const std::string& path, double seconds, bool live_progress = false,
             const std::string& job_name = "") {
  cli::BenchOptions options;
  options.read.run.pipeline_path = path;
  options.read.job_name = job_name;
  options.seconds = seconds;
  options.live_progress = live_progress;
  std::ostringstream out, err;
  const int code = cli::RunBench(options, out, err);
  return {code, out.str(), err.str()};
}

// The summary's lines; the figures that depend on the clock as patterns.
void CheckSummary(const std::string& summary, const std::string& end, int64_t batches, int64_t elements,
                  int64_t bytes) {
  std::vector<std::string> lines = absl::StrSplit(summary, '\n');
  const bool any = batches > 0;
  REQUIRE(lines.size() == (any ? 7u : 6u));
  const std::string number = "[0-9]+\\.[0-9]+";
  CHECK_THAT(lines[0], Matches("time:      " + number + " s \\(" + end + "\\)"));
  CHECK_THAT(lines[1], Matches(absl::StrCat("batches:   ", batches, " \\(", number, " batches/s\\)")));
  CHECK_THAT(lines[2], Matches(absl::StrCat("elements:  ", elements, " \\(", number, " elements/s\\)")));
  CHECK_THAT(lines[3], Matches(absl::StrCat("bytes:     ", bytes, " \\(", number, " MB/s\\)")));
  CHECK_THAT(lines[4], Matches("waiting:   " + number + " s in GetNext \\(" + number + "% of wall time\\)"));
  if (any) CHECK_THAT(lines[5], Matches("first:     " + number + " s to the first batch"));
  CHECK(lines.back() == "");
}

TEST_CASE("cli: bench reports the tokens and the padding of packed text", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  // Three sequences of 3 tokens in rows of 4: three rows, each with one
  // position of padding.
  WriteFile(path,
            "pipeline:\n  - from_tensors: [1, 2, 3]\n  - repeat: 3\n"
            "  - pack_sequences: {length: 4}\n  - batch: 2\n");
  Result result = Bench(path, 60);
  CHECK(result.code == 0);
  CHECK_THAT(result.err, Equals(""));
  std::vector<std::string> lines = absl::StrSplit(result.out, '\n');
  REQUIRE(lines.size() == 8u);
  CHECK_THAT(lines[1], Matches("batches:   2 \\([0-9.]+ batches/s\\)"));
  CHECK_THAT(lines[5], Matches("tokens:    9 \\([0-9]+ tokens/s\\), padding 25\\.0% of 12 positions"));
  CHECK(cli::FormatBenchSummary(cli::BenchStats()).find("tokens:") == std::string::npos);
}

TEST_CASE("cli: bench counts batches, rows and bytes until the input ends", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, kIssueExample);  // 10 int64 rows in batches of 4
  Result result = Bench(path, 60);
  CHECK(result.code == 0);
  CHECK_THAT(result.err, Equals(""));
  CheckSummary(result.out, "end of input", 3, 10, 80);

  // Scalars are one element each; strings count their bytes.
  WriteFile(path, "pipeline:\n  - from_tensor_slices: [ab, cde]\n");
  result = Bench(path, 60);
  CHECK(result.code == 0);
  CheckSummary(result.out, "end of input", 2, 2, 5);

  // Named components: rows of the first.
  WriteFile(path,
            "pipeline:\n  - from_tensor_slices: {x: [[1, 2], [3, 4], [5, 6]], y: [1, 2, 3]}\n"
            "  - batch: {batch_size: 2}\n");
  result = Bench(path, 60);
  CHECK(result.code == 0);
  CheckSummary(result.out, "end of input", 2, 3, 72);
}

TEST_CASE("cli: bench stops an endless pipeline at --seconds, with a live line on a terminal", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, "pipeline:\n  - range: 1000\n  - repeat\n  - batch: {batch_size: 10}\n");
  const auto start = std::chrono::steady_clock::now();
  Result result = Bench(path, 1.2, /*live_progress=*/true);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(result.code == 0);
  CHECK_THAT(result.err, Equals(""));
  // Progress lines at about 0.5 s and 1.0 s, each from the line's start,
  // then the line cleared for the summary.
  const std::string progress =
      "\r[0-9.]+ s: [0-9]+ batches, [0-9.]+ batches/s, [0-9.]+ elements/s, "
      "[0-9.]+ MB/s, [0-9]+% waiting\033\\[K";
  const size_t summary = result.out.rfind("\r\033[K");
  REQUIRE(summary != std::string::npos);
  // A loaded machine may print only the first.
  CHECK_THAT(result.out.substr(0, summary), Matches("(" + progress + "){1,3}"));
  CHECK_THAT(result.out.substr(summary + 4),
             Matches("time:      1\\.[2-9][0-9] s \\(time limit\\)\n(.*\n){5}"));
  // Without a terminal, only the summary.
  result = Bench(path, 0.3);
  CHECK(result.code == 0);
  CHECK_THAT(result.out, Matches("time:      0\\.[3-9][0-9] s \\(time limit\\)\n(.*\n){5}"));
  CHECK(result.out.find('\r') == std::string::npos);
}

TEST_CASE("cli: bench refuses bad flags and pipelines with exit 2", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, kIssueExample);
  Result result = Bench(path, 0);
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err, Equals("sluice: --seconds must be > 0, got 0\n"));

  result = Bench(path, 10, false, "shared");
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(
      result.err,
      Equals("sluice: " + path +
             ": --job-name, --processing-mode and --sharding-policy need a distribute step or --service\n"));

  WriteFile(path, "pipeline:\n  - range: 10\n  - bach: 4\n");
  result = Bench(path, 10);
  CHECK(result.code == 2);
  CHECK_THAT(result.out, Equals(""));
  CHECK_THAT(result.err, Equals("sluice: " + path + ":3:5: unknown op 'bach'; did you mean 'batch'?\n"));

  WriteFile(path, "pipeline:\n  - range: 10\n  - batch: {batch_size: 0}\n");
  result = Bench(path, 10);
  CHECK(result.code == 2);
  CHECK_THAT(result.err, StartsWith("sluice: " + path + ":3:5: step 2 (batch): "));
}

TEST_CASE("cli: bench reports a failure while reading with exit 1, after the summary", "[cli]") {
  testing::TempDir dir;
  const std::string path = dir.File("pipeline.yaml");
  WriteFile(path, absl::StrCat("pipeline:\n  - text_line: ", dir.File("nope.txt"), "\n"));
  const Result result = Bench(path, 60);
  CHECK(result.code == 1);
  CheckSummary(result.out, "stopped by an error", 0, 0, 0);
  CHECK_THAT(result.err,
             Equals("sluice: cannot open '" + dir.File("nope.txt") + "': No such file or directory\n"));
}

// ---------------------------------------------------------------------------
// pipelines that read from the data service

constexpr char kServicePipeline[] =
    "pipeline:\n"
    "  - range: 10\n"
    "  - map: {fn: square}\n"
    "  - distribute: {processing_mode: distributed_epoch}\n"
    "  - map: {fn: add, value: 1}\n"
    "  - batch: {batch_size: 5}\n";

TEST_CASE("cli: run refuses a distribute step with exit 2, naming its file:line and sluice read",
          "[cli][hardening]") {
  testing::TempDir dir;
  const std::string path = dir.File("service.yaml");
  WriteFile(path, kServicePipeline);
  const Result result = Run(path);
  CHECK(result.code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err,
             Equals("sluice: " + path +
                    ":4:5: step 3 (distribute) reads from the data service, which `sluice run` does "
                    "not: it runs pipelines in this process. Use `sluice read " +
                    path + "`, or `sluice inspect` to see both halves\n"));
}

TEST_CASE("cli: inspect shows both halves of a pipeline with a distribute step", "[cli][hardening]") {
  testing::TempDir dir;
  const std::string path = dir.File("service.yaml");
  WriteFile(path, kServicePipeline);
  const Result result = Inspect(path);
  CHECK(result.code == 0);
  CHECK_THAT(result.err, Equals(""));
  absl::StatusOr<LoadedPipeline> whole = LoadPipelineFile(path, {.validate = false});
  REQUIRE(whole.ok());
  CHECK_THAT(
      result.out,
      Equals("pipeline:     " + path + "\n" + "fingerprint:  " + DatasetFingerprint(whole->def) + "\n" +
             "on the workers (steps 1-2; the dataset the dispatcher registers):\n"
             "  fingerprint:  " +
             Dataset::Range(10).Map("square").Fingerprint() +
             "\n"
             "  element_spec: TensorSpec(shape=[], dtype=int64)\n"
             "  cardinality:  10\n"
             "  splittable:   yes\n"
             "  1. range { stop: 10 step: 1 }\n"
             "  2. map { fn { name: \"square\" } deterministic: true }\n"
             "distribute (step 3):\n"
             "  3. distribute { processing_mode: \"distributed_epoch\" }\n"
             "in the reading process (steps 4-5):\n"
             "  4. map { fn { name: \"add\" args { key: \"value\" value { i: 1 } } } deterministic: true }\n"
             "  5. batch { batch_size: 5 deterministic: true }\n"));
}

TEST_CASE("cli: inspect of a distribute pipeline whose files only the workers have", "[cli][hardening]") {
  testing::TempDir dir;
  const std::string path = dir.File("files.yaml");
  WriteFile(path,
            "pipeline:\n"
            "  - list_files: [\"/nonexistent/sluice/*.txt\"]\n"
            "  - distribute: {}\n");
  const Result result = Inspect(path);
  CHECK(result.code == 0);
  CHECK_THAT(result.out,
             Contains("  element_spec: not known here (" + path +
                      ":2:5: step 1 (list_files): cannot read pattern '/nonexistent/sluice/*.txt')\n"
                      "  1. list_files { pattern: \"/nonexistent/sluice/*.txt\" shuffle: true }\n"
                      "distribute (step 2):\n"
                      "  2. distribute\n"
                      "in the reading process: no steps\n"));
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

Result RunWithState(const std::string& path, int64_t limit, const std::string& save, int64_t every,
                    const std::string& restore) {
  cli::RunOptions options;
  options.pipeline_path = path;
  options.limit = limit;
  options.save_state = save;
  options.save_every = every;
  options.restore = restore;
  std::ostringstream out, err;
  const int code = cli::RunPipeline(options, out, err);
  return {code, out.str(), err.str()};
}

TEST_CASE("cli: run --save-state and --restore resume right after the last line", "[cli][checkpoint]") {
  testing::TempDir dir;
  const std::string path = dir.File("p.yaml");
  WriteFile(path,
            "pipeline:\n  - range: 50\n  - shuffle: {buffer_size: 7, seed: 3}\n  - repeat: 2\n"
            "  - batch: {batch_size: 3, num_parallel_calls: 2}\n");
  const std::string all = Run(path).out;
  REQUIRE(Lines(all).size() == 34);
  const std::string state = dir.File("state");
  // --limit: saved as of the 10th line, whatever --save-every says.
  Result first = RunWithState(path, 10, state, 4, "");
  CHECK(first.code == 0);
  CHECK(Lines(first.out).size() == 10);
  Result second = RunWithState(path, -1, state, 0, state);
  CHECK(second.code == 0);
  CHECK(first.out + second.out == all);
  // At the end of the data the state is the end: a restore prints nothing.
  Result third = RunWithState(path, -1, "", 0, state);
  CHECK(third.code == 0);
  CHECK(third.out.empty());
  // Another pipeline's state, and a file that is not one.
  WriteFile(path, "pipeline:\n  - range: 51\n");
  Result other = RunWithState(path, -1, "", 0, state);
  CHECK(other.code == 2);  // bad input, as a pipeline that does not load
  CHECK_THAT(other.err, Contains("the saved iterator state is from another pipeline"));
  WriteFile(dir.File("junk"), "\xff\xff\xff");
  Result junk = RunWithState(path, -1, "", 0, dir.File("junk"));
  CHECK(junk.code == 2);
  CHECK_THAT(junk.err, Contains("the saved iterator state does not parse"));
  Result missing = RunWithState(path, -1, "", 0, dir.File("none"));
  CHECK(missing.code == 2);
  CHECK_THAT(missing.err, Equals("sluice: --restore: cannot read '" + dir.File("none") + "'\n"));
  Result no_file = RunWithState(path, -1, "", 3, "");
  CHECK(no_file.code == 2);
  CHECK_THAT(no_file.err, Equals("sluice: --save-every needs --save-state FILE and a count >= 1\n"));
}

TEST_CASE("cli: after kill -9 a restore resumes right after the last multiple of --save-every",
          "[cli][checkpoint]") {
  testing::TempDir dir;
  const std::string path = dir.File("p.yaml");
  WriteFile(path, "pipeline:\n  - range: 3000000\n  - shuffle: {buffer_size: 100, seed: 8}\n");
  const std::string state = dir.File("state");
  const std::string sluice = absl::StrCat("'", SLUICE_CLI, "' run '", path, "'");
  const std::vector<std::string> all = Lines(Shell(sluice).out);
  REQUIRE(all.size() == 3000000);
  constexpr int64_t kEvery = 1000;
  // Killed mid-run: stdout to a file, so that what was printed survives.
  Shell(absl::StrCat("timeout -s KILL 1 ", sluice, " --save-state '", state, "' --save-every ", kEvery,
                     " > '", dir.File("first"), "'; true"));
  std::ifstream first_file(dir.File("first"));
  const std::string first_text((std::istreambuf_iterator<char>(first_file)),
                               std::istreambuf_iterator<char>());
  const std::vector<std::string> first = Lines(first_text);
  INFO("printed before the kill: " << first.size());
  REQUIRE(first.size() >= static_cast<size_t>(kEvery));
  REQUIRE(first.size() < all.size());  // killed before the end
  CHECK(std::equal(first.begin(), first.end(), all.begin()));
  const std::vector<std::string> second = Lines(Shell(absl::StrCat(sluice, " --restore '", state, "'")).out);
  const size_t resumed_at = all.size() - second.size();
  INFO("resumed at " << resumed_at);
  CHECK(resumed_at % kEvery == 0);
  // The last save came at most one interval before the kill.
  CHECK(resumed_at <= first.size());
  CHECK(first.size() - resumed_at <= static_cast<size_t>(kEvery));
  CHECK(std::equal(second.begin(), second.end(), all.begin() + static_cast<std::ptrdiff_t>(resumed_at)));

  // SIGINT ends the run cleanly (exit 130) and saves as of the last line.
  const Result interrupted =
      Shell(absl::StrCat("timeout --preserve-status -s INT 0.5 ", sluice, " --save-state '", state,
                         "' --save-every 1000000 > '", dir.File("third"), "'"));
  CHECK(interrupted.code == 130);
  std::ifstream third_file(dir.File("third"));
  const std::vector<std::string> third =
      Lines(std::string((std::istreambuf_iterator<char>(third_file)), std::istreambuf_iterator<char>()));
  REQUIRE(third.size() < all.size());
  const std::vector<std::string> fourth = Lines(Shell(absl::StrCat(sluice, " --restore '", state, "'")).out);
  CHECK(third.size() + fourth.size() == all.size());
  CHECK(std::equal(fourth.begin(), fourth.end(), all.begin() + static_cast<std::ptrdiff_t>(third.size())));
}

TEST_CASE("cli: status shows the autoscaling advice of the jobs that have readers", "[cli]") {
  proto::StatusSnapshot snapshot;
  proto::ScalingAdvice* scaling = snapshot.mutable_scaling();
  proto::ScalingAdvice::Job* job = scaling->add_jobs();
  job->set_job_id(1);
  job->set_job_name("train");
  job->set_wait_fraction(0.6);
  job->set_utilisation(1);
  job->set_workers(1);
  job->set_recommended_workers(3);
  scaling->set_wait_fraction(0.6);
  scaling->set_utilisation(1);
  scaling->set_workers(1);
  scaling->set_recommended_workers(3);
  scaling->set_advice("trainers wait 60% of the time; about 2 more workers would remove it");
  CHECK_THAT(cli::FormatStatusTables(snapshot, 0),
             Equals("workers: 0\n\ndatasets: 0\n\njobs: 0\n\niterations: 0\n\ntasks: 0\n"
                    "\n"
                    "scaling: 1\n"
                    "  JOB  NAME   WAITING  BUSY  WORKERS  RECOMMENDED\n"
                    "  1    train  60%      100%  1        3\n"
                    "trainers wait 60% of the time; about 2 more workers would remove it (recommended: 3 "
                    "workers, 1 serving)\n"));
}

}  // namespace
}  // namespace sluice
