// Tests of record files (pipeline/record_io.cc) and the file sources that
// read them (pipeline/file_ops.cc): TFRecord framing and its corruption
// checks, compression, text lines and fixed-length records.
#include "pipeline/record_io.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "common/crc32c.h"
#include "pipeline/ops.h"
#include "sluice/dataset.h"
#include "tests/testing/test_util.h"

namespace sluice {
namespace {

using Catch::Matchers::Contains;
using testing::WriteFile;

using Catch::Matchers::EndsWith;
using Catch::Matchers::Equals;
using Catch::Matchers::StartsWith;

using Records = std::vector<std::string>;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  REQUIRE(file.good());
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

void WriteGzip(const std::string& path, const std::string& contents) {
  gzFile gz = gzopen(path.c_str(), "wb");
  REQUIRE(gz != nullptr);
  REQUIRE(gzwrite(gz, contents.data(), static_cast<unsigned>(contents.size())) ==
          static_cast<int>(contents.size()));
  REQUIRE(gzclose(gz) == Z_OK);
}

void WriteZlib(const std::string& path, const std::string& contents) {
  uLongf size = compressBound(contents.size());
  std::string compressed(size, '\0');
  REQUIRE(compress2(reinterpret_cast<Bytef*>(compressed.data()), &size,
                    reinterpret_cast<const Bytef*>(contents.data()), contents.size(),
                    Z_BEST_COMPRESSION) == Z_OK);
  compressed.resize(size);
  WriteFile(path, compressed);
}

void WriteRecords(const std::string& path, const Records& records,
                  Compression compression = Compression::kNone) {
  absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer = TFRecordWriter::Create(path, compression);
  REQUIRE(writer.ok());
  for (const std::string& record : records) REQUIRE((*writer)->Write(record).ok());
  REQUIRE((*writer)->Close().ok());
}

void AppendFixed(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The TFRecord framing, written out by hand from the format's definition.
std::string Frame(const Records& records) {
  std::string out;
  for (const std::string& record : records) {
    std::string length;
    AppendFixed(record.size(), 8, &length);
    out += length;
    AppendFixed(crc32c::Mask(crc32c::Value(length)), 4, &out);
    out += record;
    AppendFixed(crc32c::Mask(crc32c::Value(record)), 4, &out);
  }
  return out;
}

// What reading a dataset gave: the records before the end or the error.
struct Drained {
  Records records;
  absl::Status status;
};

Drained Drain(const DatasetBase& dataset) {
  Drained result;
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = dataset.MakeIterator(IteratorContext{});
  REQUIRE(iterator.ok());
  while (true) {
    Element element;
    bool end = false;
    result.status = (*iterator)->GetNext(&element, &end);
    if (!result.status.ok() || end) break;
    REQUIRE(element.size() == 1);
    REQUIRE(element.components[0].dtype() == DType::kString);
    result.records.push_back(element.components[0].data<std::string>()[0]);
  }
  return result;
}

Drained Drain(const Dataset& dataset) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  REQUIRE(built.ok());
  return Drain(**built);
}

Drained ReadTFRecords(const std::string& path, const std::string& compression = "") {
  return Drain(Dataset::TFRecord({path}, compression));
}

Drained ReadLines(const std::string& path, const std::string& compression = "") {
  return Drain(Dataset::TextLine({path}, compression));
}

const Records kRecords = {"first", "", "the third record", std::string("\0\x01\xff\n", 4)};

// ---------------------------------------------------------------------------
// CRC-32C.

TEST_CASE("records: CRC-32C known vectors", "[records]") {
  CHECK(crc32c::Value("123456789") == 0xE3069283u);
  CHECK(crc32c::Value("") == 0u);
  // RFC 3720 B.4: 32 bytes of zeros, and of 0xff.
  CHECK(crc32c::Value(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c::Value(std::string(32, '\xff')) == 0x62A8AB43u);
  // Extending piecewise gives the same as at once.
  CHECK(crc32c::Extend(crc32c::Value("1234"), "56789", 5) == 0xE3069283u);
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu}) {
    CHECK(crc32c::Unmask(crc32c::Mask(crc)) == crc);
  }
  CHECK(crc32c::Mask(0) == 0xa282ead8u);
}

// ---------------------------------------------------------------------------
// TFRecord.

TEST_CASE("records: TFRecord round trip, uncompressed", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("data.tfrecord");
  WriteRecords(path, kRecords);
  // Byte for byte the TFRecord format.
  CHECK(ReadFile(path) == Frame(kRecords));
  CHECK(ReadFile(path).size() == 16 * 4 + 5 + 0 + 16 + 4);

  const Drained read = ReadTFRecords(path);
  CHECK(read.status.ok());
  CHECK(read.records == kRecords);

  // The reader on its own.
  absl::StatusOr<std::unique_ptr<InputStream>> stream = InputStream::Open(path, Compression::kNone);
  REQUIRE(stream.ok());
  TFRecordReader reader(*std::move(stream));
  Records records;
  std::string record;
  while (true) {
    absl::StatusOr<bool> got = reader.ReadRecord(&record);
    REQUIRE(got.ok());
    if (!*got) break;
    records.push_back(record);
  }
  CHECK(records == kRecords);

  // And from YAML, several files in order.
  const std::string second = dir.File("more.tfrecord");
  WriteRecords(second, {"x", "y"});
  absl::StatusOr<std::vector<std::string>> lines =
      testing::RunYaml(absl::StrCat("pipeline:\n  - tfrecord: [", path, ", ", second, "]\n  - take: 2\n"));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"\"first\"", "\"\""});
  const Drained both = Drain(Dataset::TFRecord({second, path}));
  CHECK(both.status.ok());
  CHECK(both.records == Records{"x", "y", "first", "", "the third record", kRecords[3]});
}

