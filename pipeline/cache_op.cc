// cache: tf.data's cache. The first complete pass over the input is kept,
// in this build's memory (no filename) or in files (cache_files.h); every
// later iterator of the same built dataset (each epoch under a following
// repeat) reads the kept elements and makes no iterator of its input, so
// the steps before it do not run again. Which iterator writes is decided
// at its first GetNext (or Restore): the cache if complete, else a pass
// that keeps what it reads. A memory pass publishes its buffer when its
// input ends, unless another published first; a file pass holds the lock
// (tf.data refuses a second writer, and so do we). An iterator destroyed
// before its input's end keeps nothing.
//
// Checkpoints restore exactly. A writing pass saves what it kept (the
// elements, or its temp file's length) with its input's state, and the
// restored one goes on keeping them. A reading pass saves its position;
// restored into a build without the cache (memory in another process, or
// files since deleted), it runs its input from the start, writing the
// cache, and skips that many elements of its output. That is exact when
// the input gives the same elements on each pass (a seeded shuffle, a
// file list): as tf.data, the cache assumes it does.
//
// On a daemon the files lie under the operator's cache_dir (sandbox.h),
// checked when an iterator is made, not when the pipeline is built (the
// dispatcher builds it too).
#include <spdlog/spdlog.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/cache_files.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/sandbox.h"
#include "pipeline/unary_dataset.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice {
namespace {

using internal::UnaryDataset;

constexpr int64_t kDefaultMaxBytes = int64_t{1} << 30;

// A memory cache's elements, shared by the iterators of one built dataset.
class MemoryCache {
 public:
  std::shared_ptr<const std::vector<Element>> Get() const {
    absl::MutexLock lock(&mu_);
    return elements_;
  }
  // Keeps `elements` unless a pass published first.
  void Publish(std::vector<Element> elements) {
    auto published = std::make_shared<const std::vector<Element>>(std::move(elements));
    absl::MutexLock lock(&mu_);
    if (elements_ == nullptr) elements_ = std::move(published);
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::vector<Element>> elements_ ABSL_GUARDED_BY(mu_);
};

// What an iterator does; saved as the state's "mode".
enum class Mode : int64_t { kUnstarted = 0, kWriting = 1, kReading = 2, kDone = 3 };
// Where a writing pass keeps its elements; saved as "sink".
enum class Sink : int64_t { kNone = 0, kMemory = 1, kFile = 2 };

class CacheDataset : public UnaryDataset {
 public:
  CacheDataset(DatasetPtr input, std::string filename, int64_t max_bytes, std::string input_fingerprint)
      : UnaryDataset(input, input->element_spec(), "cache"),
        filename_(std::move(filename)),
        input_fingerprint_(std::move(input_fingerprint)),
        max_bytes_(max_bytes > 0 ? max_bytes : kDefaultMaxBytes) {}

  int64_t Cardinality() const override { return input()->Cardinality(); }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    std::string path;
    if (!filename_.empty()) {
      absl::StatusOr<std::string> resolved = CacheFilePath(filename_);
      if (!resolved.ok()) return resolved.status();
      path = *std::move(resolved);
    }
    return std::make_unique<Iterator>(this, context, std::move(path));
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const CacheDataset* dataset, const IteratorContext& context, std::string path)
        : dataset_(dataset), context_(context), path_(std::move(path)) {}

    absl::Status GetNext(Element* element, bool* end) override {
      if (!failed_.ok()) return failed_;
      if (mode_ == Mode::kUnstarted) {
        if (absl::Status s = Start(); !s.ok()) return s;
      }
      if (mode_ == Mode::kReading) return Read(element, end);
      if (mode_ == Mode::kWriting) return Write(element, end);
      *end = true;
      return absl::OkStatus();
    }

    absl::Status Save(proto::IteratorState* state) override {
      if (!failed_.ok()) return failed_;
      auto& ints = *state->mutable_ints();
      ints["mode"] = static_cast<int64_t>(mode_);
      if (mode_ == Mode::kReading) {
        ints["position"] = position_;
        if (reader_ != nullptr) ints["offset"] = reader_->offset();
        return absl::OkStatus();
      }
      if (mode_ != Mode::kWriting) return absl::OkStatus();
      ints["skip"] = skip_;
      ints["sink"] = static_cast<int64_t>(sink_);
      if (sink_ == Sink::kMemory) {
        for (const Element& e : buffer_) SaveElement(e, state);
      } else if (sink_ == Sink::kFile) {
        absl::StatusOr<CacheWriterCheckpoint> saved = writer_->Checkpoint();
        if (!saved.ok()) return saved.status();
        (*state->mutable_blobs())["writer"] = saved->writer_id;
        ints["elements"] = saved->elements;
        ints["bytes"] = saved->bytes;
      }
      return SaveInput(*input_, state);
    }

    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<int64_t> mode = StateInt(state, "mode");
      if (!mode.ok()) return mode.status();
      if (*mode < 0 || *mode > static_cast<int64_t>(Mode::kDone)) return MalformedState("unknown cache mode");
      mode_ = static_cast<Mode>(*mode);
      if (mode_ == Mode::kReading) return RestoreReading(state);
      if (mode_ == Mode::kWriting) return RestoreWriting(state);
      return absl::OkStatus();
    }

