#include "pipeline/file_list_source.h"

#include <utility>
#include <vector>

#include "pipeline/iterator_state.h"
#include "pipeline/random.h"
#include "pipeline/split_provider.h"

namespace sluice {

class FileListDataset::Iterator : public IteratorBase {
 public:
  Iterator(const FileListDataset* dataset, std::vector<int64_t> order, SplitProvider* provider)
      : dataset_(dataset), order_(std::move(order)), positions_(dataset->count_, provider) {}

  absl::Status GetNext(Element* element, bool* end) override {
    int64_t position = 0;
    if (absl::Status status = positions_.Next(&position, end); !status.ok() || *end) return status;
    absl::StatusOr<Element> next = dataset_->FileElement(order_[position]);
    if (!next.ok()) return next.status();
    *element = *std::move(next);
    return absl::OkStatus();
  }
  absl::Status Save(proto::IteratorState* state) override {
    return SaveFileOrder(order_, dataset_->iterations_.load(), positions_, state);
  }
  absl::Status Restore(const proto::IteratorState& state) override {
    return RestoreFileOrder(state, &order_, &dataset_->iterations_, &positions_);
  }

 private:
  const FileListDataset* const dataset_;
  std::vector<int64_t> order_;
  SourcePositions positions_;
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