TEST_CASE("records: an empty TFRecord file has no records", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("empty.tfrecord");
  WriteRecords(path, {});
  CHECK(ReadFile(path).empty());
  const Drained read = ReadTFRecords(path);
  CHECK(read.status.ok());
  CHECK(read.records.empty());
}

TEST_CASE("records: TFRecord round trip, GZIP", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("data.tfrecord.gz");
  WriteRecords(path, kRecords, Compression::kGzip);
  const std::string bytes = ReadFile(path);
  REQUIRE(bytes.size() >= 2);
  CHECK(static_cast<unsigned char>(bytes[0]) == 0x1f);
  CHECK(static_cast<unsigned char>(bytes[1]) == 0x8b);

  const Drained read = ReadTFRecords(path, "GZIP");
  CHECK(read.status.ok());
  CHECK(read.records == kRecords);

  absl::StatusOr<std::vector<std::string>> lines = testing::RunYaml(
      absl::StrCat("pipeline:\n  - tfrecord: {files: [", path, "], compression_type: GZIP}\n  - take: 3\n"));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"\"first\"", "\"\"", "\"the third record\""});

  // Read as uncompressed, the gzip header is no record header.
  const Drained raw = ReadTFRecords(path);
  CHECK(raw.records.empty());
  CHECK(raw.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(raw.status.message()),
             Equals("corrupt TFRecord in '" + path + "' at offset 0: length checksum mismatch"));
}

TEST_CASE("records: TFRecord with ZLIB compression", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("data.tfrecord.z");
  WriteZlib(path, Frame(kRecords));
  const Drained read = ReadTFRecords(path, "ZLIB");
  CHECK(read.status.ok());
  CHECK(read.records == kRecords);

  // Many records, so that decompression takes several buffers.
  Records many;
  for (int i = 0; i < 5000; ++i) many.push_back(absl::StrCat("record number ", i, std::string(i % 97, 'x')));
  const std::string big = dir.File("big.tfrecord.z");
  WriteZlib(big, Frame(many));
  const Drained all = ReadTFRecords(big, "ZLIB");
  CHECK(all.status.ok());
  CHECK(all.records == many);

  absl::StatusOr<std::unique_ptr<TFRecordWriter>> writer =
      TFRecordWriter::Create(dir.File("out.tfrecord.z"), Compression::kZlib);
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.status().code() == absl::StatusCode::kUnimplemented);
  CHECK_THAT(std::string(writer.status().message()),
             Equals("TFRecordWriter writes uncompressed or GZIP files only"));
}

