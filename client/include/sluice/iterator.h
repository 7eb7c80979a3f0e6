// sluice::Iterator: reads a Dataset's elements one at a time, in this
// process (a pipeline that reads from the service starts a new iteration
// of its job).
//
//   absl::StatusOr<sluice::Iterator> iterator = dataset.MakeIterator();
//   for (const sluice::Element& element : *iterator) Use(element);
//   if (!iterator->status().ok()) ...  // the error that ended the loop
//
// or, one call at a time:
//
//   absl::StatusOr<std::optional<sluice::Element>> next = iterator->GetNextAsOptional();
#ifndef SLUICE_CLIENT_INCLUDE_SLUICE_ITERATOR_H_
#define SLUICE_CLIENT_INCLUDE_SLUICE_ITERATOR_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sluice/element.h"

namespace sluice {

namespace internal {
struct DatasetAccess;
}  // namespace internal

class Iterator {
 public:
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();

  // The next element, or OutOfRange at the end of the input. Other errors
  // end the iteration too.
  absl::StatusOr<Element> GetNext();
  // The next element, or an empty optional at the end of the input.
  absl::StatusOr<std::optional<Element>> GetNextAsOptional();
  const ElementSpec& element_spec() const;
  // Where the iterator stands, as bytes (a versioned protobuf) that
  // Dataset::MakeIterator(restore_from) resumes from. A read from the
  // service saves in distributed_epoch with exactly_once (otherwise
  // FailedPrecondition says why); an op that cannot save yet is
  // Unimplemented naming its step.
  absl::StatusOr<std::string> Save();
  // The same, with `taken_ahead` in front: elements the caller took from
  // this iterator but has not handed on (a read-ahead buffer), which a
  // restore gives first.
  absl::StatusOr<std::string> Save(const std::vector<Element>& taken_ahead);

  // Range-for support: the elements until the end of the input or the
  // first error, which status() then returns.
  class LoopIterator {
   public:
    using value_type = Element;
    using difference_type = std::ptrdiff_t;
    const Element& operator*() const { return current_; }
    LoopIterator& operator++();
    bool operator==(const LoopIterator& other) const { return done() == other.done(); }

   private:
    friend class Iterator;
    explicit LoopIterator(Iterator* iterator) : iterator_(iterator) {}
    bool done() const { return iterator_ == nullptr; }
    Iterator* iterator_;
    Element current_;
  };
  LoopIterator begin();
  LoopIterator end() { return LoopIterator(nullptr); }
  // OK, or the error that ended a range-for loop.
  absl::Status status() const;

 private:
  friend struct internal::DatasetAccess;
  class Impl;
  explicit Iterator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Merges the states that the consumers of one shared service job saved at
// the same step (Iterator::Save) into one job checkpoint, which
// Dataset::MakeIterator(restore_from, RestoreOptions) restores on as many
// consumers or on another number. States from different pipelines, or of
// a local pipeline, are refused naming the state by its index.
absl::StatusOr<std::string> MergeSavedStates(const std::vector<std::string>& consumer_states);

// A saved state and the name its errors give it (its file's path, say).
struct NamedState {
  std::string name;
  std::string bytes;
};
// The same, naming each state by its name (`sluice checkpoint merge` names
// the files).
absl::StatusOr<std::string> MergeSavedStates(const std::vector<NamedState>& states);

}  // namespace sluice

#endif  // SLUICE_CLIENT_INCLUDE_SLUICE_ITERATOR_H_
