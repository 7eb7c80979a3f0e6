// The file sources: text_line, json_lines, tfrecord and fixed_length_record.
// Each reads
// its files in order; under a split provider, only the files of the
// splits it is handed (one file per split).
#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/io/object_url.h"
#include "pipeline/io/readable_file.h"
#include "pipeline/iterator_state.h"
#include "pipeline/json_lines.h"
#include "pipeline/ops.h"
#include "pipeline/record_io.h"
#include "pipeline/split_provider.h"

namespace sluice {
namespace {

// The saved state's key for the next record's byte offset in its file.
constexpr char kByteOffsetKey[] = "byte_offset";

// The largest record, header or footer fixed_length_record reads.
constexpr int64_t kMaxFixedRecordBytes = int64_t{1} << 30;

const char* FormatName(RecordFormat format) {
  switch (format) {
    case RecordFormat::kTextLine:
      return "text_line";
    case RecordFormat::kTFRecord:
      return "tfrecord";
    case RecordFormat::kFixedLength:
      return "fixed_length_record";
    case RecordFormat::kJsonLines:
      return "json_lines";
  }
  return "?";
}

class FileSourceDataset : public DatasetBase {
 public:
  FileSourceDataset(FileSourceConfig config, Compression compression)
      : config_(std::move(config)), compression_(compression) {
    if (config_.format == RecordFormat::kJsonLines) {
      spec_ = JsonLinesSpec(config_.fields, config_.field_types);
    } else {
      spec_.components.push_back({PartialShape::Known({}), DType::kString});
    }
  }
  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override { return kUnknownCardinality; }
  std::string DebugName() const override { return FormatName(config_.format); }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return std::make_unique<Iterator>(this, context.split_provider);
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const FileSourceDataset* dataset, SplitProvider* provider)
        : dataset_(dataset), files_(static_cast<int64_t>(dataset->config_.files.size()), provider) {
      if (dataset->config_.format == RecordFormat::kJsonLines) {
        json_ = std::make_unique<JsonLineParser>(dataset->config_.fields, dataset->config_.field_types);
      }
    }

    absl::Status GetNext(Element* element, bool* end) override {
      std::string record;
      while (true) {
        if (!file_open_) {
          int64_t file_index = 0;
          if (absl::Status status = files_.Next(&file_index, end); !status.ok() || *end) return status;
          if (absl::Status status = OpenFile(file_index); !status.ok()) return status;
        }
        absl::StatusOr<bool> got = ReadOne(&record);
        if (!got.ok()) return got.status();
        if (*got) {
          ++records_read_;
          break;
        }
        file_open_ = false;
        owned_.reset();
        tfrecord_.reset();
      }
      *end = false;
      if (json_ != nullptr) {
        return json_->Parse(record, dataset_->config_.files[file_index_], records_read_, element);
      }
      *element = Element::Of(Tensor::StringScalar(std::move(record)));
      return absl::OkStatus();
    }

    // Reads records straight into the batch's strings: no per-record tensor.
    absl::Status GetNextBatch(int64_t max_rows, Element* batch, int64_t* rows, bool* end) override {
      if (json_ != nullptr) return IteratorBase::GetNextBatch(max_rows, batch, rows, end);
      Tensor records(DType::kString, {max_rows});
      std::string* out = records.mutable_data<std::string>();
      *rows = 0;
      while (*rows < max_rows) {
        if (!file_open_) {
          int64_t file_index = 0;
          bool no_more = false;
          if (absl::Status status = files_.Next(&file_index, &no_more); !status.ok()) return status;
          if (no_more) break;
          if (absl::Status status = OpenFile(file_index); !status.ok()) return status;
        }
        absl::StatusOr<bool> got = ReadOne(&out[*rows]);
        if (!got.ok()) return got.status();
        if (*got) {
          ++*rows;
          ++records_read_;
          continue;
        }
        file_open_ = false;
        owned_.reset();
        tfrecord_.reset();
      }
      *end = *rows == 0;
      if (*rows < max_rows) records = records.Slice(0, *rows);
      *batch = Element::Of(std::move(records));
      return absl::OkStatus();
    }