TEST_CASE("records: a flipped data byte is a data checksum mismatch at the record's offset", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("corrupt.tfrecord");
  const Records records = {"alpha", "bravo!", "charlie"};
  WriteRecords(path, records);
  std::string bytes = ReadFile(path);
  const size_t second = 12 + records[0].size() + 4;  // 21
  REQUIRE(bytes.substr(second + 12, 6) == "bravo!");
  bytes[second + 12 + 2] ^= 0x01;
  WriteFile(path, bytes);

  const Drained read = ReadTFRecords(path);
  CHECK(read.records == Records{"alpha"});
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()),
             Equals("corrupt TFRecord in '" + path + "' at offset 21: data checksum mismatch"));

  // A flipped byte of the data checksum itself reads the same way.
  bytes = ReadFile(path);
  bytes[second + 12 + 2] ^= 0x01;  // restore
  bytes[second + 12 + 6 + 3] ^= 0x80;
  WriteFile(path, bytes);
  const Drained footer = ReadTFRecords(path);
  CHECK(footer.records == Records{"alpha"});
  CHECK(footer.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(footer.status.message()),
             Equals("corrupt TFRecord in '" + path + "' at offset 21: data checksum mismatch"));

  // The third record of a GZIP file: offsets are in the uncompressed stream.
  const std::string gz = dir.File("corrupt.tfrecord.gz");
  std::string framed = Frame(records);
  const size_t third = second + 12 + records[1].size() + 4;  // 43
  framed[third + 12] ^= 0x20;
  WriteGzip(gz, framed);
  const Drained compressed = ReadTFRecords(gz, "GZIP");
  CHECK(compressed.records == Records{"alpha", "bravo!"});
  CHECK(compressed.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(compressed.status.message()),
             Equals("corrupt TFRecord in '" + gz + "' at offset 43: data checksum mismatch"));
}

TEST_CASE("records: a corrupt length or length checksum", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("corrupt.tfrecord");
  const Records records = {"alpha", "bravo"};
  std::string bytes = Frame(records);
  bytes[8] ^= 0x04;  // the first record's length checksum
  WriteFile(path, bytes);
  Drained read = ReadTFRecords(path);
  CHECK(read.records.empty());
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()),
             Equals("corrupt TFRecord in '" + path + "' at offset 0: length checksum mismatch"));

  // The second record's length: the checksum catches it before the reader
  // trusts a huge length.
  bytes = Frame(records);
  bytes[21 + 7] = '\x7f';
  WriteFile(path, bytes);
  read = ReadTFRecords(path);
  CHECK(read.records == Records{"alpha"});
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()),
             Equals("corrupt TFRecord in '" + path + "' at offset 21: length checksum mismatch"));
}

TEST_CASE("records: a truncated TFRecord file", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("truncated.tfrecord");
  const Records records = {"alpha", "bravo"};
  const std::string bytes = Frame(records);
  REQUIRE(bytes.size() == 42);

  struct Case {
    size_t keep;
    const char* what;
  };
  for (const Case& c :
       {Case{21 + 5, "truncated record header"}, Case{21 + 12 + 3, "truncated record data"},
        Case{21 + 12 + 5, "truncated record checksum"}, Case{21 + 12 + 5 + 3, "truncated record checksum"}}) {
    INFO(c.keep);
    WriteFile(path, bytes.substr(0, c.keep));
    const Drained read = ReadTFRecords(path);
    CHECK(read.records == Records{"alpha"});
    CHECK(read.status.code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(read.status.message()),
               Equals(absl::StrCat("corrupt TFRecord in '", path, "' at offset 21: ", c.what)));
  }

  // A GZIP stream cut short.
  const std::string gz = dir.File("truncated.tfrecord.gz");
  WriteRecords(gz, records, Compression::kGzip);
  const std::string compressed = ReadFile(gz);
  WriteFile(gz, compressed.substr(0, 10));  // the gzip header alone
  const Drained cut = ReadTFRecords(gz, "GZIP");
  CHECK(cut.records.empty());
  CHECK(cut.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(cut.status.message()),
             Equals("'" + gz + "': compressed stream ends early at offset 0"));
}

// ---------------------------------------------------------------------------
// text_line.

TEST_CASE("records: text_line with and without a trailing newline", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("lines.txt");
  WriteFile(path, "alpha\nbravo\ncharlie\n");
  Drained read = ReadLines(path);
  CHECK(read.status.ok());
  CHECK(read.records == Records{"alpha", "bravo", "charlie"});

  WriteFile(path, "alpha\nbravo\ncharlie");
  read = ReadLines(path);
  CHECK(read.status.ok());
  CHECK(read.records == Records{"alpha", "bravo", "charlie"});

  // Empty lines are elements; only the final newline ends nothing.
  WriteFile(path, "\nalpha\n\n");
  read = ReadLines(path);
  CHECK(read.status.ok());
  CHECK(read.records == Records{"", "alpha", ""});

  absl::StatusOr<std::vector<std::string>> lines =
      testing::RunYaml(absl::StrCat("pipeline:\n  - text_line: ", path, "\n"));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"\"\"", "\"alpha\"", "\"\""});
}

