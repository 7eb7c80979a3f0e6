// EmptyAnswerTransport: a fake worker for the read tests that answers every
// GetElements at once with OK and no element, as a worker does for a task
// it does not know (not yet there, or forgotten), and counts the calls.
#ifndef SLUICE_CLIENT_READ_EMPTY_ANSWER_TRANSPORT_H_
#define SLUICE_CLIENT_READ_EMPTY_ANSWER_TRANSPORT_H_

#include <atomic>

#include "client/read/element_transport.h"

namespace sluice::reader {

class EmptyAnswerTransport : public ElementTransport {
 public:
  absl::Status GetElements(const proto::GetElementsRequest&, ElementsResponse*) override {
    calls_.fetch_add(1);
    return absl::OkStatus();
  }
  int calls() const { return calls_.load(); }

 private:
  std::atomic<int> calls_{0};
};

}  // namespace sluice::reader

#endif  // SLUICE_CLIENT_READ_EMPTY_ANSWER_TRANSPORT_H_
