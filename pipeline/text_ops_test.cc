// Tests of the text ops for language models: json_lines, tokenize (against
// SentencePiece's own spm_encode and spm_decode, with models spm_train
// makes here) and
// pack_sequences (hand-worked packings), each restored at every position.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "pipeline/builder.h"
#include "pipeline/dataset.h"
#include "pipeline/ops.h"
#include "pipeline/sandbox.h"
#include "sluice/dataset.h"
#include "sluice/proto/checkpoint.pb.h"
#include "tests/testing/checkpoint_util.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using testing::BuildError;
using testing::JsonOf;
using testing::MustBuild;
using testing::TempDir;
using testing::WriteFile;
using Lines = std::vector<std::string>;

// A corpus of lines of the words above, the same on every run.
std::string Corpus(int lines) {
  const std::vector<std::string> words = {"data",   "service", "train", "model", "token", "sequence", "pack",
                                          "worker", "reader",  "epoch", "batch", "split", "stream"};
  std::string corpus;
  uint64_t state = 7;
  for (int line = 0; line < lines; ++line) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const int count = 3 + static_cast<int>((state >> 33) % 10);
    for (int i = 0; i < count; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      absl::StrAppend(&corpus, i > 0 ? " " : "", words[(state >> 33) % words.size()]);
    }
    corpus += "\n";
  }
  return corpus;
}

// Models trained once per test process by Debian's spm_train: BPE,
// unigram, and BPE without <s> and </s>.
struct Models {
  TempDir dir;
  std::string bpe, unigram, no_bos;
};

const Models& TrainedModels() {
  static const Models* models = [] {
    auto* m = new Models;
    WriteFile(m->dir.File("corpus.txt"), Corpus(400));
    const auto train = [&](const std::string& name, const std::string& flags) {
      const std::string command =
          absl::StrCat("spm_train --input=", m->dir.File("corpus.txt"), " --model_prefix=", m->dir.File(name),
                       " ", flags, " > ", m->dir.File(name + ".log"), " 2>&1");
      INFO(command);
      REQUIRE(std::system(command.c_str()) == 0);
      return m->dir.File(name + ".model");
    };
    m->bpe = train("bpe", "--vocab_size=80 --model_type=bpe");
    m->unigram = train("unigram", "--vocab_size=60 --model_type=unigram --hard_vocab_limit=false");
    m->no_bos = train("no_bos", "--vocab_size=80 --model_type=bpe --bos_id=-1 --eos_id=-1");
    return m;
  }();
  return *models;
}

// Runs a SentencePiece tool over the lines of `input` (a file): one output
// line per input line.
Lines RunTool(const std::string& command, const std::string& input) {
  const std::string output = input + ".out";
  const std::string line = absl::StrCat(command, " < ", input, " > ", output);
  INFO(line);
  REQUIRE(std::system(line.c_str()) == 0);
  std::ifstream in(output);
  Lines lines;
  for (std::string text; std::getline(in, text);) lines.push_back(text);
  return lines;
}

// What SentencePiece's own spm_encode makes of each line of `path`, as
// "id id id".
Lines Reference(const std::string& model, const std::string& path) {
  return RunTool(absl::StrCat("spm_encode --model=", model, " --output_format=id"), path);
}

std::string Joined(const std::vector<int>& ids) { return absl::StrJoin(ids, " "); }

std::vector<int> Ids(const Element& element, int component = 0) {
  const Tensor& t = element.components[component];
  REQUIRE(t.dtype() == DType::kInt32);
  return std::vector<int>(t.values<int32_t>().begin(), t.values<int32_t>().end());
}

// ---------------------------------------------------------------- json_lines