   private:
    bool files() const { return !path_.empty(); }

    // The cache from element `position` on if it is complete, else a pass
    // that writes it, its output starting after `position` elements (a
    // restore into a build without the cache recomputes it). A restore goes
    // on without writing when another iterator holds the lock, rather than
    // fail; its files' first `position` elements must end at `saved_offset`.
    absl::Status Start(int64_t position = 0, bool restoring = false,
                       std::optional<int64_t> saved_offset = std::nullopt) {
      if (!files()) {
        cached_ = dataset_->memory_.Get();
        if (cached_ == nullptr) return StartWriting(Sink::kMemory, position);
        if (position > static_cast<int64_t>(cached_->size())) {
          return MalformedState(
              absl::StrCat("the cache's position ", position, " is past its ", cached_->size(), " elements"));
        }
        position_ = position;
        mode_ = Mode::kReading;
        return absl::OkStatus();
      }
      if (CacheFilesComplete(path_)) {
        absl::StatusOr<std::unique_ptr<CacheFileReader>> reader =
            CacheFileReader::Open(path_, dataset_->input_fingerprint_);
        if (!reader.ok()) return reader.status();
        if (absl::Status s = (*reader)->Skip(position); !s.ok()) return s;
        if (saved_offset.has_value() && *saved_offset != (*reader)->offset()) {
          return absl::DataLossError(
              absl::StrCat("cache: '", path_, ".data' changed since the save: its first ", position,
                           " elements end at byte ", (*reader)->offset(), ", not ", *saved_offset));
        }
        reader_ = *std::move(reader);
        position_ = position;
        mode_ = Mode::kReading;
        return absl::OkStatus();
      }
      absl::StatusOr<std::unique_ptr<CacheFileWriter>> writer =
          CacheFileWriter::Start(path_, dataset_->input_fingerprint_);
      if (writer.ok()) {
        writer_ = *std::move(writer);
        return StartWriting(Sink::kFile, position);
      }
      if (!restoring || !absl::IsFailedPrecondition(writer.status())) return writer.status();
      spdlog::warn("{}; the restored pass goes on without writing it",
                   std::string(writer.status().message()));
      return StartWriting(Sink::kNone, position);
    }

    absl::Status StartWriting(Sink sink, int64_t skip) {
      absl::StatusOr<std::unique_ptr<IteratorBase>> input = dataset_->input()->MakeIterator(context_);
      if (!input.ok()) return input.status();
      input_ = *std::move(input);
      sink_ = sink;
      skip_ = skip;
      mode_ = Mode::kWriting;
      return absl::OkStatus();
    }

    absl::Status Read(Element* element, bool* end) {
      if (reader_ != nullptr) {
        absl::StatusOr<bool> got = reader_->Next(element);
        if (!got.ok()) return got.status();
        *end = !*got;
        if (*end) mode_ = Mode::kDone;
        position_ += *end ? 0 : 1;
        return absl::OkStatus();
      }
      *end = position_ >= static_cast<int64_t>(cached_->size());
      if (*end) {
        mode_ = Mode::kDone;
        return absl::OkStatus();
      }
      *element = (*cached_)[position_++];
      return absl::OkStatus();
    }

    // The input's next element, kept; skipped while a recomputing restore
    // catches up with its saved position.
    absl::Status Write(Element* element, bool* end) {
      while (true) {
        if (absl::Status s = input_->GetNext(element, end); !s.ok()) return s;
        if (*end) return FinishWriting();
        if (absl::Status s = Keep(*element); !s.ok()) {
          failed_ = s;
          Drop();
          return s;
        }
        if (skip_ == 0) return absl::OkStatus();
        --skip_;
      }
    }

