// Tests of the `sluice` subcommands (cli/commands.cc), called with string
// streams, and one end-to-end run of the real binary.
#include "cli/commands.h"

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/builder.h"
#include "pipeline/record_io.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::WriteFile;

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
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
          "it with range, from_tensor_slices, list_files, text_line, tfrecord or fixed_length_record)\n"
          "steps:\n"
          "  1. zip { datasets { steps { range { stop: 3 step: 1 } } } datasets { steps { range { stop: 2 "
          "step: 1 } } } }\n"
          "  2. repeat { count: -1 }\n"));
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
  CHECK_THAT(out.str(), Equals("add\tx + value\n"
                               "cast\tconverts to dtype\n"
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
                               "not_equal\tx != value\n"
                               "parse_example\tparses a serialized tf.train.Example\n"
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

}  // namespace
}  // namespace sluice