TEST_CASE("json_lines: one element per line, one named string per field", "[ops][text][json_lines]") {
  TempDir dir;
  WriteFile(dir.File("a.jsonl"),
            "{\"text\": \"hello world\", \"id\": 7, \"meta\": {\"tags\": [1, 2]}}\n"
            "{\"id\": 8, \"text\": \"caf\\u00e9 \\\"q\\\"\", \"meta\": null, \"extra\": true}\n");
  WriteFile(dir.File("b.jsonl"), "{\"text\": \"\", \"id\": -1.5, \"meta\": [\"x\"]}\n");
  const Lines expected = {"{\"text\": \"hello world\", \"id\": \"7\", \"meta\": \"{\\\"tags\\\":[1,2]}\"}",
                          "{\"text\": \"caf\u00e9 \\\"q\\\"\", \"id\": \"8\", \"meta\": \"null\"}",
                          "{\"text\": \"\", \"id\": \"-1.5\", \"meta\": \"[\\\"x\\\"]\"}"};
  CHECK(JsonOf(Dataset::JsonLines({dir.File("a.jsonl"), dir.File("b.jsonl")}, {"text", "id", "meta"})) ==
        expected);
  WriteFile(dir.File("p.yaml"),
            "pipeline:\n  - json_lines: {files: [a.jsonl, b.jsonl], fields: [text, id, meta]}\n");
  absl::StatusOr<Dataset> from_yaml = Dataset::FromYamlFile(dir.File("p.yaml"));
  REQUIRE(from_yaml.ok());
  CHECK(JsonOf(*from_yaml) == expected);
  const ElementSpec spec =
      MustBuild(Dataset::JsonLines({dir.File("a.jsonl")}, {"text", "id"}))->element_spec();
  CHECK(spec.names == std::vector<std::string>{"text", "id"});
  CHECK(spec.components.size() == 2);
  CHECK(spec.components[1].dtype == DType::kString);
}

TEST_CASE("json_lines: a malformed line is DataLoss naming the file and line, droppable by ignore_errors",
          "[ops][text][json_lines]") {
  TempDir dir;
  const std::string path = dir.File("bad.jsonl");
  WriteFile(path,
            "{\"text\": \"one\"}\n"
            "{\"text\": \"two\"\n"
            "[\"not\", \"an object\"]\n"
            "{\"other\": 3}\n"
            "{\"text\": \"five\"}\n");
  DatasetPtr built = MustBuild(Dataset::JsonLines({path}, {"text"}));
  std::unique_ptr<IteratorBase> it = testing::MustIterate(built);
  Element element;
  bool end = false;
  REQUIRE(it->GetNext(&element, &end).ok());
  CHECK(ElementToJson(element) == "{\"text\": \"one\"}");
  absl::Status status = it->GetNext(&element, &end);
  CHECK(absl::IsDataLoss(status));
  CHECK_THAT(std::string(status.message()), Contains("json_lines: '" + path + "' line 2: not valid JSON ("));
  status = it->GetNext(&element, &end);
  CHECK(status.message() == "json_lines: '" + path + "' line 3: not a JSON object");
  status = it->GetNext(&element, &end);
  CHECK(status.message() == "json_lines: '" + path + "' line 4: no field 'text'");
  REQUIRE(it->GetNext(&element, &end).ok());
  CHECK(ElementToJson(element) == "{\"text\": \"five\"}");
  REQUIRE(it->GetNext(&element, &end).ok());
  CHECK(end);
  CHECK(JsonOf(Dataset::JsonLines({path}, {"text"}).IgnoreErrors(/*quiet=*/true)) ==
        Lines{"{\"text\": \"one\"}", "{\"text\": \"five\"}"});
}

