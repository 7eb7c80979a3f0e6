// Helpers shared by the journal's tests (journal_test.cc,
// journal_sync_test.cc, journal_compaction_test.cc): updates that name a
// worker, the addresses a recovery read back, and a work dir's files.
#ifndef SLUICE_TESTS_TESTING_JOURNAL_TEST_UTIL_H_
#define SLUICE_TESTS_TESTING_JOURNAL_TEST_UTIL_H_

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "dispatcher/journal.h"

namespace sluice::dispatcher {

inline proto::Update WorkerUpdate(const std::string& address) {
  proto::Update update;
  update.mutable_register_worker()->set_address(address);
  return update;
}

// Addresses of the RegisterWorker updates recovered, in order.
inline std::vector<std::string> Addresses(const Journal::Recovered& recovered) {
  std::vector<std::string> addresses;
  for (const auto& record : recovered.updates) addresses.push_back(record.update.register_worker().address());
  return addresses;
}

// The names of the files in `dir`.
inline std::set<std::string> Files(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

}  // namespace sluice::dispatcher

#endif  // SLUICE_TESTS_TESTING_JOURNAL_TEST_UTIL_H_