TEST_CASE("records: a line past the limit fails naming the file, the line and the limit",
          "[records][hardening]") {
  testing::TempDir dir;
  const std::string path = dir.File("lines.txt");
  WriteFile(path, "ab\ncdefgh\nij\n");
  absl::StatusOr<std::unique_ptr<InputStream>> stream = InputStream::Open(path, Compression::kNone);
  REQUIRE(stream.ok());
  std::string line;
  absl::StatusOr<bool> got = (*stream)->ReadLine(&line, 4);
  REQUIRE(got.ok());
  CHECK(line == "ab");
  got = (*stream)->ReadLine(&line, 4);
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(got.status().message() ==
        "'" + path +
            "': line 2 is longer than 4 bytes, the longest line text_line reads (is it a text file? records "
            "this long belong in tfrecord files)");
  // A file of zeros has no newline: the read stops at 64 MiB, not at the
  // end of memory (sparse, so it takes no disk).
  const std::string zeros_path = dir.File("zeros.bin");
  WriteFile(zeros_path, "");
  std::filesystem::resize_file(zeros_path, kMaxLineBytes + 1024);
  const Drained zeros = ReadLines(zeros_path);
  CHECK(zeros.records.empty());
  CHECK(zeros.status.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(zeros.status.message()),
             Contains("'" + zeros_path +
                      "': line 1 is longer than 67108864 bytes, the longest line text_line reads"));
  // /dev/zero, endless, is not read at all: not a regular file.
  const Drained device = ReadLines("/dev/zero");
  CHECK(device.status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(device.status.message() == "'/dev/zero' is a character device: file sources read only regular files");
}

TEST_CASE("records: text_line strips CRLF", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("crlf.txt");
  WriteFile(path, "alpha\r\nbravo\r\n\r\nlast\r");
  const Drained read = ReadLines(path);
  CHECK(read.status.ok());
  CHECK(read.records == Records{"alpha", "bravo", "", "last"});
}

TEST_CASE("records: text_line of an empty file", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("empty.txt");
  WriteFile(path, "");
  const Drained read = ReadLines(path);
  CHECK(read.status.ok());
  CHECK(read.records.empty());
  // And of several files, one of them empty.
  const std::string other = dir.File("other.txt");
  WriteFile(other, "x\ny");
  const Drained both = Drain(Dataset::TextLine({path, other, path, other}));
  CHECK(both.status.ok());
  CHECK(both.records == Records{"x", "y", "x", "y"});
}

TEST_CASE("records: text_line with GZIP and ZLIB", "[records]") {
  testing::TempDir dir;
  const std::string gz = dir.File("lines.txt.gz");
  WriteGzip(gz, "alpha\nbravo\r\ncharlie");
  Drained read = ReadLines(gz, "GZIP");
  CHECK(read.status.ok());
  CHECK(read.records == Records{"alpha", "bravo", "charlie"});

  absl::StatusOr<std::vector<std::string>> lines =
      testing::RunYaml(absl::StrCat("pipeline:\n  - text_line: {files: ", gz, ", compression_type: GZIP}\n"));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"\"alpha\"", "\"bravo\"", "\"charlie\""});

  const std::string z = dir.File("lines.txt.z");
  WriteZlib(z, "one\ntwo\n");
  read = ReadLines(z, "ZLIB");
  CHECK(read.status.ok());
  CHECK(read.records == Records{"one", "two"});
}

TEST_CASE("records: InputStream offsets count uncompressed bytes", "[records]") {
  testing::TempDir dir;
  const std::string gz = dir.File("stream.gz");
  WriteGzip(gz, "ab\r\ncdef\nlast");
  absl::StatusOr<std::unique_ptr<InputStream>> stream = InputStream::Open(gz, Compression::kGzip);
  REQUIRE(stream.ok());
  std::string line;
  REQUIRE(*(*stream)->ReadLine(&line));
  CHECK(line == "ab");
  CHECK((*stream)->offset() == 4);
  std::string bytes;
  REQUIRE((*stream)->Read(3, &bytes).ok());
  CHECK(bytes == "cde");
  CHECK((*stream)->offset() == 7);
  REQUIRE(*(*stream)->ReadLine(&line));
  CHECK(line == "f");
  REQUIRE(*(*stream)->ReadLine(&line));
  CHECK(line == "last");
  CHECK((*stream)->offset() == 13);
  CHECK_FALSE(*(*stream)->ReadLine(&line));
  REQUIRE((*stream)->Read(10, &bytes).ok());
  CHECK(bytes.empty());
  CHECK((*stream)->path() == gz);
}

