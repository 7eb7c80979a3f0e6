#include "pipeline/file_list_source.h"

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/exceptions.h"
#include "pipeline/io/remote_file.h"
#include "pipeline/iterator_state.h"
#include "pipeline/random.h"
#include "pipeline/split_provider.h"

namespace sluice {

class FileListDataset::Iterator : public IteratorBase {
 public:
  Iterator(const FileListDataset* dataset, std::vector<int64_t> order, SplitProvider* provider)
      : dataset_(dataset), order_(std::move(order)), positions_(dataset->count_, provider) {}
  // Reads ahead hold the dataset: they end before the iterator does.
  ~Iterator() override { DropReadAhead(); }

  absl::Status GetNext(Element* element, bool* end) override {
    int64_t position = 0;
    if (absl::Status status = positions_.Next(&position, end); !status.ok() || *end) return status;
    StartReadAhead();
    absl::StatusOr<Element> next = Take(position);
    if (!next.ok()) return next.status();
    *element = *std::move(next);
    return absl::OkStatus();
  }
  absl::Status Save(proto::IteratorState* state) override {
    return SaveFileOrder(order_, dataset_->iterations_.load(), positions_, state);
  }
  absl::Status Restore(const proto::IteratorState& state) override {
    DropReadAhead();
    return RestoreFileOrder(state, &order_, &dataset_->iterations_, &positions_);
  }

 private:
  // One file read ahead: its element once `done`.
  struct Ahead {
    uint64_t bytes = 0;  // FileBytes: what it counts toward kReadAheadBytes
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::StatusOr<Element> element ABSL_GUARDED_BY(mu);
  };

  // Starts the files of the positions already held, up to the dataset's
  // read-ahead and kReadAheadBytes, that are not started yet.
  void StartReadAhead() {
    const int64_t depth = dataset_->ReadAheadFiles();
    if (depth <= 0) return;
    const auto [first, limit] = positions_.KnownAhead();
    for (int64_t position = first; position < limit && position < first + depth; ++position) {
      if (ahead_.contains(position)) continue;
      const uint64_t bytes = dataset_->FileBytes(order_[position]);
      // In order: a large file waits for room rather than be passed.
      if (!ahead_.empty() && ahead_bytes_ + bytes > kReadAheadBytes) return;
      auto pending = std::make_shared<Ahead>();
      pending->bytes = bytes;
      ahead_bytes_ += bytes;
      ahead_.emplace(position, pending);
      io::RunOnFetchThreads([dataset = dataset_, index = order_[position], pending] {
        absl::StatusOr<Element> element =
            CallContained("reading a file ahead", [&] { return dataset->FileElement(index); });
        absl::MutexLock lock(&pending->mu);
        pending->element = std::move(element);
        pending->done = true;
      });
    }
  }

  absl::StatusOr<Element> Take(int64_t position) {
    auto it = ahead_.find(position);
    if (it == ahead_.end()) return dataset_->FileElement(order_[position]);
    std::shared_ptr<Ahead> pending = std::move(it->second);
    ahead_.erase(it);
    ahead_bytes_ -= pending->bytes;
    absl::MutexLock lock(&pending->mu);
    pending->mu.Await(absl::Condition(&pending->done));
    return std::move(pending->element);
  }

  void DropReadAhead() {
    for (auto& [position, pending] : ahead_) {
      absl::MutexLock lock(&pending->mu);
      pending->mu.Await(absl::Condition(&pending->done));
    }
    ahead_.clear();
    ahead_bytes_ = 0;
  }

  const FileListDataset* const dataset_;
  std::vector<int64_t> order_;
  SourcePositions positions_;
  // Files being read ahead, by position.
  std::map<int64_t, std::shared_ptr<Ahead>> ahead_;
  uint64_t ahead_bytes_ = 0;  // their FileBytes, together
};

FileListDataset::FileListDataset(int64_t count, bool shuffle, std::optional<int64_t> seed, ElementSpec spec)
    : count_(count), shuffle_(shuffle), seed_(seed), spec_(std::move(spec)) {}

absl::StatusOr<std::unique_ptr<IteratorBase>> FileListDataset::MakeIterator(
    const IteratorContext& context) const {
  return std::make_unique<Iterator>(
      this, FileSourceOrder(static_cast<size_t>(count_), shuffle_, seed_, iterations_, context),
      context.split_provider);
}

}  // namespace sluice
