// The webdataset source: POSIX tar shards in the WebDataset convention.
// Consecutive members with the same key (the path up to the first dot of
// the basename) are one sample: a named element {__key__, EXT: bytes, ...}.
// Each shard is read as a stream, one header and member at a time, and is
// one split. A truncated or corrupt shard is DataLoss naming the shard and
// the offset.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/record_io.h"
#include "pipeline/split_provider.h"

namespace sluice {
namespace {

constexpr size_t kBlock = 512;
// A member bigger than this is not a training sample's part; refusing it
// keeps a stray disk image in a shard from taking the worker's memory.
constexpr uint64_t kMaxMemberBytes = uint64_t{1} << 30;

struct Member {
  std::string name;
  std::string data;
};

// Reads the members of one tar stream in order, skipping directories and
// metadata entries.
class TarReader {
 public:
  explicit TarReader(std::unique_ptr<InputStream> stream) : stream_(std::move(stream)) {}

  // The next regular file, or false at the end of the archive.
  absl::StatusOr<bool> Next(Member* member) {
    std::string long_name;  // from a GNU 'L' or pax 'path' record
    while (true) {
      const uint64_t header_offset = offset_;
      std::string header;
      if (absl::Status s = ReadExactly(kBlock, &header, /*end_ok=*/true); !s.ok()) return s;
      if (header.empty()) return false;  // no end-of-archive blocks: tolerated, as tar does
      if (std::all_of(header.begin(), header.end(), [](char c) { return c == 0; })) return false;
      if (!ChecksumMatches(header)) return Corrupt(header_offset, "a header's checksum does not match");
      uint64_t size = 0;
      if (!ParseOctal(header.substr(124, 12), &size))
        return Corrupt(header_offset, "a header's size is not octal");
      if (size > kMaxMemberBytes) {
        return Corrupt(header_offset, absl::StrCat("a member of ", size, " bytes is over the ",
                                                   kMaxMemberBytes, "-byte limit"));
      }
      const char type = header[156];
      std::string data;
      if (absl::Status s = ReadExactly(size, &data, /*end_ok=*/false); !s.ok()) return s;
      if (absl::Status s = Skip((kBlock - size % kBlock) % kBlock); !s.ok()) return s;
      if (type == 'L') {  // GNU long name of the next member
        long_name = std::string(data.c_str());
        continue;
      }
      if (type == 'x') {  // pax extended header: take its path
        if (std::string path = PaxPath(data); !path.empty()) long_name = path;
        continue;
      }
      if (type != '0' && type != '\0') continue;  // directories, links, global headers
      std::string name = std::string(header.c_str(), strnlen(header.data(), 100));
      const std::string prefix(header.data() + 345, strnlen(header.data() + 345, 155));
      if (!prefix.empty() && header.compare(257, 5, "ustar") == 0) name = prefix + "/" + name;
      member->name = long_name.empty() ? std::move(name) : std::move(long_name);
      member->data = std::move(data);
      return true;
    }
  }

  const std::string& path() const { return stream_->path(); }

 private:
  absl::Status ReadExactly(uint64_t n, std::string* out, bool end_ok) {
    out->clear();
    if (n == 0) return absl::OkStatus();
    if (absl::Status s = stream_->Read(n, out); !s.ok()) return s;
    if (out->size() == n || (end_ok && out->empty())) {
      offset_ += out->size();
      return absl::OkStatus();
    }
    return absl::DataLossError(absl::StrCat("webdataset: shard '", path(), "' is truncated at offset ",
                                            offset_ + out->size(), " (wanted ", n, " bytes at offset ",
                                            offset_, ")"));
  }

  absl::Status Skip(uint64_t n) {
    std::string ignored;
    return ReadExactly(n, &ignored, /*end_ok=*/false);
  }

  absl::Status Corrupt(uint64_t offset, const std::string& what) const {
    return absl::DataLossError(
        absl::StrCat("webdataset: shard '", path(), "' is not a valid tar at offset ", offset, ": ", what));
  }