// ---------------------------------------------------------------------------
// fixed_length_record.

TEST_CASE("records: fixed_length_record with header and footer bytes", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("fixed.bin");
  WriteFile(path, "HDRaaaabbbbccccFT");
  Drained read = Drain(Dataset::FixedLengthRecord({path}, 4, 3, 2));
  CHECK(read.status.ok());
  CHECK(read.records == Records{"aaaa", "bbbb", "cccc"});

  // Without header and footer the same bytes are other records.
  WriteFile(path, "aaaabbbb");
  read = Drain(Dataset::FixedLengthRecord({path}, 4));
  CHECK(read.status.ok());
  CHECK(read.records == Records{"aaaa", "bbbb"});

  // A file of just header and footer has no records.
  WriteFile(path, "HDRFT");
  read = Drain(Dataset::FixedLengthRecord({path}, 4, 3, 2));
  CHECK(read.status.ok());
  CHECK(read.records.empty());

  // From YAML, with GZIP.
  const std::string gz = dir.File("fixed.bin.gz");
  WriteGzip(gz, "HDRaaaabbbbFT");
  absl::StatusOr<std::vector<std::string>> lines = testing::RunYaml(
      absl::StrCat("pipeline:\n  - fixed_length_record: {files: [", gz,
                   "], record_bytes: 4, header_bytes: 3, footer_bytes: 2, compression_type: GZIP}\n"));
  REQUIRE(lines.ok());
  CHECK(*lines == std::vector<std::string>{"\"aaaa\"", "\"bbbb\""});
}

TEST_CASE("records: fixed_length_record: a trailing partial record is data loss", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("partial.bin");
  // Header (3), two records (8), one stray byte, footer (2).
  WriteFile(path, "HDRaaaabbbbXFT");
  Drained read = Drain(Dataset::FixedLengthRecord({path}, 4, 3, 2));
  CHECK(read.records == Records{"aaaa", "bbbb"});
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()),
             Equals("'" + path + "': 1 trailing bytes do not make a whole 4-byte record (offset 11)"));

  WriteFile(path, "aaaabb");
  read = Drain(Dataset::FixedLengthRecord({path}, 4));
  CHECK(read.records == Records{"aaaa"});
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()),
             Equals("'" + path + "': 2 trailing bytes do not make a whole 4-byte record (offset 4)"));

  // Shorter than the header.
  WriteFile(path, "HD");
  read = Drain(Dataset::FixedLengthRecord({path}, 4, 3, 0));
  CHECK(read.records.empty());
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()), Equals("'" + path + "' is shorter than its 3-byte header"));
}

TEST_CASE("records: fixed_length_record argument errors", "[records]") {
  FileSourceConfig config;
  config.format = RecordFormat::kFixedLength;
  config.files = {"unused.bin"};
  absl::StatusOr<DatasetPtr> dataset = MakeFileSourceDataset(config);
  REQUIRE_FALSE(dataset.ok());
  CHECK(dataset.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(dataset.status().message()),
             Equals("fixed_length_record: record_bytes must be > 0"));

  config.record_bytes = 4;
  config.footer_bytes = -1;
  dataset = MakeFileSourceDataset(config);
  REQUIRE_FALSE(dataset.ok());
  CHECK_THAT(std::string(dataset.status().message()),
             Equals("fixed_length_record: header_bytes and footer_bytes must be >= 0"));

  // Sizes past 1 GiB (2^62 + 2^62 overflowed record plus footer).
  config.footer_bytes = int64_t{1} << 62;
  dataset = MakeFileSourceDataset(config);
  REQUIRE_FALSE(dataset.ok());
  CHECK(dataset.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(
      std::string(dataset.status().message()),
      Equals(
          "fixed_length_record: footer_bytes must be at most 1073741824 (1 GiB), got 4611686018427387904"));
  config.footer_bytes = 0;
  config.record_bytes = int64_t{1} << 40;
  dataset = MakeFileSourceDataset(config);
  REQUIRE_FALSE(dataset.ok());
  CHECK_THAT(
      std::string(dataset.status().message()),
      Equals("fixed_length_record: record_bytes must be at most 1073741824 (1 GiB), got 1099511627776"));
  config.record_bytes = 4;

  config.files.clear();
  config.footer_bytes = 0;
  dataset = MakeFileSourceDataset(config);
  REQUIRE_FALSE(dataset.ok());
  CHECK_THAT(std::string(dataset.status().message()), Equals("fixed_length_record: missing 'files'"));
}

// Fewer bytes left than the footer ("HDRF", header 3, footer 2: one byte
// where two are due) once printed a wrapped size_t count.
TEST_CASE("records: a file too short for its footer is reported sanely", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("short.bin");
  WriteFile(path, "HDRF");
  const Drained read = Drain(Dataset::FixedLengthRecord({path}, 4, 3, 2));
  CHECK(read.records.empty());
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(
      std::string(read.status.message()),
      Equals("'" + path + "': 1 bytes after the last record are fewer than the 2-byte footer (offset 3)"));
}

TEST_CASE("records: data that is not compressed as declared", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("plain.txt");
  WriteFile(path, "plain text, not gzip\n");
  Drained read = ReadLines(path, "GZIP");
  CHECK(read.records.empty());
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()),
             Equals("'" + path + "': corrupt compressed data near offset 0: incorrect header check"));
  read = ReadLines(path, "ZLIB");
  CHECK(read.records.empty());
  CHECK(read.status.code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(read.status.message()),
             Equals("'" + path + "': corrupt compressed data near offset 0: incorrect header check"));
}

