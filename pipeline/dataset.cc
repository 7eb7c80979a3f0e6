#include "pipeline/dataset.h"

#include "absl/strings/str_cat.h"
#include "common/exceptions.h"
#include "pipeline/iterator_state.h"

namespace sluice {
namespace {

class ContainedIterator : public IteratorBase {
 public:
  ContainedIterator(std::unique_ptr<IteratorBase> input, std::string where)
      : input_(std::move(input)), where_(std::move(where)) {}
  absl::Status GetNext(Element* element, bool* end_of_sequence) override {
    try {
      return input_->GetNext(element, end_of_sequence);
    } catch (...) {
      return StatusFromCurrentException(where_);
    }
  }
  absl::Status GetNextBatch(int64_t max_rows, Element* batch, int64_t* rows, bool* end_of_sequence) override {
    try {
      return input_->GetNextBatch(max_rows, batch, rows, end_of_sequence);
    } catch (...) {
      return StatusFromCurrentException(where_);
    }
  }
  // The step's state is its op's; an op that cannot save is named here.
  absl::Status Save(proto::IteratorState* state) override {
    return Named(Contain([&] { return input_->Save(state); }));
  }
  absl::Status Restore(const proto::IteratorState& state) override {
    return Named(Contain([&] { return input_->Restore(state); }));
  }

 private:
  template <typename F>
  absl::Status Contain(F call) {
    try {
      return call();
    } catch (...) {
      return StatusFromCurrentException(where_);
    }
  }
  absl::Status Named(absl::Status status) const {
    if (!IsCannotSave(status)) return status;
    return absl::UnimplementedError(absl::StrCat(where_, " ", status.message()));
  }

  const std::unique_ptr<IteratorBase> input_;
  const std::string where_;
};

class ContainedDataset : public DatasetBase {
 public:
  ContainedDataset(DatasetPtr input, std::string where)
      : input_(std::move(input)), where_(std::move(where)) {}
  const ElementSpec& element_spec() const override { return input_->element_spec(); }
  int64_t Cardinality() const override { return input_->Cardinality(); }
  std::string DebugName() const override { return input_->DebugName(); }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    absl::StatusOr<std::unique_ptr<IteratorBase>> input =
        CallContained(where_, [&] { return input_->MakeIterator(context); });
    if (!input.ok()) return input.status();
    return std::make_unique<ContainedIterator>(*std::move(input), where_);
  }

 private:
  const DatasetPtr input_;
  const std::string where_;
};

}  // namespace

DatasetPtr ContainExceptions(DatasetPtr dataset, std::string where) {
  return std::make_shared<ContainedDataset>(std::move(dataset), std::move(where));
}

absl::StatusOr<std::vector<Element>> CollectElements(const DatasetBase& dataset,
                                                     const IteratorContext& context, int64_t limit) {
  if (limit < 0 && dataset.Cardinality() == kInfiniteCardinality) {
    return absl::InvalidArgumentError("cannot collect an infinite dataset without a limit");
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = dataset.MakeIterator(context);
  if (!iterator.ok()) return iterator.status();
  std::vector<Element> elements;
  while (limit < 0 || static_cast<int64_t>(elements.size()) < limit) {
    Element element;
    bool end = false;
    absl::Status status = (*iterator)->GetNext(&element, &end);
    if (!status.ok()) return status;
    if (end) break;
    elements.push_back(std::move(element));
  }
  return elements;
}

std::string CardinalityString(int64_t cardinality) {
  if (cardinality == kInfiniteCardinality) return "infinite";
  if (cardinality == kUnknownCardinality) return "unknown";
  return std::to_string(cardinality);
}

}  // namespace sluice