TEST_CASE("json_lines: its arguments are checked when the pipeline is built", "[ops][text][json_lines]") {
  CHECK(BuildError(Dataset::JsonLines({"x.jsonl"}, {})).message() ==
        "step 1 (json_lines): missing 'fields' (the JSON fields to read, one per component)");
  CHECK(BuildError(Dataset::JsonLines({"x.jsonl"}, {"a", "a"})).message() ==
        "step 1 (json_lines): field 'a' is named twice");
  CHECK(BuildError(Dataset::JsonLines({}, {"a"})).message() == "step 1 (json_lines): missing 'files'");
  CHECK(BuildError(Dataset::JsonLines({"x.jsonl"}, {"a"}, "LZ4")).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("json_lines: typed fields give numbers, bools and number arrays as tensors",
          "[ops][text][json_lines]") {
  TempDir dir;
  WriteFile(dir.File("t.jsonl"),
            "{\"id\": 3, \"text\": \"a b\", \"score\": 0.5, \"ids\": [1, 2, 3], \"ok\": true, \"big\": 1e3}\n"
            "{\"id\": -9000000000, \"text\": 7, \"score\": 2, \"ids\": [], \"ok\": false, \"big\": -2.25}\n");
  const std::vector<std::string> fields = {"id", "text", "score", "ids", "ok", "big"};
  const std::vector<std::string> types = {"int64", "string", "float32", "int32[]", "bool", "float64"};
  const Dataset typed = Dataset::JsonLines({dir.File("t.jsonl")}, fields, "", types);
  CHECK(MustBuild(typed)->element_spec().DebugString() ==
        "{id: TensorSpec(shape=[], dtype=int64), text: TensorSpec(shape=[], dtype=string), score: "
        "TensorSpec(shape=[], dtype=float32), ids: TensorSpec(shape=[?], dtype=int32), ok: "
        "TensorSpec(shape=[], dtype=bool), big: TensorSpec(shape=[], dtype=float64)}");
  const Lines expected = {
      "{\"id\": 3, \"text\": \"a b\", \"score\": 0.5, \"ids\": [1, 2, 3], \"ok\": true, \"big\": 1000}",
      "{\"id\": -9000000000, \"text\": \"7\", \"score\": 2, \"ids\": [], \"ok\": false, \"big\": -2.25}"};
  CHECK(JsonOf(typed) == expected);
  // The same from YAML: fields as a map of name to type, in its order.
  WriteFile(
      dir.File("p.yaml"),
      "pipeline:\n  - json_lines:\n      files: [t.jsonl]\n      fields: {id: int64, text: string, score: "
      "float32, ids: \"int32[]\", ok: bool, big: float64}\n");
  absl::StatusOr<Dataset> from_yaml = Dataset::FromYamlFile(dir.File("p.yaml"));
  REQUIRE(from_yaml.ok());
  CHECK(JsonOf(*from_yaml) == expected);
}

TEST_CASE("json_lines: a value of the wrong type is InvalidArgument naming the file, line and field",
          "[ops][text][json_lines]") {
  TempDir dir;
  const std::string path = dir.File("w.jsonl");
  WriteFile(path,
            "{\"id\": \"3\", \"ids\": [1]}\n"
            "{\"id\": 2.5, \"ids\": [1]}\n"
            "{\"id\": 3000000000, \"ids\": [1]}\n"
            "{\"id\": 1, \"ids\": [1, \"x\"]}\n"
            "{\"id\": 1, \"ids\": 4}\n"
            "{\"id\": 4, \"ids\": [5, 6]}\n");
  DatasetPtr built = MustBuild(Dataset::JsonLines({path}, {"id", "ids"}, "", {"int32", "int64[]"}));
  std::unique_ptr<IteratorBase> it = testing::MustIterate(built);
  const std::string at = "json_lines: '" + path + "' line ";
  for (const std::string& message :
       {at + "1: field 'id' is a string where int32 is declared",
        at + "2: field 'id' is a fraction where int32 is declared",
        at + "3: field 'id' is 3000000000, past int32's range where int32 is declared",
        at + "4: field 'ids' is an array whose item 1 is a string where int64[] is "
             "declared",
        at + "5: field 'ids' is an integer where int64[] is declared"}) {
    Element element;
    bool end = false;
    const absl::Status status = it->GetNext(&element, &end);
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message() == message);
  }
  Element element;
  bool end = false;
  REQUIRE(it->GetNext(&element, &end).ok());
  CHECK(ElementToJson(element) == "{\"id\": 4, \"ids\": [5, 6]}");
  // Types are checked when the pipeline is built.
  CHECK(
      BuildError(Dataset::JsonLines({path}, {"id"}, "", {"uint8"})).message() ==
      "step 1 (json_lines): field 'id' has type 'uint8'; the types are string, bool, int32, int64, float32, "
      "float64, or a numeric type with [] for an array");
  CHECK(BuildError(Dataset::JsonLines({path}, {"id", "ids"}, "", {"int32"})).message() ==
        "step 1 (json_lines): 1 field_types for 2 fields; give one type per field");
  CHECK(BuildError(Dataset::JsonLines({path}, {"id"}, "", {"string[]"})).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("json_lines: each file is a split", "[ops][text][json_lines]") {
  proto::Step source;
  source.mutable_json_lines()->add_files("a.jsonl");
  source.mutable_json_lines()->add_files("b.jsonl");
  source.mutable_json_lines()->add_fields("text");
  absl::StatusOr<SourceSplitInfo> info = DescribeSourceSplits(source);
  REQUIRE(info.ok());
  CHECK(info->num_positions == 2);
  CHECK(info->per_file);
}

// ---------------------------------------------------------------- tokenize

TEST_CASE("tokenize: ids are SentencePiece's own and decode back to the text",
          "[ops][text][tokenize][sentencepiece]") {
  const Models& models = TrainedModels();
  TempDir dir;
  const std::string corpus = Corpus(30);
  WriteFile(dir.File("t.txt"), corpus);
  for (const std::string& model : {models.bpe, models.unigram}) {
    INFO(model);
    absl::StatusOr<std::vector<Element>> elements =
        Dataset::TextLine({dir.File("t.txt")}).Tokenize(model).Collect();
    REQUIRE(elements.ok());
    Lines ours;
    for (const Element& element : *elements) ours.push_back(Joined(Ids(element)));
    const Lines reference = Reference(model, dir.File("t.txt"));
    REQUIRE(reference.size() == 30);
    CHECK(ours == reference);
    WriteFile(dir.File("ids.txt"), absl::StrJoin(ours, "\n") + "\n");
    const Lines decoded =
        RunTool(absl::StrCat("spm_decode --model=", model, " --input_format=id"), dir.File("ids.txt"));
    CHECK(absl::StrJoin(decoded, "\n") + "\n" == corpus);
  }
}

TEST_CASE("tokenize: on parallel threads, the same ids in the same order",
          "[ops][text][tokenize][sentencepiece]") {
  const Models& models = TrainedModels();
  TempDir dir;
  WriteFile(dir.File("t.txt"), Corpus(200));
  const Dataset lines = Dataset::TextLine({dir.File("t.txt")});
  const Lines sequential = JsonOf(lines.Tokenize(models.bpe));
  REQUIRE(sequential.size() == 200);
  CHECK(JsonOf(lines.Tokenize(models.bpe, 0, false, false, 3)) == sequential);
  CHECK(JsonOf(lines.Tokenize(models.bpe, 0, false, false, -1)) == sequential);
  CHECK(BuildError(lines.Tokenize(models.bpe, 0, false, false, -2)).message() ==
        "step 2 (tokenize): num_parallel_calls must be >= 1, or -1 for autotune, got -2");
}

TEST_CASE("tokenize: add_bos and add_eos frame the ids, on the named component",
          "[ops][text][tokenize][sentencepiece]") {
  const Models& models = TrainedModels();
  TempDir dir;
  WriteFile(dir.File("t.txt"), "token stream\n");
  const std::string plain = Reference(models.bpe, dir.File("t.txt")).at(0);
  REQUIRE(!plain.empty());
  const Dataset pairs =
      Dataset::FromTensors({Tensor::Scalar<int64_t>(4), Tensor::StringScalar("token stream")});
  absl::StatusOr<std::vector<Element>> framed = pairs.Tokenize(models.bpe, 1, true, true).Collect();
  REQUIRE(framed.ok());
  // spm_train's default ids of <s> and </s>.
  CHECK(Joined(Ids(framed->at(0), 1)) == "1 " + plain + " 2");
  CHECK(framed->at(0).components[0].values<int64_t>()[0] == 4);
  const ElementSpec spec = MustBuild(pairs.Tokenize(models.bpe, 1))->element_spec();
  CHECK(spec.components[1] == TensorSpec{PartialShape::Known({kUnknownDim}), DType::kInt32});
  CHECK(Joined(Ids(pairs.Tokenize(models.bpe, 1, false, true).Collect()->at(0), 1)) == plain + " 2");
}

TEST_CASE("tokenize: a bad model, component or sandboxed path is refused naming it",
          "[ops][text][tokenize][sentencepiece]") {
  const Models& models = TrainedModels();
  TempDir dir;
  const Dataset text = Dataset::FromTensors({Tensor::StringScalar("data")});
  CHECK(BuildError(text.Tokenize("")).message() ==
        "step 2 (tokenize): missing 'model' (a SentencePiece model file)");
  CHECK_THAT(std::string(BuildError(text.Tokenize(dir.File("none.model"))).message()),
             Contains(dir.File("none.model")));
  WriteFile(dir.File("fake.model"), "not a model");
  CHECK_THAT(std::string(BuildError(text.Tokenize(dir.File("fake.model"))).message()),
             Contains("step 2 (tokenize): '" + dir.File("fake.model") + "' is not a SentencePiece model"));
  CHECK_THAT(std::string(BuildError(text.Tokenize(models.bpe, 1)).message()),
             Contains("step 2 (tokenize): component 1 is out of range for elements of 1 components"));
  CHECK_THAT(std::string(BuildError(Dataset::Range(3).Tokenize(models.bpe)).message()),
             Contains("step 2 (tokenize): component 0 must be a string"));
  CHECK(BuildError(text.Tokenize(models.no_bos, 0, true)).message() ==
        "step 2 (tokenize): add_bos is set but model '" + models.no_bos +
            "' has no <s> piece (trained with its id -1)");
  CHECK(BuildError(text.Tokenize(models.no_bos, 0, false, true)).message() ==
        "step 2 (tokenize): add_eos is set but model '" + models.no_bos +
            "' has no </s> piece (trained with its id -1)");
  // A worker's model must be under its data roots, as any file it reads.
  std::filesystem::create_directories(dir.File("data"));
  absl::StatusOr<std::vector<std::string>> roots = CanonicalDataRoots({dir.File("data")});
  REQUIRE(roots.ok());
  SetPipelineSandbox({.enabled = true, .data_roots = *roots, .owner = "worker w:1"});
  const absl::Status sandboxed = BuildError(text.Tokenize(dir.File("fake.model")));
  SetPipelineSandbox({});
  CHECK(sandboxed.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(sandboxed.message()), Contains(dir.File("fake.model")));
}

// ---------------------------------------------------------------- pack_sequences

// A source of the given int32 vectors, one per element.
class VectorsDataset : public DatasetBase {
 public:
  explicit VectorsDataset(std::vector<std::vector<int32_t>> rows) : rows_(std::move(rows)) {
    spec_.components.push_back({PartialShape::Known({kUnknownDim}), DType::kInt32});
  }
  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override { return static_cast<int64_t>(rows_.size()); }
  std::string DebugName() const override { return "vectors"; }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext&) const override {
    return std::make_unique<Iterator>(this);
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const VectorsDataset* dataset) : dataset_(dataset) {}
    absl::Status GetNext(Element* element, bool* end) override {
      *end = next_ == static_cast<int64_t>(dataset_->rows_.size());
      if (!*end) *element = Element::Of(Tensor::FromVector(dataset_->rows_[next_++]));
      return absl::OkStatus();
    }
    absl::Status Save(proto::IteratorState* state) override {
      (*state->mutable_ints())["next"] = next_;
      return absl::OkStatus();
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      next_ = state.ints().at("next");
      return absl::OkStatus();
    }

   private:
    const VectorsDataset* dataset_;
    int64_t next_ = 0;
  };
  std::vector<std::vector<int32_t>> rows_;
  ElementSpec spec_;
};

DatasetPtr Packed(std::vector<std::vector<int32_t>> rows, int64_t length, const std::string& method,
                  int64_t num_bins, int64_t padding_value = -1) {
  proto::PackSequencesOp op;
  op.set_length(length);
  op.set_method(method);
  op.set_num_bins(num_bins);
  op.set_padding_value(padding_value);
  absl::StatusOr<DatasetPtr> packed =
      MakePackSequencesDataset(std::make_shared<VectorsDataset>(std::move(rows)), op);
  INFO(packed.status().ToString());
  REQUIRE(packed.ok());
  return *packed;
}

// Each row as "tokens | segment_ids | positions".
Lines Rows(const DatasetPtr& dataset) {
  absl::StatusOr<std::vector<std::string>> lines = testing::JsonLines(*dataset);
  REQUIRE(lines.ok());
  return *lines;
}

std::string Row(const std::string& tokens, const std::string& segments, const std::string& positions) {
  return absl::StrCat("{\"tokens\": [", tokens, "], \"segment_ids\": [", segments, "], \"positions\": [",
                      positions, "]}");
}

const std::vector<std::vector<int32_t>> kSequences = {
    {1, 2, 3, 4}, {5, 6, 7, 8, 9, 10, 11}, {12, 13, 14}, {15, 16, 17}, {18}};

TEST_CASE("pack_sequences: first_fit fills the oldest row with room", "[ops][text][pack_sequences]") {
  CHECK(Rows(Packed(kSequences, 10, "first_fit", 2)) ==
        Lines{Row("1, 2, 3, 4, 12, 13, 14, 15, 16, 17", "1, 1, 1, 1, 2, 2, 2, 3, 3, 3",
                  "0, 1, 2, 3, 0, 1, 2, 0, 1, 2"),
              Row("5, 6, 7, 8, 9, 10, 11, 18, -1, -1", "1, 1, 1, 1, 1, 1, 1, 2, 0, 0",
                  "0, 1, 2, 3, 4, 5, 6, 0, 0, 0")});
}

TEST_CASE("pack_sequences: best_fit fills the row it leaves least room in", "[ops][text][pack_sequences]") {
  CHECK(Rows(Packed(kSequences, 10, "best_fit", 2)) ==
        Lines{Row("1, 2, 3, 4, 15, 16, 17, 18, -1, -1", "1, 1, 1, 1, 2, 2, 2, 3, 0, 0",
                  "0, 1, 2, 3, 0, 1, 2, 0, 0, 0"),
              Row("5, 6, 7, 8, 9, 10, 11, 12, 13, 14", "1, 1, 1, 1, 1, 1, 1, 2, 2, 2",
                  "0, 1, 2, 3, 4, 5, 6, 0, 1, 2")});
}

TEST_CASE("pack_sequences: with every bin open the fullest row goes out", "[ops][text][pack_sequences]") {
  CHECK(Rows(Packed(kSequences, 10, "first_fit", 1, 0)) ==
        Lines{Row("1, 2, 3, 4, 0, 0, 0, 0, 0, 0", "1, 1, 1, 1, 0, 0, 0, 0, 0, 0",
                  "0, 1, 2, 3, 0, 0, 0, 0, 0, 0"),
              Row("5, 6, 7, 8, 9, 10, 11, 12, 13, 14", "1, 1, 1, 1, 1, 1, 1, 2, 2, 2",
                  "0, 1, 2, 3, 4, 5, 6, 0, 1, 2"),
              Row("15, 16, 17, 18, 0, 0, 0, 0, 0, 0", "1, 1, 1, 2, 0, 0, 0, 0, 0, 0",
                  "0, 1, 2, 0, 0, 0, 0, 0, 0, 0")});
}

TEST_CASE("pack_sequences: a sequence longer than a row is cut into pieces, none lost",
          "[ops][text][pack_sequences]") {
  CHECK(Rows(Packed({{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {11}}, 4, "first_fit", 8)) ==
        Lines{Row("1, 2, 3, 4", "1, 1, 1, 1", "0, 1, 2, 3"), Row("5, 6, 7, 8", "1, 1, 1, 1", "0, 1, 2, 3"),
              Row("9, 10, 11, -1", "1, 1, 2, 0", "0, 1, 0, 0")});
}

TEST_CASE("pack_sequences: its arguments and input are checked when the pipeline is built",
          "[ops][text][pack_sequences]") {
  CHECK(BuildError(Dataset::Range(3).PackSequences(0)).message() ==
        "step 2 (pack_sequences): length must be > 0, got 0");
  CHECK(BuildError(Dataset::Range(3).PackSequences(8, "next_fit")).message() ==
        "step 2 (pack_sequences): method must be first_fit or best_fit, got 'next_fit'");
  CHECK(BuildError(Dataset::Range(3).PackSequences(8, "first_fit", 0, 0, -2)).message() ==
        "step 2 (pack_sequences): num_bins must be between 1 and 4096 (0: 8), got -2");
  CHECK_THAT(std::string(BuildError(Dataset::Range(3).PackSequences(8)).message()),
             Equals("step 2 (pack_sequences): component 0 must be a vector of int32 or int64 token ids, got "
                    "TensorSpec(shape=[], dtype=int64)"));
  CHECK_THAT(std::string(BuildError(Dataset::Range(3).PackSequences(8, "first_fit", 2)).message()),
             Equals("step 2 (pack_sequences): component 2 is out of range for elements of 1 components "
                    "(TensorSpec(shape=[], dtype=int64))"));
}

TEST_CASE("pack_sequences: a restore at every position goes on with the same rows",
          "[ops][text][pack_sequences]") {
  std::vector<std::vector<int32_t>> rows;
  for (int32_t i = 0; i < 40; ++i) rows.push_back(std::vector<int32_t>(1 + (i * 7) % 13, i));
  for (const std::string method : {"first_fit", "best_fit"}) {
    INFO(method);
    const DatasetPtr packed = Packed(rows, 16, method, 3);
    const Lines expected = Rows(packed);
    for (size_t before = 0; before <= expected.size(); ++before) {
      INFO("saved after " << before);
      std::unique_ptr<IteratorBase> first = testing::MustIterate(packed);
      Lines seen;
      Element element;
      bool end = false;
      while (seen.size() < before) {
        REQUIRE(first->GetNext(&element, &end).ok());
        seen.push_back(ElementToJson(element));
      }
      proto::IteratorState state;
      REQUIRE(first->Save(&state).ok());
      std::unique_ptr<IteratorBase> restored = testing::MustIterate(packed);
      REQUIRE(restored->Restore(state).ok());
      while (true) {
        REQUIRE(restored->GetNext(&element, &end).ok());
        if (end) break;
        seen.push_back(ElementToJson(element));
      }
      CHECK(seen == expected);
    }
  }
}

// Rows of ids as "a b c|d e 0|...", padded with 0 to the longest.
std::string PaddedRows(const std::vector<std::vector<int>>& rows) {
  size_t longest = 0;
  for (const auto& row : rows) longest = std::max(longest, row.size());
  std::vector<std::string> texts;
  for (std::vector<int> row : rows) {
    row.resize(longest, 0);
    texts.push_back(Joined(row));
  }
  return absl::StrJoin(texts, "|");
}

std::string BatchRows(const Element& batch) {
  const Tensor& t = batch.components[0];
  REQUIRE(t.shape().size() == 2);
  const auto values = t.values<int32_t>();
  std::vector<std::string> texts;
  for (int64_t r = 0; r < t.shape()[0]; ++r) {
    texts.push_back(
        Joined(std::vector<int>(values.begin() + r * t.shape()[1], values.begin() + (r + 1) * t.shape()[1])));
  }
  return absl::StrJoin(texts, "|");
}

TEST_CASE("text ops: padded_batch and bucket_by_sequence_length batch the tokenized vectors",
          "[ops][text][bucket_by_sequence_length][sentencepiece]") {
  const Models& models = TrainedModels();
  TempDir dir;
  WriteFile(dir.File("t.txt"), Corpus(40));
  std::vector<std::vector<int>> ids;
  for (const std::string& line : Reference(models.bpe, dir.File("t.txt"))) {
    std::vector<int> row;
    for (absl::string_view id : absl::StrSplit(line, ' ')) row.push_back(std::stoi(std::string(id)));
    ids.push_back(row);
  }
  REQUIRE(ids.size() == 40);
  const Dataset tokens = Dataset::TextLine({dir.File("t.txt")}).Tokenize(models.bpe);
  // padded_batch(4): each batch padded to its longest.
  Lines expected_batches;
  for (size_t i = 0; i < ids.size(); i += 4) {
    expected_batches.push_back(PaddedRows({ids.begin() + i, ids.begin() + i + 4}));
  }
  absl::StatusOr<std::vector<Element>> batches = tokens.PaddedBatch(4).Collect();
  REQUIRE(batches.ok());
  Lines ours;
  for (const Element& batch : *batches) ours.push_back(BatchRows(batch));
  CHECK(ours == expected_batches);
  // bucket_by_sequence_length: buckets [0, 8), [8, 12), [12, inf) of 3
  // sequences each, given when full, the rest in bucket order at the end.
  const std::vector<int64_t> boundaries = {8, 12};
  std::vector<std::vector<int>> buckets[3];
  Lines expected_buckets;
  for (const auto& row : ids) {
    const size_t bucket =
        std::upper_bound(boundaries.begin(), boundaries.end(), static_cast<int64_t>(row.size())) -
        boundaries.begin();
    buckets[bucket].push_back(row);
    if (buckets[bucket].size() == 3) {
      expected_buckets.push_back(PaddedRows(buckets[bucket]));
      buckets[bucket].clear();
    }
  }
  for (const auto& rest : buckets) {
    if (!rest.empty()) expected_buckets.push_back(PaddedRows(rest));
  }
  const Dataset bucketed = tokens.BucketBySequenceLength(boundaries, {3, 3, 3});
  absl::StatusOr<std::vector<Element>> bucket_batches = bucketed.Collect();
  REQUIRE(bucket_batches.ok());
  ours.clear();
  for (const Element& batch : *bucket_batches) ours.push_back(BatchRows(batch));
  CHECK(ours == expected_buckets);
  CHECK(expected_buckets.size() > 10);
  testing::CheckResumesEverywhere(bucketed.Repeat(2));
}

TEST_CASE("text ops: json_lines, tokenize, pack_sequences and batch restore at every position",
          "[ops][text][checkpoint][sentencepiece]") {
  const Models& models = TrainedModels();
  TempDir dir;
  std::string halves[2];
  const std::string corpus = Corpus(60);
  size_t begin = 0;
  for (int i = 0; i < 60; ++i) {
    const size_t end = corpus.find('\n', begin);
    absl::StrAppend(&halves[i / 30], "{\"id\": ", i, ", \"text\": \"", corpus.substr(begin, end - begin),
                    "\"}\n");
    begin = end + 1;
  }
  WriteFile(dir.File("a.jsonl"), halves[0]);
  WriteFile(dir.File("b.jsonl"), halves[1]);
  const Dataset pipeline = Dataset::JsonLines({dir.File("a.jsonl"), dir.File("b.jsonl")}, {"text", "id"})
                               .Tokenize(models.bpe, 0, true, true, /*num_parallel_calls=*/2)
                               .PackSequences(32, "best_fit", 0, 0, 4)
                               .Batch(2);
  testing::CheckResumesEverywhere(pipeline);
  CHECK(testing::Uninterrupted(pipeline).size() > 5);
}

}  // namespace
}  // namespace sluice
