// Tests of LoadYamlDocument (pipeline/yaml_document.cc): aliases that loop,
// multiply or nest past the parser's limit are refused with their place;
// aliases that do none of these load as yaml-cpp loads them.
#include "pipeline/yaml_document.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "pipeline/yaml_loader.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

std::string LoadError(const std::string& text, const std::string& hint = "") {
  absl::StatusOr<YAML::Node> root = LoadYamlDocument(text, "t.yaml", hint);
  REQUIRE_FALSE(root.ok());
  CHECK(root.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(root.status().message());
}

TEST_CASE("yaml document: an alias inside the sequence it names is refused, the fuzzer's input",
          "[yaml][hardening]") {
  // What the yaml_loader fuzzer found: yaml-cpp built a sequence that holds
  // itself, and the repeated-key walk recursed until the stack ran out.
  CHECK(LoadError("defaults: &d\n  - shuffle: *d\n  - take: -1\n") ==
        "t.yaml:2:14: the alias *d is inside the node '&d' names (t.yaml:1:11), so that node would hold "
        "itself: "
        "a YAML alias may not loop");
  const std::string fuzzed =
      "defaults: &d\n  - shuffle: *d\n  - map: {fn: cast, dt\xff\xff\xff\xff\xff\xff\xff"
      "0at32}\n  - take: -1\n";
  absl::StatusOr<LoadedPipeline> pipeline = ParsePipelineYaml(fuzzed, "fuzz.yaml", "/nonexistent");
  REQUIRE_FALSE(pipeline.ok());
  CHECK(
      pipeline.status().message() ==
      "fuzz.yaml:2:14: the alias *d is inside the node '&d' names (fuzz.yaml:1:11), so that node would hold "
      "itself: a YAML alias may not loop");
}

TEST_CASE("yaml document: an alias inside the map it names is refused, however deep", "[yaml][hardening]") {
  CHECK(
      LoadError("a: &m {b: {c: [1, *m]}}\n") ==
      "t.yaml:1:19: the alias *m is inside the node '&m' names (t.yaml:1:4), so that node would hold itself: "
      "a YAML alias may not loop");
  // As a key, too.
  CHECK(
      LoadError("a: &k {*k : 1}\n") ==
      "t.yaml:1:8: the alias *k is inside the node '&k' names (t.yaml:1:4), so that node would hold itself: "
      "a YAML alias may not loop");
}

TEST_CASE("yaml document: aliases that multiply past the limit are refused before any walk",
          "[yaml][hardening]") {
  // Each anchor lists the one before it twice: 2^40 nodes expanded, from
  // 40 short lines.
  std::string text = "l0: &a0 [x, x]\n";
  for (int i = 1; i <= 40; ++i) text += absl::StrCat("l", i, ": &a", i, " [*a", i - 1, ", *a", i - 1, "]\n");
  // &ai holds 2^(i+2) - 1 nodes. Before line 15 the aliases repeated
  // 2 * (3 + 7 + ... + 2^14 - 1) = 65,502 nodes; the first *a13 there
  // (32,767) brings it to 98,269, the second past 100,000.
  CHECK(LoadError(text) ==
        "t.yaml:15:18: the aliases of this document repeat more than 100000 nodes (the alias *a13 alone "
        "repeats 32767): write the repeated part out, or repeat less");
}

TEST_CASE("yaml document: aliases may not nest past the parser's limit", "[yaml][hardening]") {
  // Each anchor holds 100 levels and the previous anchor inside them.
  std::string text;
  for (int i = 0; i < 6; ++i) {
    std::string inner = i == 0 ? "x" : absl::StrCat("*n", i - 1);
    for (int level = 0; level < 100; ++level) inner = "[" + inner + "]";
    text += absl::StrCat("n", i, ": &n", i, " ", inner, "\n");
  }
  // &n3 nests 4 * 100 + 1 = 401 levels; under n4's 100 and the document
  // map that is 502, at the alias on the 5th line, column 8 + 100 + 1.
  const std::string message = LoadError(text, "nest fewer pipelines");
  CHECK(message ==
        "t.yaml:5:109: through its aliases the YAML nests 502 levels deep, past its parser's limit of 500: "
        "nest fewer pipelines");
}

TEST_CASE("yaml document: aliases that neither loop nor multiply load as written", "[yaml]") {
  absl::StatusOr<YAML::Node> root =
      LoadYamlDocument("defaults: &d {buffer_size: 4, seed: 1}\nfirst: *d\nsecond: {inner: *d}\n", "t.yaml");
  REQUIRE(root.ok());
  CHECK((*root)["first"]["buffer_size"].as<int>() == 4);
  CHECK((*root)["second"]["inner"]["seed"].as<int>() == 1);
  // An anchor named again later: the alias takes the latest.
  root = LoadYamlDocument("a: &x 1\nb: &x 2\nc: *x\n", "t.yaml");
  REQUIRE(root.ok());
  CHECK((*root)["c"].as<int>() == 2);
  // A pipeline that uses one, end to end.
  absl::StatusOr<std::vector<std::string>> lines = testing::RunYaml(
      "pipeline:\n  - range: 10\n  - shuffle: &d {buffer_size: 4, seed: 1}\n  - shuffle: *d\n  - take: 3\n");
  REQUIRE(lines.ok());
  CHECK(lines->size() == 3);
}

TEST_CASE("yaml document: the other refusals keep their messages", "[yaml]") {
  CHECK(LoadError("a: 1\nb: [1, 2\n") == "t.yaml:3:1: invalid YAML: end of sequence flow not found");
  CHECK(LoadError("a: *nowhere\n") == "t.yaml:1:4: invalid YAML: the referenced anchor is not defined");
  CHECK(LoadError("a: 1\nb: 2\na: 3\n") ==
        "t.yaml:3:1: 'a' is set twice (first at line 1); a key may appear once");
  absl::StatusOr<YAML::Node> empty = LoadYamlDocument("", "t.yaml");
  REQUIRE(empty.ok());
  CHECK(empty->IsNull());
}

}  // namespace
}  // namespace sluice
