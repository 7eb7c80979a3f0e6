// ReplayIterator: elements taken from a pipeline ahead of its reader (a
// DistributedIterator's prefetched steps, the Python iterator's
// read-ahead) that a save put back in front of the pipeline's state, given
// first, then the pipeline's. While recording, it copies each element it
// gives (sharing the tensors' bytes) into *record. Its state wraps the
// pipeline's: IteratorState.ints[kReplayKey], the elements still to give,
// and the pipeline's state as its one input.
#ifndef SLUICE_PIPELINE_REPLAY_ITERATOR_H_
#define SLUICE_PIPELINE_REPLAY_ITERATOR_H_

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "pipeline/dataset.h"
#include "pipeline/iterator_state.h"
#include "sluice/proto/checkpoint.pb.h"

namespace sluice {

inline constexpr char kReplayKey[] = "replay";

class ReplayIterator : public IteratorBase {
 public:
  ReplayIterator(std::unique_ptr<IteratorBase> input, std::vector<Element> replay)
      : input_(std::move(input)), replay_(replay.begin(), replay.end()) {}

  absl::Status GetNext(Element* element, bool* end) override {
    if (!replay_.empty()) {
      *element = std::move(replay_.front());
      replay_.pop_front();
      *end = false;
    } else if (absl::Status s = input_->GetNext(element, end); !s.ok()) {
      return s;
    }
    if (record_ != nullptr && !*end) record_->push_back(*element);
    return absl::OkStatus();
  }
  // `ahead` (taken from this iterator but not handed on), the elements
  // still to replay, and the pipeline's state.
  absl::Status SaveWith(const std::vector<Element>& ahead, proto::IteratorState* state) {
    (*state->mutable_ints())[kReplayKey] = 1;
    for (const Element& element : ahead) SaveElement(element, state);
    for (const Element& element : replay_) SaveElement(element, state);
    return SaveInput(*input_, state);
  }
  absl::Status Save(proto::IteratorState* state) override { return SaveWith({}, state); }
  void set_record(std::vector<Element>* record) { record_ = record; }

 private:
  const std::unique_ptr<IteratorBase> input_;
  std::deque<Element> replay_;
  std::vector<Element>* record_ = nullptr;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_REPLAY_ITERATOR_H_