  static bool ParseOctal(const std::string& field, uint64_t* value) {
    std::string digits;
    for (char c : field) {
      if (c == 0 || c == ' ') {
        if (!digits.empty()) break;
        continue;
      }
      if (c < '0' || c > '7') return false;
      digits.push_back(c);
    }
    *value = 0;
    for (char c : digits) {
      if (*value > (uint64_t{1} << 60)) return false;
      *value = *value * 8 + static_cast<uint64_t>(c - '0');
    }
    return true;
  }

  static bool ChecksumMatches(const std::string& header) {
    uint64_t stored = 0;
    if (!ParseOctal(header.substr(148, 8), &stored)) return false;
    uint64_t sum = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      sum += (i >= 148 && i < 156) ? static_cast<unsigned char>(' ') : static_cast<unsigned char>(header[i]);
    }
    return sum == stored;
  }

  // "N path=VALUE\n" records of a pax header.
  static std::string PaxPath(const std::string& records) {
    size_t at = 0;
    while (at < records.size()) {
      const size_t space = records.find(' ', at);
      uint64_t length = 0;
      if (space == std::string::npos || !absl::SimpleAtoi(records.substr(at, space - at), &length) ||
          length == 0)
        return "";
      const std::string record = records.substr(space + 1, length - (space - at) - 1);
      if (record.rfind("path=", 0) == 0) return record.substr(5, record.size() - 5 - (record.back() == '\n'));
      at += length;
    }
    return "";
  }

  std::unique_ptr<InputStream> stream_;
  uint64_t offset_ = 0;
};

// "dir/a.b.jpg" -> key "dir/a", extension "b.jpg".
std::pair<std::string, std::string> SplitKey(const std::string& name) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {name, ""};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

class WebDatasetDataset : public DatasetBase {
 public:
  WebDatasetDataset(std::vector<std::string> files, std::vector<std::string> keys)
      : files_(std::move(files)), keys_(std::move(keys)) {
    spec_.names.push_back("__key__");
    spec_.names.insert(spec_.names.end(), keys_.begin(), keys_.end());
    spec_.components.assign(spec_.names.size(), {PartialShape::Known({}), DType::kString});
    names_ = std::make_shared<const std::vector<std::string>>(spec_.names);
  }
  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override { return kUnknownCardinality; }
  std::string DebugName() const override { return "webdataset"; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return std::make_unique<Iterator>(this, context.split_provider);
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const WebDatasetDataset* dataset, SplitProvider* provider)
        : dataset_(dataset), shards_(static_cast<int64_t>(dataset->files_.size()), provider) {}

    absl::Status GetNext(Element* element, bool* end) override {
      while (true) {
        if (reader_ == nullptr) {
          int64_t shard = 0;
          if (absl::Status s = shards_.Next(&shard, end); !s.ok() || *end) return s;
          if (absl::Status s = OpenShard(shard); !s.ok()) return s;
        }
        absl::StatusOr<bool> got = NextSample(element);
        if (!got.ok()) return got.status();
        if (*got) {
          ++samples_read_;
          *end = false;
          return absl::OkStatus();
        }
        reader_.reset();
      }
    }