// ---------------------------------------------------------------------------
// Missing files and unknown compression.

TEST_CASE("records: a missing file is NotFound naming the path", "[records]") {
  testing::TempDir dir;
  const std::string path = dir.File("nope.tfrecord");
  for (const Drained& read : {ReadTFRecords(path), ReadLines(path),
                              Drain(Dataset::FixedLengthRecord({path}, 4)), ReadTFRecords(path, "GZIP")}) {
    CHECK(read.records.empty());
    CHECK(read.status.code() == absl::StatusCode::kNotFound);
    CHECK_THAT(std::string(read.status.message()),
               Equals("cannot open '" + path + "': No such file or directory"));
  }
  // After the files before it.
  const std::string good = dir.File("good.txt");
  WriteFile(good, "line\n");
  const Drained read = Drain(Dataset::TextLine({good, path}));
  CHECK(read.records == Records{"line"});
  CHECK(read.status.code() == absl::StatusCode::kNotFound);

  absl::StatusOr<std::unique_ptr<InputStream>> stream = InputStream::Open(path, Compression::kNone);
  REQUIRE_FALSE(stream.ok());
  CHECK(stream.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(stream.status().message()), StartsWith("cannot open '" + path + "'"));
}

TEST_CASE("records: an unknown compression_type is an error", "[records]") {
  absl::StatusOr<Compression> compression = ParseCompression("LZ4");
  REQUIRE_FALSE(compression.ok());
  CHECK(compression.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(compression.status().message()),
             Equals("unknown compression_type 'LZ4' (valid: \"\", GZIP, ZLIB)"));
  CHECK(*ParseCompression("") == Compression::kNone);
  CHECK(*ParseCompression("NONE") == Compression::kNone);
  CHECK(*ParseCompression("GZIP") == Compression::kGzip);
  CHECK(*ParseCompression("ZLIB") == Compression::kZlib);
  CHECK_FALSE(ParseCompression("gzip").ok());

  FileSourceConfig config;
  config.format = RecordFormat::kTFRecord;
  config.files = {"unused.tfrecord"};
  config.compression_type = "LZ4";
  absl::StatusOr<DatasetPtr> dataset = MakeFileSourceDataset(config);
  REQUIRE_FALSE(dataset.ok());
  CHECK(dataset.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(dataset.status().message()),
             Equals("tfrecord: unknown compression_type 'LZ4' (valid: \"\", GZIP, ZLIB)"));

  // From YAML, at load time with the step's position.
  absl::StatusOr<LoadedPipeline> loaded =
      ParsePipelineYaml("pipeline:\n  - text_line: {files: [a.txt], compression_type: BZIP2}\n", "test.yaml");
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(loaded.status().message()), StartsWith("test.yaml:2:5: step 1 (text_line): "));
  CHECK_THAT(std::string(loaded.status().message()),
             EndsWith("unknown compression_type 'BZIP2' (valid: \"\", GZIP, ZLIB)"));
}

}  // namespace
}  // namespace sluice
