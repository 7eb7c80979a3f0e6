// Reading int64 values from an Iterator in the integration tests, with
// Catch2 checks: each step's status is shown when it fails.
#ifndef SLUICE_TESTS_INTEGRATION_READ_HELPERS_H_
#define SLUICE_TESTS_INTEGRATION_READ_HELPERS_H_

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/dataset_internal.h"
#include "sluice/dataset.h"
#include "sluice/iterator.h"
#include "tests/testing/test_util.h"

namespace sluice::testing {

// Up to `count` values from `iterator` (all, for -1), appended to `values`.
inline void Take(Iterator& iterator, int64_t count, std::vector<int64_t>* values) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int64_t i = 0; count < 0 || i < count; ++i) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    absl::StatusOr<std::optional<Element>> element = iterator.GetNextAsOptional();
    INFO(element.status().ToString());
    REQUIRE(element.ok());
    if (!element->has_value()) return;
    values->push_back((*element)->components.at(0).data<int64_t>()[0]);
  }
}

// The lines a text_line read returns (at most 1000), or its error.
inline absl::Status ReadLines(const Dataset& dataset, std::vector<std::string>* lines) {
  absl::StatusOr<DatasetPtr> built = internal::BuildPipeline(dataset);
  if (!built.ok()) return built.status();
  absl::StatusOr<std::unique_ptr<IteratorBase>> iterator = (*built)->MakeIterator(IteratorContext{});
  if (!iterator.ok()) return iterator.status();
  for (int i = 0; i < 1000; ++i) {
    Element element;
    bool end = false;
    if (absl::Status status = (*iterator)->GetNext(&element, &end); !status.ok() || end) return status;
    lines->push_back(element.components.at(0).data<std::string>()[0]);
  }
  return absl::OutOfRangeError("more than 1000 lines");
}

// Each value of 0..epoch-1 exactly `times` times, and nothing else.
inline void CheckEachValueTimes(const std::vector<int64_t>& values, int64_t epoch, int times) {
  std::map<int64_t, int> seen;
  for (int64_t v : values) ++seen[v];
  int64_t missing = 0, off = 0;
  for (int64_t v = 0; v < epoch; ++v) {
    missing += !seen.contains(v);
    off += seen.contains(v) && seen[v] != times;
  }
  INFO("values missing: " << missing << ", seen other than " << times << " times: " << off);
  CHECK(values.size() == static_cast<size_t>(epoch * times));
  CHECK(missing == 0);
  CHECK(off == 0);
}

// Reads `dataset` to its end, calling `at(count)` after each element, where
// a test breaks things mid-read, and with `pause_every` > 0 sleeping 2 ms
// after each that many, so that what it does lands while the read goes
// on; how often each value came.
inline std::map<int64_t, int> ReadCounts(const Dataset& dataset, const std::function<void(int64_t)>& at,
                                         int64_t pause_every = 0) {
  std::unique_ptr<IteratorBase> iterator = MustIterate(MustBuild(dataset));
  std::map<int64_t, int> counts;
  int64_t read = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (true) {
    Element element;
    bool end = false;
    absl::Status status = iterator->GetNext(&element, &end);
    INFO(status.ToString());
    REQUIRE(status.ok());
    if (end) break;
    ++counts[element.components.at(0).data<int64_t>()[0]];
    at(++read);
    if (pause_every > 0 && read % pause_every == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    REQUIRE(std::chrono::steady_clock::now() < give_up);
  }
  return counts;
}

inline Iterator MakeOrFail(const Dataset& dataset) {
  absl::StatusOr<Iterator> iterator = dataset.MakeIterator();
  INFO(iterator.status().ToString());
  REQUIRE(iterator.ok());
  return *std::move(iterator);
}

// An iterator of a fresh copy of `dataset`, as another trainer process
// would make: its first iterator reads repetition 0 of the job, where a
// second iterator of `dataset` itself would read the next repetition.
inline Iterator MakeConsumerOrFail(const Dataset& dataset) {
  absl::StatusOr<Dataset> own = Dataset::Deserialize(dataset.Serialize());
  REQUIRE(own.ok());
  return MakeOrFail(*own);
}

inline Iterator RestoreOrFail(const Dataset& dataset, const std::string& state, RestoreOptions options = {}) {
  absl::StatusOr<Iterator> iterator = dataset.MakeIterator(state, options);
  INFO(iterator.status().ToString());
  REQUIRE(iterator.ok());
  return *std::move(iterator);
}

inline std::string SaveOrFail(Iterator& iterator) {
  absl::StatusOr<std::string> state = iterator.Save();
  INFO(state.status().ToString());
  REQUIRE(state.ok());
  return *std::move(state);
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_INTEGRATION_READ_HELPERS_H_
