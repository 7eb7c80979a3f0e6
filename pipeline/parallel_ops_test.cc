// Tests of map, batch and interleave, sequential and on a thread pool.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/exceptions.h"
#include "pipeline/dataset.h"
#include "pipeline/function.h"
#include "pipeline/ops.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using testing::BuildError;
using testing::IntsOf;
using testing::JsonOf;
using testing::MustBuild;
using testing::MustIterate;
using testing::Yaml;

using Catch::Matchers::Contains;
using Lines = std::vector<std::string>;
using Ints = std::vector<int64_t>;

// The JSON of the next element; fails the test on an error or the end.
std::string NextJson(IteratorBase& it) {
  Element element;
  bool end = true;
  absl::Status status = it.GetNext(&element, &end);
  INFO(status.ToString());
  REQUIRE(status.ok());
  REQUIRE_FALSE(end);
  return ElementToJson(element);
}

template <typename T>
std::vector<T> Sorted(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  return values;
}

Ints Squares(int64_t n) {
  Ints values;
  for (int64_t i = 0; i < n; ++i) values.push_back(i * i);
  return values;
}

MapOptions Parallel(int64_t calls, bool deterministic = true) {
  MapOptions options;
  options.num_parallel_calls = calls;
  options.deterministic = deterministic;
  return options;
}

// "ab" and "cd" decode to one int16 each; "efg" has an odd length.
const char kDecodeFailsAtThird[] =
    "pipeline:\n"
    "  - from_tensor_slices: [ab, cd, efg, gh]\n"
    "  - map: {fn: decode_raw, dtype: int16, num_parallel_calls: CALLS}\n";

std::string WithCalls(const std::string& text, int calls) {
  std::string out = text;
  out.replace(out.find("CALLS"), 5, std::to_string(calls));
  return out;
}

// ---------------------------------------------------------------- map

TEST_CASE("parallel_ops: sequential map", "[ops][map]") {
  CHECK(IntsOf(Dataset::Range(1000).Map("square")) == Squares(1000));
  CHECK(Yaml("pipeline:\n  - range: 5\n  - map: {fn: add, value: 10}\n") ==
        Lines{"10", "11", "12", "13", "14"});
  CHECK(Yaml("pipeline:\n  - range: 4\n  - map: negate\n") == Lines{"0", "-1", "-2", "-3"});
  CHECK(Yaml("pipeline:\n"
             "  - from_tensor_slices: {x: [1, 2], y: [3, 4]}\n"
             "  - map: {fn: multiply, value: 10, component: y}\n") ==
        Lines{"{\"x\": 1, \"y\": 30}", "{\"x\": 2, \"y\": 40}"});
  DatasetPtr dataset = MustBuild(Dataset::Range(7).Map("square"));
  CHECK(dataset->Cardinality() == 7);
  CHECK(dataset->DebugName() == "map(square)");
}

TEST_CASE("parallel_ops: parallel deterministic map keeps input order", "[ops][map]") {
  CHECK(IntsOf(Dataset::Range(1000).Map("square", {}, Parallel(4))) == Squares(1000));
  CHECK(IntsOf(Dataset::Range(1000).Map("square", {}, Parallel(2))) == Squares(1000));
  CHECK(IntsOf(Dataset::Range(1000).Map("square", {}, Parallel(-1))) == Squares(1000));
  CHECK(IntsOf(Dataset::Range(3).Map("square", {}, Parallel(16))) == Ints{0, 1, 4});
  CHECK(Yaml("pipeline:\n"
             "  - range: 10\n"
             "  - map: {fn: square, num_parallel_calls: 4}\n"
             "  - batch: {batch_size: 4}\n") == Lines{"[0, 1, 4, 9]", "[16, 25, 36, 49]", "[64, 81]"});
  // Chained parallel maps.
  CHECK(IntsOf(Dataset::Range(500)
                   .Map("add", {{"value", 1}}, Parallel(3))
                   .Map("multiply", {{"value", 2}}, Parallel(4))) == [] {
    Ints v;
    for (int64_t i = 0; i < 500; ++i) v.push_back((i + 1) * 2);
    return v;
  }());
  CHECK(MustBuild(Dataset::Range(1000).Map("square", {}, Parallel(4)))->Cardinality() == 1000);
}