    // The next file's position, and in the open file how many records were
    // read: a restore opens that file again and reads past them (exact for
    // compressed files too, at the cost of reading them again).
    absl::Status Save(proto::IteratorState* state) override {
      if (absl::Status saved =
              SaveOpenFile({.open = file_open_, .file = file_index_, .items = records_read_}, files_, state);
          !saved.ok()) {
        return saved;
      }
      // Where the next record starts in an uncompressed file: a restore
      // reads on from there (an object by Range) instead of reading past
      // the records before it.
      if (file_open_ && dataset_->compression_ == Compression::kNone &&
          dataset_->config_.format != RecordFormat::kFixedLength) {
        (*state->mutable_ints())[kByteOffsetKey] = static_cast<int64_t>(NextRecordOffset());
      }
      return absl::OkStatus();
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<OpenFileState> open_file =
          RestoreOpenFile(state, static_cast<int64_t>(dataset_->config_.files.size()), &files_);
      if (!open_file.ok()) return open_file.status();
      if (!open_file->open) return absl::OkStatus();
      const auto byte_offset = state.ints().find(kByteOffsetKey);
      if (byte_offset != state.ints().end() && dataset_->compression_ == Compression::kNone &&
          dataset_->config_.format != RecordFormat::kFixedLength) {
        if (absl::Status s = OpenFileAt(open_file->file, static_cast<uint64_t>(byte_offset->second));
            !s.ok()) {
          return s;
        }
        records_read_ = open_file->items;
        return absl::OkStatus();
      }
      if (absl::Status s = OpenFile(open_file->file); !s.ok()) return s;
      std::string skipped;
      if (absl::Status s = SkipItems(
              open_file->items, [&] { return ReadOne(&skipped); }, dataset_->config_.files[open_file->file],
              "records");
          !s.ok()) {
        return s;
      }
      records_read_ = open_file->items;
      return absl::OkStatus();
    }

   private:
    absl::Status OpenFile(int64_t file_index) {
      const std::string& path = dataset_->config_.files[file_index];
      file_index_ = file_index;
      records_read_ = 0;
      lookahead_.clear();
      absl::StatusOr<std::unique_ptr<InputStream>> stream = OpenStream(file_index);
      if (!stream.ok()) return stream.status();
      const FileSourceConfig& config = dataset_->config_;
      if (config.format == RecordFormat::kTFRecord) {
        tfrecord_ = std::make_unique<TFRecordReader>(*std::move(stream));
        file_open_ = true;
        return absl::OkStatus();
      }
      owned_ = *std::move(stream);
      file_open_ = true;
      if (config.format == RecordFormat::kFixedLength && config.header_bytes > 0) {
        std::string header;
        if (absl::Status s = owned_->Read(config.header_bytes, &header); !s.ok()) return s;
        if (static_cast<int64_t>(header.size()) < config.header_bytes) {
          return absl::DataLossError(
              absl::StrCat("'", path, "' is shorter than its ", config.header_bytes, "-byte header"));
        }
      }
      return absl::OkStatus();
    }

    // Where the next record starts in the open, uncompressed file.
    uint64_t NextRecordOffset() const {
      const InputStream& stream = tfrecord_ != nullptr ? tfrecord_->stream() : *owned_;
      return stream.offset() - lookahead_.size();
    }

    // The file at `file_index` from byte `offset` on (a restore).
    absl::Status OpenFileAt(int64_t file_index, uint64_t offset) {
      const std::string& path = dataset_->config_.files[file_index];
      file_index_ = file_index;
      records_read_ = 0;
      lookahead_.clear();
      opened_ahead_.reset();
      absl::StatusOr<std::unique_ptr<InputStream>> stream = InputStream::OpenAt(path, offset);
      if (!stream.ok()) return stream.status();
      if (dataset_->config_.format == RecordFormat::kTFRecord) {
        tfrecord_ = std::make_unique<TFRecordReader>(*std::move(stream));
      } else {
        owned_ = *std::move(stream);
      }
      file_open_ = true;
      return absl::OkStatus();
    }

    // The file at `file_index`: the one opened ahead when it is that one.
    // Then the next file the positions already name is opened ahead, when
    // it is an object (its HEAD and first parts under way while this one
    // is read).
    absl::StatusOr<std::unique_ptr<InputStream>> OpenStream(int64_t file_index) {
      const std::string& path = dataset_->config_.files[file_index];
      absl::StatusOr<std::unique_ptr<InputStream>> stream;
      if (opened_ahead_ != nullptr && opened_ahead_index_ == file_index) {
        absl::StatusOr<std::unique_ptr<io::ReadableFile>> file = opened_ahead_->Take();
        opened_ahead_.reset();
        if (!file.ok()) return file.status();
        stream = InputStream::Open(path, dataset_->compression_, *std::move(file));
      } else {
        opened_ahead_.reset();
        stream = InputStream::Open(path, dataset_->compression_);
      }
      const auto [next, limit] = files_.KnownAhead();
      if (next < limit && io::HasUrlScheme(dataset_->config_.files[next])) {
        opened_ahead_index_ = next;
        opened_ahead_ = io::FileOpenedAhead::Start(dataset_->config_.files[next]);
      }
      return stream;
    }

