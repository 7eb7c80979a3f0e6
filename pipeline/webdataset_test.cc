// Tests of the webdataset source, on tar shards the tests write.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::TempDir;

// One ustar member: header (with its checksum) and data padded to 512.
std::string TarMember(const std::string& name, const std::string& data, char type = '0') {
  std::string header(512, '\0');
  name.copy(header.data(), std::min<size_t>(name.size(), 100));
  std::snprintf(header.data() + 100, 8, "%07o", 0644);
  std::snprintf(header.data() + 124, 12, "%011o", static_cast<unsigned>(data.size()));
  header[156] = type;
  std::string(
      "ustar\0"
      "00",
      8)
      .copy(header.data() + 257, 8);
  std::fill(header.begin() + 148, header.begin() + 156, ' ');
  unsigned sum = 0;
  for (unsigned char c : header) sum += c;
  std::snprintf(header.data() + 148, 8, "%06o", sum);
  std::string padded = data;
  padded.resize((data.size() + 511) / 512 * 512, '\0');
  return header + padded;
}

std::string EndOfArchive() { return std::string(1024, '\0'); }

TEST_CASE("webdataset groups a shard's members by key into named samples", "[webdataset]") {
  TempDir dir;
  testing::WriteFile(dir.File("a.tar"), TarMember("train/", "", '5') + TarMember("train/0001.jpg", "JPEG1") +
                                            TarMember("train/0001.cls", "3") +
                                            TarMember("train/0002.jpg", "JPEG2") +
                                            TarMember("train/0002.cls", "7") + EndOfArchive());
  // A GNU long name, and no end-of-archive blocks.
  const std::string long_key = "train/" + std::string(120, 'x');
  testing::WriteFile(dir.File("b.tar"), TarMember("././@LongLink", long_key + ".jpg", 'L') +
                                            TarMember("ignored-short-name", "JPEG3") +
                                            TarMember("././@LongLink", long_key + ".cls", 'L') +
                                            TarMember("ignored-too", "1"));
  CHECK(testing::Yaml(absl::StrCat("- webdataset: [", dir.File("a.tar"), ", ", dir.File("b.tar"), "]\n")) ==
        std::vector<std::string>{
            R"({"__key__": "train/0001", "cls": "3", "jpg": "JPEG1"})",
            R"({"__key__": "train/0002", "cls": "7", "jpg": "JPEG2"})",
            absl::StrCat(R"({"__key__": ")", long_key, R"(", "cls": "1", "jpg": "JPEG3"})"),
        });
  CHECK(testing::Yaml(absl::StrCat("- webdataset: {files: [", dir.File("a.tar"), "], keys: [cls]}\n")) ==
        std::vector<std::string>{R"({"__key__": "train/0001", "cls": "3"})",
                                 R"({"__key__": "train/0002", "cls": "7"})"});
}

TEST_CASE("webdataset errors name the shard, the sample and the offset", "[webdataset]") {
  TempDir dir;
  const std::string good = TarMember("k1.jpg", "J1") + TarMember("k1.cls", "1") + TarMember("k2.jpg", "J2");
  testing::WriteFile(dir.File("missing.tar"), good + EndOfArchive());
  absl::StatusOr<std::vector<std::string>> missing =
      testing::RunYaml(absl::StrCat("- webdataset: ", dir.File("missing.tar"), "\n"));
  CHECK(missing.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(missing.status().message()),
             Contains(absl::StrCat("webdataset: sample 'k2' of shard '", dir.File("missing.tar"),
                                   "' has no 'cls' member (it has jpg)")));

  testing::WriteFile(dir.File("truncated.tar"), good.substr(0, 512 * 5 + 100));
  absl::StatusOr<std::vector<std::string>> truncated = testing::RunYaml(
      absl::StrCat("- webdataset: {files: [", dir.File("truncated.tar"), "], keys: [jpg]}\n"));
  CHECK(truncated.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(truncated.status().message()),
             Contains(absl::StrCat("webdataset: shard '", dir.File("truncated.tar"),
                                   "' is truncated at offset 2660")));

  std::string corrupt = good;
  corrupt[512 * 2 + 10] ^= 0x55;  // inside the second header's name
  testing::WriteFile(dir.File("corrupt.tar"), corrupt);
  absl::StatusOr<std::vector<std::string>> bad =
      testing::RunYaml(absl::StrCat("- webdataset: {files: [", dir.File("corrupt.tar"), "], keys: [jpg]}\n"));
  CHECK(bad.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(
      std::string(bad.status().message()),
      Contains(absl::StrCat("webdataset: shard '", dir.File("corrupt.tar"),
                            "' is not a valid tar at offset 1024: a header's checksum does not match")));

  testing::WriteFile(dir.File("empty.tar"), EndOfArchive());
  CHECK_THAT(
      std::string(
          testing::RunYaml(absl::StrCat("- webdataset: ", dir.File("empty.tar"), "\n")).status().message()),
      Contains("has no members; name the extensions with 'keys'"));
}

}  // namespace
}  // namespace sluice
