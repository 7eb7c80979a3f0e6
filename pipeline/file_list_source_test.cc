#include "pipeline/file_list_source.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace sluice {
namespace {

// Files of the given sizes, read ahead `depth` at a time; records which
// were read.
class SizedFiles : public FileListDataset {
 public:
  SizedFiles(std::vector<uint64_t> sizes, int64_t depth)
      : FileListDataset(static_cast<int64_t>(sizes.size()), /*shuffle=*/false, std::nullopt, Spec()),
        sizes_(std::move(sizes)),
        depth_(depth) {}
  std::string DebugName() const override { return "sized_files"; }
  std::set<int64_t> Read() const {
    absl::MutexLock lock(&mu_);
    return read_;
  }

 protected:
  absl::StatusOr<Element> FileElement(int64_t index) const override {
    absl::MutexLock lock(&mu_);
    read_.insert(index);
    return Element({Tensor::Scalar<int64_t>(index)});
  }
  int64_t ReadAheadFiles() const override { return depth_; }
  uint64_t FileBytes(int64_t index) const override { return sizes_[index]; }

 private:
  static ElementSpec Spec() {
    ElementSpec spec;
    spec.components = {{PartialShape::Known({}), DType::kInt64}};
    return spec;
  }

  const std::vector<uint64_t> sizes_;
  const int64_t depth_;
  mutable absl::Mutex mu_;
  mutable std::set<int64_t> read_ ABSL_GUARDED_BY(mu_);
};

// The files read once the first element was taken and every read ahead
// had ended (the iterator waits for them when it goes): the first, read
// where it is taken, and those after it read ahead.
std::set<int64_t> ReadAfterFirst(const std::vector<uint64_t>& sizes, int64_t depth) {
  SizedFiles files(sizes, depth);
  {
    absl::StatusOr<std::unique_ptr<IteratorBase>> it = files.MakeIterator(IteratorContext{});
    REQUIRE(it.ok());
    Element element;
    bool end = false;
    REQUIRE((*it)->GetNext(&element, &end).ok());
    REQUIRE_FALSE(end);
    CHECK(*element.components[0].data<int64_t>() == 0);
  }
  return files.Read();
}

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST_CASE("file list: files read ahead hold at most kReadAheadBytes, and always the next one",
          "[file_list][io]") {
  // Small objects: the count is the bound.
  CHECK(ReadAfterFirst(std::vector<uint64_t>(20, 100000), 8) == std::set<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  // 30 MiB each: two fit in 64 MiB ahead, a third would not.
  CHECK(ReadAfterFirst(std::vector<uint64_t>(20, 30 * kMiB), 8) == std::set<int64_t>{0, 1, 2});
  // Larger than the bound: one at a time, never none.
  CHECK(ReadAfterFirst(std::vector<uint64_t>(5, 200 * kMiB), 8) == std::set<int64_t>{0, 1});
  // Mixed sizes are counted one by one, not at their mean: a run of large
  // objects behind small ones waits for room, in order (at their mean,
  // 13 MiB, all five would have gone ahead).
  CHECK(ReadAfterFirst({1000, 1000, 40 * kMiB, 40 * kMiB, 1000, 1000}, 8) == std::set<int64_t>{0, 1, 2});
  // Sizes unknown (local files report none): the count alone.
  CHECK(ReadAfterFirst(std::vector<uint64_t>(10, 0), 4) == std::set<int64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("file list: every file is read once in order, under the byte bound", "[file_list][io]") {
  SizedFiles files({50 * kMiB, 1000, 50 * kMiB, 30 * kMiB, 1000, 100 * kMiB, 1000}, 4);
  absl::StatusOr<std::unique_ptr<IteratorBase>> it = files.MakeIterator(IteratorContext{});
  REQUIRE(it.ok());
  std::vector<int64_t> values;
  while (true) {
    Element element;
    bool end = false;
    REQUIRE((*it)->GetNext(&element, &end).ok());
    if (end) break;
    values.push_back(*element.components[0].data<int64_t>());
  }
  CHECK(values == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6});
}

}  // namespace
}  // namespace sluice
