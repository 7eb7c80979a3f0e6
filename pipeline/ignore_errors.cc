// The ignore_errors step: drops the elements whose computation failed (a
// corrupt image, a record that does not parse), as tf.data's
// ignore_errors does, and counts them.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/unary_dataset.h"

namespace sluice {
namespace {

using internal::UnaryDataset;
using internal::UnaryIterator;

// A source that cannot go on keeps failing with the same error; past this
// many in a row, ignoring it would spin forever, so the error ends the read.
constexpr int kMaxRepeatsOfOneError = 100;

class IgnoreErrorsDataset : public UnaryDataset {
 public:
  IgnoreErrorsDataset(DatasetPtr input, bool quiet)
      : UnaryDataset(input, input->element_spec(), "ignore_errors"), quiet_(quiet) {}
  int64_t Cardinality() const override {
    const int64_t n = input()->Cardinality();
    return n == kInfiniteCardinality ? n : kUnknownCardinality;
  }
  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return internal::MakeUnaryIterator<Iterator>(this, context);
  }

 private:
  class Iterator : public UnaryIterator {
   public:
    Iterator(const IgnoreErrorsDataset* dataset, std::unique_ptr<IteratorBase> input)
        : UnaryIterator(std::move(input)), quiet_(dataset->quiet_) {}

    ~Iterator() override {
      if (dropped_ > 0 && !quiet_) {
        fprintf(stderr, "sluice: ignore_errors dropped %lld element(s) in all\n",
                static_cast<long long>(dropped_));
      }
    }

    absl::Status GetNext(Element* element, bool* end) override {
      std::string last_message;
      int repeats = 0;
      while (true) {
        absl::Status status = input_->GetNext(element, end);
        if (status.ok() || absl::IsCancelled(status)) return status;
        ++dropped_;
        if (!quiet_ && dropped_ == 1) {
          fprintf(stderr, "sluice: ignore_errors dropped an element (more are counted, not shown): %s\n",
                  std::string(status.message()).c_str());
        }
        repeats = status.message() == last_message ? repeats + 1 : 1;
        if (repeats >= kMaxRepeatsOfOneError) {
          return absl::Status(status.code(),
                              absl::StrCat("ignore_errors: the same error ", repeats,
                                           " times in a row; the input cannot go on: ", status.message()));
        }
        last_message = std::string(status.message());
      }
    }

    absl::Status Save(proto::IteratorState* state) override {
      return SaveCounter(*input_, "dropped", dropped_, state);
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      return RestoreCounter(*input_, "dropped", &dropped_, state);
    }

   private:
    const bool quiet_;
    int64_t dropped_ = 0;
  };

  const bool quiet_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeIgnoreErrorsDataset(DatasetPtr input, const proto::IgnoreErrorsOp& op) {
  return std::make_shared<IgnoreErrorsDataset>(std::move(input), op.quiet());
}

}  // namespace sluice