    // The next shard's position, and in the open shard how many samples
    // were given: a restore reads that shard again past them.
    absl::Status Save(proto::IteratorState* state) override {
      return SaveOpenFile({.open = reader_ != nullptr, .file = shard_, .items = samples_read_}, shards_,
                          state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<OpenFileState> open_file =
          RestoreOpenFile(state, static_cast<int64_t>(dataset_->files_.size()), &shards_);
      if (!open_file.ok()) return open_file.status();
      if (!open_file->open) return absl::OkStatus();
      if (absl::Status s = OpenShard(open_file->file); !s.ok()) return s;
      Element skipped;
      if (absl::Status s = SkipItems(
              open_file->items, [&] { return NextSample(&skipped); }, dataset_->files_[open_file->file],
              "samples");
          !s.ok()) {
        return s;
      }
      samples_read_ = open_file->items;
      return absl::OkStatus();
    }

   private:
    absl::Status OpenShard(int64_t shard) {
      absl::StatusOr<std::unique_ptr<InputStream>> stream =
          InputStream::Open(dataset_->files_[shard], Compression::kNone);
      if (!stream.ok()) return stream.status();
      reader_ = std::make_unique<TarReader>(*std::move(stream));
      pending_.reset();
      shard_ = shard;
      samples_read_ = 0;
      return absl::OkStatus();
    }

    // Gathers the members of the next key; false at the shard's end.
    absl::StatusOr<bool> NextSample(Element* element) {
      std::string key;
      std::map<std::string, std::string> parts;
      while (true) {
        Member member;
        if (pending_.has_value()) {
          member = *std::move(pending_);
          pending_.reset();
        } else {
          absl::StatusOr<bool> more = reader_->Next(&member);
          if (!more.ok()) return more.status();
          if (!*more) break;
        }
        auto [member_key, extension] = SplitKey(member.name);
        if (!parts.empty() && member_key != key) {
          pending_ = std::move(member);
          break;
        }
        key = std::move(member_key);
        parts[extension] = std::move(member.data);
      }
      if (parts.empty()) return false;
      std::vector<Tensor> components{Tensor::StringScalar(key)};
      for (const std::string& wanted : dataset_->keys_) {
        auto it = parts.find(wanted);
        if (it == parts.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "webdataset: sample '", key, "' of shard '", reader_->path(), "' has no '", wanted,
              "' member (it has ",
              absl::StrJoin(parts, ", ", [](std::string* out, const auto& p) { out->append(p.first); }),
              ")"));
        }
        components.push_back(Tensor::StringScalar(std::move(it->second)));
      }
      *element = Element(std::move(components), dataset_->names_);
      return true;
    }

    const WebDatasetDataset* const dataset_;
    SourcePositions shards_;
    std::unique_ptr<TarReader> reader_;
    std::optional<Member> pending_;  // the first member of the next sample
    int64_t shard_ = 0;              // the open one
    int64_t samples_read_ = 0;       // from it
  };

  const std::vector<std::string> files_;
  const std::vector<std::string> keys_;
  ElementSpec spec_;
  ComponentNames names_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeWebDatasetDataset(const proto::WebDatasetOp& op) {
  if (op.files().empty()) return absl::InvalidArgumentError("webdataset: missing 'files'");
  std::vector<std::string> files(op.files().begin(), op.files().end());
  std::vector<std::string> keys(op.keys().begin(), op.keys().end());
  if (keys.empty()) {
    // The extensions of the first sample of the first shard.
    absl::StatusOr<std::unique_ptr<InputStream>> stream = InputStream::Open(files[0], Compression::kNone);
    if (!stream.ok()) return stream.status();
    TarReader reader(*std::move(stream));
    std::string first_key;
    Member member;
    while (true) {
      absl::StatusOr<bool> more = reader.Next(&member);
      if (!more.ok()) return more.status();
      if (!*more) break;
      auto [key, extension] = SplitKey(member.name);
      if (!first_key.empty() && key != first_key) break;
      first_key = key;
      if (std::find(keys.begin(), keys.end(), extension) == keys.end()) keys.push_back(extension);
    }
    if (keys.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("webdataset: shard '", files[0], "' has no members; name the extensions with 'keys'"));
    }
    std::sort(keys.begin(), keys.end());
  }
  for (const std::string& key : keys) {
    if (key == "__key__") return absl::InvalidArgumentError("webdataset: '__key__' is not an extension");
  }
  return std::make_shared<WebDatasetDataset>(std::move(files), std::move(keys));
}

}  // namespace sluice