    // One record from the open file; false at its end.
    absl::StatusOr<bool> ReadOne(std::string* record) {
      const FileSourceConfig& config = dataset_->config_;
      switch (config.format) {
        case RecordFormat::kTFRecord:
          return tfrecord_->ReadRecord(record);
        case RecordFormat::kTextLine:
        case RecordFormat::kJsonLines:
          return owned_->ReadLine(record);
        case RecordFormat::kFixedLength: {
          // Reads one record plus the footer's length ahead, so the footer
          // is never mistaken for a record.
          const int64_t want = config.record_bytes + config.footer_bytes;
          if (static_cast<int64_t>(lookahead_.size()) < want) {
            std::string more;
            if (absl::Status s = owned_->Read(want - lookahead_.size(), &more); !s.ok()) return s;
            lookahead_ += more;
          }
          if (static_cast<int64_t>(lookahead_.size()) < want) {
            const auto left = static_cast<int64_t>(lookahead_.size());
            if (left < config.footer_bytes) {
              return absl::DataLossError(absl::StrCat(
                  "'", owned_->path(), "': ", left, " bytes after the last record are fewer than the ",
                  config.footer_bytes, "-byte footer (offset ", owned_->offset() - lookahead_.size(), ")"));
            }
            if (left != config.footer_bytes) {
              return absl::DataLossError(absl::StrCat("'", owned_->path(), "': ", left - config.footer_bytes,
                                                      " trailing bytes do not make a whole ",
                                                      config.record_bytes, "-byte record (offset ",
                                                      owned_->offset() - lookahead_.size(), ")"));
            }
            lookahead_.clear();
            return false;
          }
          *record = lookahead_.substr(0, config.record_bytes);
          lookahead_.erase(0, config.record_bytes);
          return true;
        }
      }
      return false;
    }

    const FileSourceDataset* const dataset_;
    SourcePositions files_;
    bool file_open_ = false;
    int64_t file_index_ = 0;                    // of the open file
    int64_t records_read_ = 0;                  // from it
    std::unique_ptr<InputStream> owned_;        // text and fixed-length files
    std::unique_ptr<TFRecordReader> tfrecord_;  // TFRecord files
    std::string lookahead_;
    std::unique_ptr<JsonLineParser> json_;               // json_lines only
    std::shared_ptr<io::FileOpenedAhead> opened_ahead_;  // the next object, opening
    int64_t opened_ahead_index_ = -1;
  };

  const FileSourceConfig config_;
  const Compression compression_;
  ElementSpec spec_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeFileSourceDataset(FileSourceConfig config) {
  const char* op = FormatName(config.format);
  absl::StatusOr<Compression> compression = ParseCompression(config.compression_type);
  if (!compression.ok())
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", compression.status().message()));
  if (config.files.empty()) return absl::InvalidArgumentError(absl::StrCat(op, ": missing 'files'"));
  if (config.format == RecordFormat::kJsonLines) {
    if (absl::Status s = CheckJsonFields(config.fields, config.field_types); !s.ok()) return s;
  }
  if (config.format == RecordFormat::kFixedLength) {
    if (config.record_bytes <= 0) {
      return absl::InvalidArgumentError("fixed_length_record: record_bytes must be > 0");
    }
    if (config.header_bytes < 0 || config.footer_bytes < 0) {
      return absl::InvalidArgumentError("fixed_length_record: header_bytes and footer_bytes must be >= 0");
    }
    // A record is read whole into memory (and record plus footer ahead), so
    // a size past any element that can exist is refused here, not by
    // running out of memory.
    for (const auto& [name, value] : {std::pair<const char*, int64_t>{"record_bytes", config.record_bytes},
                                      {"header_bytes", config.header_bytes},
                                      {"footer_bytes", config.footer_bytes}}) {
      if (value > kMaxFixedRecordBytes) {
        return absl::InvalidArgumentError(absl::StrCat("fixed_length_record: ", name, " must be at most ",
                                                       kMaxFixedRecordBytes, " (1 GiB), got ", value));
      }
    }
  }
  return std::make_shared<FileSourceDataset>(std::move(config), *compression);
}

}  // namespace sluice