TEST_CASE("parallel_ops: parallel non-deterministic map gives the same multiset", "[ops][map]") {
  const Ints values = IntsOf(Dataset::Range(1000).Map("square", {}, Parallel(4, false)));
  CHECK(values.size() == 1000);
  CHECK(Sorted(values) == Squares(1000));
  CHECK(Sorted(IntsOf(Dataset::Range(1000).Map("square", {}, Parallel(-1, false)))) == Squares(1000));
}

TEST_CASE("parallel_ops: a parallel map works past a slow unit up to twice its calls", "[ops][map]") {
  // Element 0 is slow: it waits (at most 10 s) until as many calls have
  // started as the map allows without its consumer, which waits for
  // element 0 first. With 2 calls that is 4: the other thread goes on with
  // elements 1, 2 and 3, and a fifth waits until the consumer takes one.
  absl::Mutex mu;
  int started = 0;
  int started_when_released = 0;
  auto fn = [&](const Element& element) -> absl::StatusOr<Element> {
    absl::MutexLock lock(&mu);
    ++started;
    if (element.components[0].data<int64_t>()[0] == 0) {
      auto four_started = [&]() { return started >= 4; };
      mu.AwaitWithTimeout(absl::Condition(&four_started), absl::Seconds(10));
      // Give a fifth call the time to start, were it allowed to.
      static constexpr bool kNever = false;
      mu.AwaitWithTimeout(absl::Condition(&kNever), absl::Milliseconds(100));
      started_when_released = started;
    }
    return element;
  };
  ElementSpec scalar_int64{.components = {TensorSpec{PartialShape{}, DType::kInt64}}};
  CHECK(IntsOf(Dataset::Range(20).MapLocal(fn, scalar_int64, Parallel(2))) ==
        Ints{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  CHECK(started_when_released == 4);
}

TEST_CASE("parallel_ops: map over an empty or infinite input", "[ops][map]") {
  CHECK(IntsOf(Dataset::Range(0).Map("square", {}, Parallel(4))).empty());
  CHECK(IntsOf(Dataset::Range(0).Map("square")).empty());
  const Dataset infinite = Dataset::Range(3).Repeat().Map("square", {}, Parallel(4));
  CHECK(MustBuild(infinite)->Cardinality() == kInfiniteCardinality);
  CHECK(IntsOf(infinite, 7) == Ints{0, 1, 4, 0, 1, 4, 0});
  CHECK(IntsOf(infinite.Take(5)) == Ints{0, 1, 4, 0, 1});
}

TEST_CASE("parallel_ops: map errors propagate", "[ops][map]") {
  for (int calls : {0, 1, 4}) {
    INFO("num_parallel_calls " << calls);
    absl::StatusOr<DatasetPtr> dataset = testing::DatasetFromYaml(WithCalls(kDecodeFailsAtThird, calls));
    REQUIRE(dataset.ok());
    std::unique_ptr<IteratorBase> it = MustIterate(*dataset);
    CHECK(NextJson(*it) == "[25185]");  // 'a' + 256 * 'b'
    CHECK(NextJson(*it) == "[25699]");  // 'c' + 256 * 'd'
    Element element;
    bool end = false;
    absl::Status status = it->GetNext(&element, &end);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message() == "decode_raw: 3 bytes is not a multiple of the 2-byte int16");

    absl::StatusOr<std::vector<Element>> all = CollectElements(**dataset);
    REQUIRE_FALSE(all.ok());
    CHECK(all.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(all.status().message() == "decode_raw: 3 bytes is not a multiple of the 2-byte int16");
  }
}

TEST_CASE("parallel_ops: non-deterministic map errors propagate", "[ops][map]") {
  absl::StatusOr<Lines> lines = testing::RunYaml(
      "pipeline:\n"
      "  - from_tensor_slices: [ab, cd, efg, gh]\n"
      "  - map: {fn: decode_raw, dtype: int16, num_parallel_calls: 4, deterministic: false}\n");
  REQUIRE_FALSE(lines.ok());
  CHECK(lines.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(lines.status().message() == "decode_raw: 3 bytes is not a multiple of the 2-byte int16");
}

// dataset.h: as in tf.data, a map error belongs to its element and the
// iterator goes on with the next one, sequential or parallel alike.
TEST_CASE("parallel_ops: a map iterator goes on after an element's error", "[ops][map]") {
  for (int calls : {0, 4}) {
    INFO("num_parallel_calls " << calls);
    absl::StatusOr<DatasetPtr> dataset = testing::DatasetFromYaml(WithCalls(kDecodeFailsAtThird, calls));
    REQUIRE(dataset.ok());
    std::unique_ptr<IteratorBase> it = MustIterate(*dataset);
    Element element;
    bool end = false;
    REQUIRE(it->GetNext(&element, &end).ok());
    REQUIRE(it->GetNext(&element, &end).ok());
    absl::Status error = it->GetNext(&element, &end);
    CHECK(error.message() == "decode_raw: 3 bytes is not a multiple of the 2-byte int16");
    end = false;
    REQUIRE(it->GetNext(&element, &end).ok());
    REQUIRE_FALSE(end);
    CHECK(ElementToJson(element) == "[26727]");  // "gh" as one little-endian int16
    REQUIRE(it->GetNext(&element, &end).ok());
    CHECK(end);
  }
}

TEST_CASE("parallel_ops: map argument errors", "[ops][map]") {
  absl::Status calls = BuildError(Dataset::Range(3).Map("square", {}, Parallel(-2)));
  CHECK(calls.code() == absl::StatusCode::kInvalidArgument);
  CHECK(calls.message() == "step 2 (map): num_parallel_calls must be >= 1, or -1 for autotune, got -2");

  absl::Status type =
      BuildError(Dataset::FromTensorSlices({Tensor::FromVector<std::string>({"a"})}).Map("square"));
  CHECK(type.code() == absl::StatusCode::kInvalidArgument);
  CHECK(type.message() == "step 2 (map): square: needs a numeric component, got string");
}

// ---------------------------------------------------------------- batch

TEST_CASE("parallel_ops: batch", "[ops][batch]") {
  CHECK(JsonOf(Dataset::Range(10).Map("square").Batch(4)) ==
        Lines{"[0, 1, 4, 9]", "[16, 25, 36, 49]", "[64, 81]"});
  CHECK(Yaml("pipeline:\n  - range: 10\n  - map: {fn: square}\n  - batch: {batch_size: 4}\n") ==
        Lines{"[0, 1, 4, 9]", "[16, 25, 36, 49]", "[64, 81]"});
  CHECK(JsonOf(Dataset::Range(4).Batch(4)) == Lines{"[0, 1, 2, 3]"});
  CHECK(JsonOf(Dataset::Range(3).Batch(10)) == Lines{"[0, 1, 2]"});
  CHECK(JsonOf(Dataset::Range(0).Batch(2)).empty());
  DatasetPtr dataset = MustBuild(Dataset::Range(10).Batch(4));
  CHECK(dataset->Cardinality() == 3);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({kUnknownDim}));
  CHECK(dataset->element_spec().components[0].dtype == DType::kInt64);
  CHECK(dataset->DebugName() == "batch");
}

TEST_CASE("parallel_ops: batch with drop_remainder", "[ops][batch]") {
  CHECK(JsonOf(Dataset::Range(10).Map("square").Batch(4, {.drop_remainder = true})) ==
        Lines{"[0, 1, 4, 9]", "[16, 25, 36, 49]"});
  CHECK(JsonOf(Dataset::Range(8).Batch(4, {.drop_remainder = true})) ==
        Lines{"[0, 1, 2, 3]", "[4, 5, 6, 7]"});
  CHECK(JsonOf(Dataset::Range(3).Batch(4, {.drop_remainder = true})).empty());
  DatasetPtr dataset = MustBuild(Dataset::Range(10).Batch(4, {.drop_remainder = true}));
  CHECK(dataset->Cardinality() == 2);
  CHECK(dataset->element_spec().components[0].shape == PartialShape::Known({4}));
}

TEST_CASE("parallel_ops: batch of structured elements", "[ops][batch]") {
  CHECK(Yaml("pipeline:\n"
             "  - from_tensor_slices: {x: [1, 2, 3], s: [a, b, c]}\n"
             "  - batch: 2\n") ==
        Lines{"{\"x\": [1, 2], \"s\": [\"a\", \"b\"]}", "{\"x\": [3], \"s\": [\"c\"]}"});
  CHECK(Yaml("pipeline:\n"
             "  - from_tensor_slices: [[1, 2], [3, 4], [5, 6]]\n"
             "  - batch: 2\n") == Lines{"[[1, 2], [3, 4]]", "[[5, 6]]"});
  CHECK(JsonOf(Dataset::Range(3).Enumerate(5).Batch(2)) == Lines{"[[5, 6], [0, 1]]", "[[7], [2]]"});
}

TEST_CASE("parallel_ops: parallel batch keeps input order", "[ops][batch]") {
  for (bool drop : {false, true}) {
    INFO("drop_remainder " << drop);
    const Lines expected = JsonOf(Dataset::Range(100).Batch(7, {.drop_remainder = drop}));
    REQUIRE(expected.size() == (drop ? 14u : 15u));
    CHECK(expected.front() == "[0, 1, 2, 3, 4, 5, 6]");
    CHECK(expected.back() == (drop ? "[91, 92, 93, 94, 95, 96, 97]" : "[98, 99]"));
    CHECK(JsonOf(Dataset::Range(100).Batch(7, {.drop_remainder = drop, .num_parallel_calls = 3})) ==
          expected);
    CHECK(JsonOf(Dataset::Range(100).Batch(7, {.drop_remainder = drop, .num_parallel_calls = 2})) ==
          expected);
    CHECK(JsonOf(Dataset::Range(100).Batch(7, {.drop_remainder = drop, .num_parallel_calls = -1})) ==
          expected);
    CHECK(Sorted(JsonOf(Dataset::Range(100).Batch(
              7, {.drop_remainder = drop, .num_parallel_calls = 3, .deterministic = false}))) ==
          Sorted(expected));
    CHECK(MustBuild(Dataset::Range(100).Batch(7, {.drop_remainder = drop, .num_parallel_calls = 3}))
              ->Cardinality() == (drop ? 14 : 15));
  }
  CHECK(Yaml("pipeline:\n"
             "  - range: 10\n"
             "  - map: {fn: square, num_parallel_calls: 2}\n"
             "  - batch: {batch_size: 4, num_parallel_calls: 3}\n") ==
        Lines{"[0, 1, 4, 9]", "[16, 25, 36, 49]", "[64, 81]"});
}

TEST_CASE("parallel_ops: batch of mismatched shapes points to padded_batch", "[ops][batch]") {
  for (int calls : {0, 3}) {
    INFO("num_parallel_calls " << calls);
    absl::StatusOr<Lines> lines = testing::RunYaml(
        "pipeline:\n"
        "  - from_tensor_slices: [a, bb, ccc]\n"
        "  - map: {fn: decode_raw, dtype: uint8}\n"
        "  - batch: {batch_size: 2, num_parallel_calls: " +
        std::to_string(calls) + "}\n");
    REQUIRE_FALSE(lines.ok());
    CHECK(lines.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(lines.status().message() ==
          "batch: cannot batch component 0 of shapes [1] and [2]; use padded_batch");
  }
}

TEST_CASE("parallel_ops: batch argument errors", "[ops][batch]") {
  absl::Status zero = BuildError(Dataset::Range(3).Batch(0));
  CHECK(zero.code() == absl::StatusCode::kInvalidArgument);
  CHECK(zero.message() == "step 2 (batch): batch_size must be > 0, got 0");
  absl::Status calls = BuildError(Dataset::Range(3).Batch(2, {.num_parallel_calls = -3}));
  CHECK(calls.code() == absl::StatusCode::kInvalidArgument);
  CHECK(calls.message() == "step 2 (batch): num_parallel_calls must be >= 1, or -1 for autotune, got -3");
}

// ---------------------------------------------------------------- interleave

// Three text files of 3, 2 and 4 lines, and an empty one.
class TextFiles {
 public:
  TextFiles() {
    Write("a.txt", "a0\na1\na2\n");
    Write("b.txt", "b0\nb1\n");
    Write("c.txt", "c0\nc1\nc2\nc3\n");
    Write("empty.txt", "");
  }
  std::string Path(const std::string& name) const { return dir_.File(name); }
  Dataset Files(const std::vector<std::string>& names) const {
    std::vector<std::string> paths;
    for (const std::string& name : names) paths.push_back(Path(name));
    return Dataset::FromTensorSlices({Tensor::FromVector<std::string>(paths)});
  }
  std::string Pattern() const { return dir_.File("*.txt"); }

 private:
  void Write(const std::string& name, const std::string& contents) {
    std::ofstream out(dir_.File(name), std::ios::binary);
    out << contents;
    REQUIRE(out.good());
  }
  testing::TempDir dir_;
};

Lines Quote(const std::vector<std::string>& values) {
  Lines out;
  for (const std::string& v : values) out.push_back("\"" + v + "\"");
  return out;
}

// The expected values are tf.data's order. (These once caught interleave
// freeing each sub-pipeline while its iterator still pointed into it.)
void CheckCycleOrders(const TextFiles& files, int64_t calls) {
  INFO("num_parallel_calls " << calls);
  const Dataset abc = files.Files({"a.txt", "b.txt", "c.txt"});
  const Dataset lines = Dataset::TextLine({});
  // cycle 2, block 1: when b runs out, its slot is skipped until the cycle
  // comes back to it; c opens there only after a runs out too.
  CHECK(JsonOf(abc.Interleave(lines, 2, 1, calls)) ==
        Quote({"a0", "b0", "a1", "b1", "a2", "c0", "c1", "c2", "c3"}));
  CHECK(JsonOf(abc.Interleave(lines, 2, 2, calls)) ==
        Quote({"a0", "a1", "b0", "b1", "a2", "c0", "c1", "c2", "c3"}));
  CHECK(JsonOf(abc.Interleave(lines, 3, 1, calls)) ==
        Quote({"a0", "b0", "c0", "a1", "b1", "c1", "a2", "c2", "c3"}));
  CHECK(JsonOf(abc.Interleave(lines, 3, 2, calls)) ==
        Quote({"a0", "a1", "b0", "b1", "c0", "c1", "a2", "c2", "c3"}));
  CHECK(JsonOf(abc.Interleave(lines, 1, 1, calls)) ==
        Quote({"a0", "a1", "a2", "b0", "b1", "c0", "c1", "c2", "c3"}));
  CHECK(JsonOf(abc.Interleave(lines, 4, 3, calls)) ==
        Quote({"a0", "a1", "a2", "b0", "b1", "c0", "c1", "c2", "c3"}));
  // An empty file ends at once and the next file takes its slot.
  CHECK(JsonOf(files.Files({"a.txt", "empty.txt", "b.txt", "c.txt"}).Interleave(lines, 2, 1, calls)) ==
        Quote({"a0", "a1", "b0", "a2", "b1", "c0", "c1", "c2", "c3"}));
}

TEST_CASE("parallel_ops: interleave follows tf.data's cycle order", "[ops][interleave]") {
  TextFiles files;
  CheckCycleOrders(files, 0);
}

TEST_CASE("parallel_ops: parallel interleave gives the same order", "[ops][interleave]") {
  TextFiles files;
  CheckCycleOrders(files, 2);
  CheckCycleOrders(files, -1);
}

TEST_CASE("parallel_ops: interleave from YAML", "[ops][interleave]") {
  TextFiles files;
  const std::string input = "  - from_tensor_slices: [\"" + files.Path("a.txt") + "\", \"" +
                            files.Path("b.txt") + "\", \"" + files.Path("c.txt") + "\"]\n";
  CHECK(Yaml("pipeline:\n" + input +
             "  - interleave: {cycle_length: 2, block_length: 1, pipeline: [text_line]}\n") ==
        Quote({"a0", "b0", "a1", "b1", "a2", "c0", "c1", "c2", "c3"}));
  // The sub-pipeline may have transforms of its own.
  CHECK(Yaml("pipeline:\n" + input +
             "  - interleave: {cycle_length: 3, pipeline: [text_line, {skip: 1}, {take: 2}]}\n") ==
        Quote({"a1", "b1", "c1", "a2", "c2"}));
  CHECK(Yaml("pipeline:\n" + input +
             "  - interleave: {cycle_length: 2, block_length: 1, num_parallel_calls: 2, pipeline: "
             "[text_line]}\n") == Quote({"a0", "b0", "a1", "b1", "a2", "c0", "c1", "c2", "c3"}));
}

TEST_CASE("parallel_ops: interleave of list_files", "[ops][interleave]") {
  TextFiles files;
  // Sorted: a.txt, b.txt, c.txt, empty.txt.
  CHECK(JsonOf(Dataset::ListFiles({files.Pattern()}, false).Interleave(Dataset::TextLine({}), 2, 1)) ==
        Quote({"a0", "b0", "a1", "b1", "a2", "c0", "c1", "c2", "c3"}));
}

TEST_CASE("parallel_ops: destroying a parallel interleave iterator mid-stream", "[ops][interleave]") {
  TextFiles files;
  DatasetPtr interleaved = MustBuild(
      files.Files({"a.txt", "b.txt", "c.txt"}).Interleave(Dataset::TextLine({}), 2, 1, 2).Prefetch(1));
  {
    std::unique_ptr<IteratorBase> it = MustIterate(interleaved);
    CHECK(NextJson(*it) == "\"a0\"");
  }
  SUCCEED("the iterator was destroyed");
}

TEST_CASE("parallel_ops: interleave cardinality and errors", "[ops][interleave]") {
  TextFiles files;
  CHECK(MustBuild(files.Files({"a.txt"}).Interleave(Dataset::TextLine({}), 2, 1))->Cardinality() ==
        kUnknownCardinality);
  const Dataset none = Dataset::FromTensorSlices({*Tensor::FromVector<std::string>({}, {0})});
  CHECK(MustBuild(none.Interleave(Dataset::TextLine({}), 2, 1))->Cardinality() == 0);
  CHECK(JsonOf(none.Interleave(Dataset::TextLine({}), 2, 1)).empty());

  absl::Status cycle = BuildError(files.Files({"a.txt"}).Interleave(Dataset::TextLine({}), 0, 1));
  CHECK(cycle.code() == absl::StatusCode::kInvalidArgument);
  CHECK(cycle.message() == "step 2 (interleave): cycle_length must be > 0, got 0");
  absl::Status block = BuildError(files.Files({"a.txt"}).Interleave(Dataset::TextLine({}), 2, 0));
  CHECK(block.code() == absl::StatusCode::kInvalidArgument);
  CHECK(block.message() == "step 2 (interleave): block_length must be > 0, got 0");
}

// ---------------------------------------------------------------- cancellation

TEST_CASE("parallel_ops: destroying a parallel map iterator mid-stream", "[ops][map]") {
  DatasetPtr dataset = MustBuild(Dataset::Range(1000000).Map("square", {}, Parallel(4)));
  {
    std::unique_ptr<IteratorBase> it = MustIterate(dataset);
    CHECK(NextJson(*it) == "0");
    CHECK(NextJson(*it) == "1");
    CHECK(NextJson(*it) == "4");
  }
  {
    std::unique_ptr<IteratorBase> unused = MustIterate(dataset);  // never read
  }
  DatasetPtr unordered = MustBuild(Dataset::Range(10).Repeat().Map("square", {}, Parallel(8, false)));
  {
    std::unique_ptr<IteratorBase> it = MustIterate(unordered);
    for (int i = 0; i < 5; ++i) NextJson(*it);
  }
  SUCCEED("the iterators were destroyed");
}

TEST_CASE("parallel_ops: destroying a prefetch iterator mid-stream", "[ops][prefetch]") {
  DatasetPtr dataset = MustBuild(Dataset::Range(10).Repeat().Map("square", {}, Parallel(4)).Prefetch(2));
  {
    std::unique_ptr<IteratorBase> it = MustIterate(dataset);
    CHECK(NextJson(*it) == "0");
    CHECK(NextJson(*it) == "1");
  }
  {
    std::unique_ptr<IteratorBase> unused = MustIterate(dataset);  // never read
  }
  DatasetPtr plain = MustBuild(Dataset::Range(100000).Prefetch(1));
  {
    std::unique_ptr<IteratorBase> it = MustIterate(plain);
    CHECK(NextJson(*it) == "0");
  }
  SUCCEED("the iterators were destroyed");
}

TEST_CASE("parallel_ops: destroying a parallel batch iterator mid-stream", "[ops][batch]") {
  DatasetPtr batches = MustBuild(Dataset::Range(10).Repeat().Batch(3, {.num_parallel_calls = 4}).Prefetch(4));
  {
    std::unique_ptr<IteratorBase> it = MustIterate(batches);
    CHECK(NextJson(*it) == "[0, 1, 2]");
    CHECK(NextJson(*it) == "[3, 4, 5]");
  }
  // take() ends the collection with work still in flight behind it.
  CHECK(IntsOf(Dataset::Range(100000).Map("square", {}, Parallel(8)).Take(3)) == Ints{0, 1, 4});
}

TEST_CASE("parallel_ops: a batch_size far past the input costs only the input", "[pipeline][hardening]") {
  // 2^40 rows were allocated up front by the source's bulk read: abort.
  absl::StatusOr<Lines> lines = testing::RunYaml("pipeline:\n  - range: 3\n  - batch: 1099511627776\n");
  INFO(lines.status().ToString());
  REQUIRE(lines.ok());
  CHECK(*lines == Lines{"[0, 1, 2]"});
  absl::StatusOr<Lines> dropped = testing::RunYaml(
      "pipeline:\n  - range: 3\n  - batch: {batch_size: 1099511627776, drop_remainder: true}\n");
  REQUIRE(dropped.ok());
  CHECK(dropped->empty());
}

TEST_CASE("parallel_ops: a batch past the bulk read's 2^20 rows is read in chunks and joined",
          "[pipeline][hardening]") {
  const int64_t rows = (int64_t{1} << 20) + 3;
  DatasetPtr batches = MustBuild(Dataset::Range(rows + 2).Batch(rows));
  std::unique_ptr<IteratorBase> it = MustIterate(batches);
  Element first;
  bool end = true;
  REQUIRE(it->GetNext(&first, &end).ok());
  REQUIRE_FALSE(end);
  REQUIRE(first.components.at(0).shape() == std::vector<int64_t>{rows});
  const int64_t* values = first.components[0].data<int64_t>();
  CHECK(values[0] == 0);
  CHECK(values[(int64_t{1} << 20) - 1] == (int64_t{1} << 20) - 1);
  CHECK(values[int64_t{1} << 20] == int64_t{1} << 20);
  CHECK(values[rows - 1] == rows - 1);
  CHECK(NextJson(*it) == absl::StrCat("[", rows, ", ", rows + 1, "]"));
  Element none;
  REQUIRE(it->GetNext(&none, &end).ok());
  CHECK(end);
}

TEST_CASE("parallel_ops: a shuffle buffer far past the input costs only the input", "[pipeline][hardening]") {
  absl::StatusOr<Lines> lines =
      testing::RunYaml("pipeline:\n  - range: 3\n  - shuffle: {buffer_size: 1099511627776, seed: 1}\n");
  INFO(lines.status().ToString());
  REQUIRE(lines.ok());
  Lines sorted = *lines;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == Lines{"0", "1", "2"});
}

TEST_CASE("parallel_ops: interleave's cycle_length is bounded, naming the bound", "[pipeline][hardening]") {
  absl::StatusOr<Lines> lines = testing::RunYaml(
      "pipeline:\n  - range: 3\n  - interleave: {cycle_length: 9223372036854775807, pipeline: [{range: "
      "2}]}\n");
  CHECK(lines.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(lines.status().message() ==
        "test.yaml:3:5: step 2 (interleave): cycle_length must be at most 65536 (sub-pipelines open at "
        "once), got "
        "9223372036854775807");
}

// Throws what `kind` says on every element: what a plugin's bug, or an
// allocation failing inside a function, looks like to the engine.
class ThrowingFunction : public ElementFunction {
 public:
  explicit ThrowingFunction(std::string kind) : kind_(std::move(kind)) {}
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override { return input; }
  absl::StatusOr<Element> Call(const Element&) const override {
    if (kind_ == "bad_alloc") throw std::bad_alloc();
    if (kind_ == "length") {
      std::vector<int64_t> rows;
      rows.reserve(rows.max_size() + 1);  // std::length_error
    }
    if (kind_ == "runtime") throw std::runtime_error("plugin bug");
    throw 42;
  }

 private:
  const std::string kind_;
};

// Registers test_throw for the life of a test (the registry is global, and
// `sluice functions` lists it whole).
class ScopedThrowingFunction {
 public:
  ScopedThrowingFunction() {
    REQUIRE(FunctionRegistry::Global()
                .Register("test_throw", "throws what `kind` says",
                          [](FunctionArgs& args) -> absl::StatusOr<std::unique_ptr<ElementFunction>> {
                            absl::StatusOr<std::string> kind = args.GetString("kind");
                            if (!kind.ok()) return kind.status();
                            return std::make_unique<ThrowingFunction>(*kind);
                          })
                .ok());
  }
  ~ScopedThrowingFunction() { FunctionRegistry::Global().Unregister("test_throw"); }
};

TEST_CASE("parallel_ops: what a step throws is its error, naming the step, not std::terminate",
          "[pipeline][hardening]") {
  ScopedThrowingFunction registered;
  struct Case {
    std::string kind;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"bad_alloc", absl::StatusCode::kResourceExhausted,
       "step 2 (map): out of memory (an allocation failed: std::bad_alloc)"},
      {"length", absl::StatusCode::kResourceExhausted,
       "step 2 (map): asked for more memory than can be allocated (vector::reserve)"},
      {"runtime", absl::StatusCode::kInternal, "step 2 (map): threw an exception: plugin bug"},
      {"int", absl::StatusCode::kInternal, "step 2 (map): threw an exception that is not a std::exception"},
  };
  for (const Case& c : cases) {
    INFO(c.kind);
    absl::StatusOr<Lines> lines =
        testing::RunYaml("pipeline:\n  - range: 3\n  - map: {fn: test_throw, kind: " + c.kind + "}\n");
    CHECK(lines.status().code() == c.code);
    CHECK(lines.status().message() == c.message);
    CHECK(IsAllocationFailure(lines.status()) == (c.code == absl::StatusCode::kResourceExhausted));
  }
  // On a pool thread (parallel map) the op names itself; the next element
  // is tried, and fails the same way.
  absl::StatusOr<DatasetPtr> parallel = testing::DatasetFromYaml(
      "pipeline:\n  - range: 3\n  - map: {fn: test_throw, kind: bad_alloc, num_parallel_calls: 2}\n  - "
      "prefetch: 2\n");
  REQUIRE(parallel.ok());
  std::unique_ptr<IteratorBase> it = MustIterate(*parallel);
  for (int i = 0; i < 2; ++i) {
    Element element;
    bool end = false;
    const absl::Status status = it->GetNext(&element, &end);
    CHECK(status.code() == absl::StatusCode::kResourceExhausted);
    CHECK(status.message() == "map(test_throw): out of memory (an allocation failed: std::bad_alloc)");
  }
}

// An iterator that throws, as an op's would without the builder's wrapper.
class ThrowingIterator : public IteratorBase {
 public:
  absl::Status GetNext(Element*, bool*) override { throw std::runtime_error("boom"); }
};

TEST_CASE("parallel_ops: prefetch's thread makes what its input throws the read's error",
          "[pipeline][hardening]") {
  std::unique_ptr<IteratorBase> it = MakeBackgroundIterator(std::make_unique<ThrowingIterator>(), 2);
  Element element;
  bool end = false;
  const absl::Status status = it->GetNext(&element, &end);
  CHECK(status.code() == absl::StatusCode::kInternal);
  CHECK(status.message() == "prefetch: threw an exception: boom");
}

TEST_CASE("parallel_ops: a parallel interleave with a block_length near 2^63 reads every block",
          "[pipeline][hardening]") {
  // Twice the block_length overflowed into a read-ahead buffer that never
  // had room: the read hung.
  absl::StatusOr<Lines> lines = testing::RunYaml(
      "pipeline:\n  - range: 2\n  - interleave: {cycle_length: 2, block_length: 9223372036854775807, "
      "num_parallel_calls: 2, pipeline: [{range: 3}]}\n");
  INFO(lines.status().ToString());
  REQUIRE(lines.ok());
  CHECK(*lines == Lines{"0", "1", "2", "0", "1", "2"});
}

}  // namespace
}  // namespace sluice
