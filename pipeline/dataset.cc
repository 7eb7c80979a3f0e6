#include "pipeline/dataset.h"

namespace sluice {

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
