// CapturedWarnings: collects the reader's warnings (client/read/warnings.h) for
// a test's duration, instead of printing them.
#ifndef SLUICE_TESTS_INTEGRATION_CAPTURED_WARNINGS_H_
#define SLUICE_TESTS_INTEGRATION_CAPTURED_WARNINGS_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/read/warnings.h"

namespace sluice::testing {

class CapturedWarnings {
 public:
  CapturedWarnings() {
    previous_ = reader::SetWarningSink([this](const std::string& message) {
      absl::MutexLock lock(&mu_);
      messages_.push_back(message);
    });
  }
  ~CapturedWarnings() { reader::SetWarningSink(previous_); }
  std::vector<std::string> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  std::string joined() {
    std::string all;
    for (const std::string& m : messages()) absl::StrAppend(&all, m, "\n");
    return all;
  }

 private:
  reader::WarningSink previous_;
  absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_INTEGRATION_CAPTURED_WARNINGS_H_