    absl::Status Keep(const Element& element) {
      if (sink_ == Sink::kFile) return writer_->Add(element);
      if (sink_ != Sink::kMemory) return absl::OkStatus();
      buffer_bytes_ += element.ByteSize();
      if (buffer_bytes_ > dataset_->max_bytes_) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cache: the first pass holds more than ", dataset_->max_bytes_,
                         " bytes (max_bytes); raise max_bytes or cache to files (filename)"));
      }
      buffer_.push_back(element);
      return absl::OkStatus();
    }

    absl::Status FinishWriting() {
      absl::Status status;
      if (sink_ == Sink::kMemory) dataset_->memory_.Publish(std::move(buffer_));
      if (sink_ == Sink::kFile) status = writer_->Finish();
      Drop();
      mode_ = Mode::kDone;
      if (!status.ok()) failed_ = status;
      return status;
    }

    // Lets go of the input and what was kept (a file pass's files too).
    void Drop() {
      input_.reset();
      writer_.reset();
      buffer_.clear();
      buffer_bytes_ = 0;
      sink_ = Sink::kNone;
    }

    absl::Status RestoreReading(const proto::IteratorState& state) {
      absl::StatusOr<int64_t> position = StateInt(state, "position");
      if (!position.ok()) return position.status();
      if (*position < 0) return MalformedState("a negative cache position");
      std::optional<int64_t> offset;
      if (files()) {
        absl::StatusOr<int64_t> saved = StateInt(state, "offset");
        if (!saved.ok()) return saved.status();
        offset = *saved;
      }
      return Start(*position, /*restoring=*/true, offset);
    }

    absl::Status RestoreWriting(const proto::IteratorState& state) {
      absl::StatusOr<int64_t> skip = StateInt(state, "skip");
      absl::StatusOr<int64_t> sink = StateInt(state, "sink");
      if (!skip.ok()) return skip.status();
      if (!sink.ok()) return sink.status();
      const bool fits = *sink == static_cast<int64_t>(Sink::kNone) ||
                        (*sink == static_cast<int64_t>(Sink::kMemory) && !files()) ||
                        (*sink == static_cast<int64_t>(Sink::kFile) && files());
      if (*skip < 0 || !fits) {
        return MalformedState("the cache's writing state does not fit this cache");
      }
      if (absl::Status s = StartWriting(static_cast<Sink>(*sink), *skip); !s.ok()) return s;
      if (sink_ == Sink::kMemory) {
        absl::StatusOr<std::vector<Element>> elements = RestoreElements(state);
        if (!elements.ok()) return elements.status();
        for (const Element& e : *elements) buffer_bytes_ += e.ByteSize();
        buffer_ = *std::move(elements);
      } else if (sink_ == Sink::kFile) {
        absl::StatusOr<int64_t> elements = StateInt(state, "elements");
        absl::StatusOr<int64_t> bytes = StateInt(state, "bytes");
        auto writer_id = state.blobs().find("writer");
        if (!elements.ok()) return elements.status();
        if (!bytes.ok()) return bytes.status();
        if (writer_id == state.blobs().end()) return MalformedState("the cache's writer is missing");
        absl::StatusOr<std::unique_ptr<CacheFileWriter>> writer = CacheFileWriter::Resume(
            path_, {.writer_id = writer_id->second, .elements = *elements, .bytes = *bytes},
            dataset_->input_fingerprint_);
        if (!writer.ok()) return writer.status();
        writer_ = *std::move(writer);
        if (writer_ == nullptr) sink_ = Sink::kNone;
      }
      return RestoreInput(*input_, state);
    }

    const CacheDataset* const dataset_;
    const IteratorContext context_;
    const std::string path_;  // empty: memory
    Mode mode_ = Mode::kUnstarted;
    absl::Status failed_;  // a failed pass fails on
    // Writing.
    std::unique_ptr<IteratorBase> input_;
    Sink sink_ = Sink::kNone;
    std::vector<Element> buffer_;
    int64_t buffer_bytes_ = 0;
    std::unique_ptr<CacheFileWriter> writer_;
    int64_t skip_ = 0;
    // Reading.
    std::shared_ptr<const std::vector<Element>> cached_;
    std::unique_ptr<CacheFileReader> reader_;
    int64_t position_ = 0;
  };

  const std::string filename_;
  const std::string input_fingerprint_;  // the steps before the cache's (cache_files.h)
  const int64_t max_bytes_;
  mutable MemoryCache memory_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeCacheDataset(DatasetPtr input, const proto::CacheOp& op,
                                            std::string input_fingerprint) {
  if (op.max_bytes() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache: max_bytes must be >= 0 (0: 1 GiB), got ", op.max_bytes()));
  }
  return std::make_shared<CacheDataset>(std::move(input), op.filename(), op.max_bytes(),
                                        std::move(input_fingerprint));
}

}  // namespace sluice
