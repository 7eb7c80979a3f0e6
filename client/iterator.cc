// sluice::Iterator over a built pipeline.
#include "sluice/iterator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/dataset_internal.h"
#include "pipeline/iterator_state.h"
#include "pipeline/pipeline_restore.h"

namespace sluice {

class Iterator::Impl {
 public:
  Impl(DatasetPtr dataset, std::unique_ptr<IteratorBase> input, std::string fingerprint)
      : dataset_(std::move(dataset)), input_(std::move(input)), fingerprint_(std::move(fingerprint)) {}

  absl::StatusOr<std::string> Save() {
    if (!status_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot save an iterator that ended with an error: ", status_.message()));
    }
    return SavePipelineState(*input_, fingerprint_);
  }
  absl::StatusOr<std::string> SaveWith(const std::vector<Element>& ahead) {
    if (!status_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot save an iterator that ended with an error: ", status_.message()));
    }
    return SaveWithReadAhead(*input_, fingerprint_, ahead);
  }

  absl::StatusOr<std::optional<Element>> GetNext() {
    if (!status_.ok()) return status_;
    Element element;
    bool end = false;
    if (absl::Status status = input_->GetNext(&element, &end); !status.ok()) {
      status_ = status;
      return status;
    }
    if (end) return std::optional<Element>();
    return std::optional<Element>(std::move(element));
  }
  const ElementSpec& element_spec() const { return dataset_->element_spec(); }
  const absl::Status& status() const { return status_; }

 private:
  const DatasetPtr dataset_;  // outlives input_
  const std::unique_ptr<IteratorBase> input_;
  const std::string fingerprint_;
  absl::Status status_;  // the error that ended the iteration
};

Iterator::Iterator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Iterator::Iterator(Iterator&&) noexcept = default;
Iterator& Iterator::operator=(Iterator&&) noexcept = default;
Iterator::~Iterator() = default;

absl::StatusOr<Element> Iterator::GetNext() {
  absl::StatusOr<std::optional<Element>> next = impl_->GetNext();
  if (!next.ok()) return next.status();
  if (!next->has_value()) return absl::OutOfRangeError("end of the input");
  return **std::move(next);
}

absl::StatusOr<std::optional<Element>> Iterator::GetNextAsOptional() { return impl_->GetNext(); }

absl::StatusOr<std::string> Iterator::Save() { return impl_->Save(); }
absl::StatusOr<std::string> Iterator::Save(const std::vector<Element>& taken_ahead) {
  return impl_->SaveWith(taken_ahead);
}

const ElementSpec& Iterator::element_spec() const { return impl_->element_spec(); }

absl::Status Iterator::status() const { return impl_->status(); }

Iterator::LoopIterator Iterator::begin() {
  LoopIterator loop(this);
  ++loop;
  return loop;
}

Iterator::LoopIterator& Iterator::LoopIterator::operator++() {
  current_ = Element();  // frees the last element's buffers before the next
  absl::StatusOr<std::optional<Element>> next = iterator_->impl_->GetNext();
  if (next.ok() && next->has_value()) {
    current_ = **std::move(next);
  } else {
    iterator_ = nullptr;  // the end, or an error that status() reports
  }
  return *this;
}

namespace internal {

Iterator DatasetAccess::MakeIterator(DatasetPtr dataset, std::unique_ptr<IteratorBase> input,
                                     std::string fingerprint) {
  return Iterator(
      std::make_unique<Iterator::Impl>(std::move(dataset), std::move(input), std::move(fingerprint)));
}

}  // namespace internal
}  // namespace sluice
