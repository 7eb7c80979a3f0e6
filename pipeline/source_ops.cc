// Sources that need no files: range, from_tensors, from_tensor_slices,
// list_files (which only lists names) and zip.
#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "pipeline/batch_util.h"
#include "pipeline/file_list_source.h"
#include "pipeline/io/object_client.h"
#include "pipeline/io/object_url.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/random.h"
#include "pipeline/sandbox.h"
#include "pipeline/split_provider.h"

namespace sluice {
namespace {

class RangeDataset : public DatasetBase {
 public:
  RangeDataset(int64_t start, int64_t stop, int64_t step) : start_(start), stop_(stop), step_(step) {
    spec_.components.push_back({PartialShape::Known({}), DType::kInt64});
  }

  const ElementSpec& element_spec() const override { return spec_; }
  // In unsigned arithmetic, which cannot overflow between INT64_MIN and
  // INT64_MAX; a count past INT64_MAX is reported as INT64_MAX.
  int64_t Cardinality() const override {
    const bool ascending = step_ > 0;
    if (ascending ? stop_ <= start_ : stop_ >= start_) return 0;
    const uint64_t span = ascending ? static_cast<uint64_t>(stop_) - static_cast<uint64_t>(start_)
                                    : static_cast<uint64_t>(start_) - static_cast<uint64_t>(stop_);
    const uint64_t stride =
        ascending ? static_cast<uint64_t>(step_) : uint64_t{0} - static_cast<uint64_t>(step_);
    const uint64_t count = (span - 1) / stride + 1;
    return count > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(count);
  }

  int64_t ValueAt(int64_t position) const {
    return static_cast<int64_t>(static_cast<uint64_t>(start_) +
                                static_cast<uint64_t>(position) * static_cast<uint64_t>(step_));
  }
  std::string DebugName() const override { return "range"; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return std::make_unique<Iterator>(this, context.split_provider);
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const RangeDataset* dataset, SplitProvider* provider)
        : dataset_(dataset), positions_(dataset->Cardinality(), provider) {}
    absl::Status GetNext(Element* element, bool* end) override {
      int64_t position = 0;
      if (absl::Status status = positions_.Next(&position, end); !status.ok() || *end) return status;
      *element = Element::Of(Tensor::Scalar<int64_t>(dataset_->ValueAt(position)));
      return absl::OkStatus();
    }

    absl::Status GetNextBatch(int64_t max_rows, Element* batch, int64_t* rows, bool* end) override {
      Tensor values = Tensor::Uninitialized(DType::kInt64, {max_rows});
      int64_t* out = values.mutable_data<int64_t>();
      *rows = 0;
      while (*rows < max_rows) {
        int64_t begin = 0;
        int64_t count = 0;
        bool no_more = false;
        if (absl::Status status = positions_.NextRun(max_rows - *rows, &begin, &count, &no_more);
            !status.ok()) {
          return status;
        }
        if (no_more) break;
        // By induction rather than a multiply per value, so it vectorizes;
        // unsigned, so it wraps exactly as ValueAt does.
        uint64_t value = static_cast<uint64_t>(dataset_->ValueAt(begin));
        const auto step = static_cast<uint64_t>(dataset_->step_);
        int64_t* run = out + *rows;
        for (int64_t i = 0; i < count; ++i, value += step) run[i] = static_cast<int64_t>(value);
        *rows += count;
      }
      *end = *rows == 0;
      if (*rows < max_rows) values = values.Slice(0, *rows);
      *batch = Element::Of(std::move(values));
      return absl::OkStatus();
    }

    absl::Status Save(proto::IteratorState* state) override { return positions_.Save(state); }
    absl::Status Restore(const proto::IteratorState& state) override { return positions_.Restore(state); }

   private:
    const RangeDataset* const dataset_;
    SourcePositions positions_;
  };

  const int64_t start_, stop_, step_;
  ElementSpec spec_;
};

absl::StatusOr<Element> ElementFromComponents(
    const google::protobuf::RepeatedPtrField<proto::TensorProto>& components,
    const google::protobuf::RepeatedPtrField<std::string>& names, const char* op) {
  proto::ElementProto element_proto;
  *element_proto.mutable_components() = components;
  *element_proto.mutable_names() = names;
  if (components.empty()) return absl::InvalidArgumentError(absl::StrCat(op, ": needs at least one tensor"));
  absl::StatusOr<Element> element = ElementFromProto(element_proto);
  if (!element.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", element.status().message()));
  }
  return element;
}

class FromTensorsDataset : public DatasetBase {
 public:
  explicit FromTensorsDataset(Element element)
      : element_(std::move(element)), spec_(ElementSpec::Of(element_)) {}
  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override { return 1; }
  std::string DebugName() const override { return "from_tensors"; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext&) const override {
    return std::make_unique<Iterator>(this);
  }

 private:
  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const FromTensorsDataset* dataset) : dataset_(dataset) {}
    absl::Status GetNext(Element* element, bool* end) override {
      *end = done_;
      if (!done_) *element = dataset_->element_;
      done_ = true;
      return absl::OkStatus();
    }

    absl::Status Save(proto::IteratorState* state) override {
      (*state->mutable_ints())["done"] = done_ ? 1 : 0;
      return absl::OkStatus();
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      absl::StatusOr<int64_t> done = StateInt(state, "done");
      if (!done.ok()) return done.status();
      done_ = *done != 0;
      return absl::OkStatus();
    }

   private:
    const FromTensorsDataset* const dataset_;
    bool done_ = false;
  };

  const Element element_;
  const ElementSpec spec_;
};

class FromTensorSlicesDataset : public DatasetBase {
 public:
  FromTensorSlicesDataset(Element tensors, int64_t rows) : tensors_(std::move(tensors)), rows_(rows) {
    for (const Tensor& t : tensors_.components) {
      spec_.components.push_back(
          {PartialShape::Known(Shape(t.shape().begin() + 1, t.shape().end())), t.dtype()});
    }
    if (tensors_.named()) spec_.names = *tensors_.names;
  }
  const ElementSpec& element_spec() const override { return spec_; }
  int64_t Cardinality() const override { return rows_; }
  std::string DebugName() const override { return "from_tensor_slices"; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext& context) const override {
    return std::make_unique<Iterator>(this, context.split_provider);
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const FromTensorSlicesDataset* dataset, SplitProvider* provider)
        : dataset_(dataset), positions_(dataset->rows_, provider) {}
    absl::Status GetNext(Element* element, bool* end) override {
      int64_t row = 0;
      if (absl::Status status = positions_.Next(&row, end); !status.ok() || *end) return status;
      Element out;
      out.names = dataset_->tensors_.names;
      for (const Tensor& t : dataset_->tensors_.components) out.components.push_back(t.SubTensor(row));
      *element = std::move(out);
      return absl::OkStatus();
    }

    // Whole runs of rows are slices of the source tensors: no copy.
    absl::Status GetNextBatch(int64_t max_rows, Element* batch, int64_t* rows, bool* end) override {
      std::vector<Element> runs;
      *rows = 0;
      while (*rows < max_rows) {
        int64_t begin = 0;
        int64_t count = 0;
        bool no_more = false;
        if (absl::Status status = positions_.NextRun(max_rows - *rows, &begin, &count, &no_more);
            !status.ok()) {
          return status;
        }
        if (no_more) break;
        runs.push_back(SliceBatch(dataset_->tensors_, begin, begin + count));
        *rows += count;
      }
      *end = *rows == 0;
      if (*end) return absl::OkStatus();
      absl::StatusOr<Element> stacked = ConcatBatches(runs);
      if (!stacked.ok()) return stacked.status();
      *batch = *std::move(stacked);
      return absl::OkStatus();
    }

    absl::Status Save(proto::IteratorState* state) override { return positions_.Save(state); }
    absl::Status Restore(const proto::IteratorState& state) override { return positions_.Restore(state); }

   private:
    const FromTensorSlicesDataset* const dataset_;
    SourcePositions positions_;
  };

  const Element tensors_;
  const int64_t rows_;
  ElementSpec spec_;
};

class ListFilesDataset : public FileListDataset {
 public:
  ListFilesDataset(std::vector<std::string> files, bool shuffle, std::optional<int64_t> seed,
                   std::string object_listing)
      : FileListDataset(static_cast<int64_t>(files.size()), shuffle, seed, Spec()),
        files_(std::move(files)),
        object_listing_(std::move(object_listing)) {}
  std::string DebugName() const override { return "list_files"; }
  std::string ObjectListingDigest() const override { return object_listing_; }

 private:
  static ElementSpec Spec() {
    ElementSpec spec;
    spec.components.push_back({PartialShape::Known({}), DType::kString});
    return spec;
  }
  absl::StatusOr<Element> FileElement(int64_t index) const override {
    return Element::Of(Tensor::StringScalar(files_[index]));
  }

  const std::vector<std::string> files_;
  const std::string object_listing_;
};

class ZipDataset : public DatasetBase {
 public:
  ZipDataset(std::vector<DatasetPtr> inputs, ElementSpec spec)
      : inputs_(std::move(inputs)), spec_(std::move(spec)) {
    if (!spec_.names.empty()) names_ = MakeNames(spec_.names);
  }
  const ElementSpec& element_spec() const override { return spec_; }
  // The shortest input, as tf.data: any unknown input makes it unknown.
  int64_t Cardinality() const override {
    int64_t result = kInfiniteCardinality;
    for (const DatasetPtr& input : inputs_) {
      const int64_t c = input->Cardinality();
      if (c == kUnknownCardinality) return kUnknownCardinality;
      if (c != kInfiniteCardinality) result = result == kInfiniteCardinality ? c : std::min(result, c);
    }
    return result;
  }
  std::string DebugName() const override { return "zip"; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext&) const override {
    std::vector<std::unique_ptr<IteratorBase>> iterators;
    for (const DatasetPtr& input : inputs_) {
      // Sub-pipelines never read splits: zip is not splittable.
      absl::StatusOr<std::unique_ptr<IteratorBase>> it = input->MakeIterator(IteratorContext{});
      if (!it.ok()) return it.status();
      iterators.push_back(*std::move(it));
    }
    return std::make_unique<Iterator>(this, std::move(iterators));
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const ZipDataset* dataset, std::vector<std::unique_ptr<IteratorBase>> inputs)
        : dataset_(dataset), inputs_(std::move(inputs)) {}
    absl::Status GetNext(Element* element, bool* end) override {
      Element out;
      out.names = dataset_->names_;
      for (auto& input : inputs_) {
        Element part;
        if (absl::Status status = input->GetNext(&part, end); !status.ok() || *end) return status;
        for (Tensor& t : part.components) out.components.push_back(std::move(t));
      }
      *element = std::move(out);
      return absl::OkStatus();
    }
    absl::Status Save(proto::IteratorState* state) override {
      for (auto& input : inputs_) {
        if (absl::Status s = SaveInput(*input, state); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    absl::Status Restore(const proto::IteratorState& state) override {
      if (state.inputs_size() != static_cast<int>(inputs_.size())) {
        return MalformedState(
            absl::StrCat("zip has ", inputs_.size(), " inputs, the state ", state.inputs_size()));
      }
      for (size_t i = 0; i < inputs_.size(); ++i) {
        if (absl::Status s = RestoreInput(*inputs_[i], state, static_cast<int>(i)); !s.ok()) return s;
      }
      return absl::OkStatus();
    }

   private:
    const ZipDataset* const dataset_;
    std::vector<std::unique_ptr<IteratorBase>> inputs_;
  };

  const std::vector<DatasetPtr> inputs_;
  const ElementSpec spec_;
  ComponentNames names_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeRangeDataset(const proto::RangeOp& op) {
  if (op.step() == 0) return absl::InvalidArgumentError("range: step must not be 0");
  return std::make_shared<RangeDataset>(op.start(), op.stop(), op.step());
}

absl::StatusOr<DatasetPtr> MakeFromTensorsDataset(const proto::FromTensorsOp& op) {
  absl::StatusOr<Element> element = ElementFromComponents(op.components(), op.names(), "from_tensors");
  if (!element.ok()) return element.status();
  return std::make_shared<FromTensorsDataset>(*std::move(element));
}

absl::StatusOr<DatasetPtr> MakeFromTensorSlicesDataset(const proto::FromTensorSlicesOp& op,
                                                       const Element* input) {
  absl::StatusOr<Element> tensors =
      op.components().empty() && input != nullptr
          ? *input
          : ElementFromComponents(op.components(), op.names(), "from_tensor_slices");
  if (!tensors.ok()) return tensors.status();
  int64_t rows = -1;
  for (size_t c = 0; c < tensors->size(); ++c) {
    const Tensor& t = tensors->components[c];
    if (t.rank() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("from_tensor_slices: component ", c, " is a scalar; it needs a dimension to slice"));
    }
    if (rows >= 0 && t.dim(0) != rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "from_tensor_slices: components have different first dimensions, ", rows, " and ", t.dim(0)));
    }
    rows = t.dim(0);
  }
  return std::make_shared<FromTensorSlicesDataset>(*std::move(tensors), rows);
}

absl::StatusOr<DatasetPtr> MakeListFilesDataset(const proto::ListFilesOp& op) {
  if (op.pattern().empty()) return absl::InvalidArgumentError("list_files: missing 'pattern'");
  std::set<std::string> matched;                 // sorted and deduplicated, as tf's
  std::map<std::string, uint64_t> object_sizes;  // the matched objects' sizes
  for (const std::string& pattern : op.pattern()) {
    // The directory before the first wildcard must be readable before
    // anything under it is listed.
    const std::string literal = pattern.substr(0, pattern.find_first_of("*?["));
    const size_t slash = literal.rfind('/');
    const std::string listed = slash == std::string::npos ? "." : literal.substr(0, slash + 1);
    if (absl::Status allowed = CheckReadablePath(listed); !allowed.ok()) return allowed;
    if (io::HasUrlScheme(pattern)) {
      // A glob over the listing of the prefix before the first wildcard;
      // '*' and '?' stop at '/', as a local glob's do.
      absl::StatusOr<std::vector<io::ObjectInfo>> objects = io::ListObjects(literal);
      if (!objects.ok()) {
        return absl::Status(objects.status().code(),
                            absl::StrCat("list_files: ", objects.status().message()));
      }
      for (const io::ObjectInfo& object : *objects) {
        if (fnmatch(pattern.c_str(), object.url.c_str(), FNM_PATHNAME) == 0) {
          matched.insert(object.url);
          object_sizes[object.url] = object.size;
        }
      }
      continue;
    }
    glob_t result{};
    const int rc = glob(pattern.c_str(), GLOB_ERR, nullptr, &result);
    if (rc == 0) {
      for (size_t i = 0; i < result.gl_pathc; ++i) matched.insert(result.gl_pathv[i]);
    }
    globfree(&result);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      return absl::InvalidArgumentError(absl::StrCat("list_files: cannot read pattern '", pattern, "'"));
    }
  }
  for (const std::string& path : matched) {
    if (absl::Status allowed = CheckReadablePath(path); !allowed.ok()) return allowed;
  }
  if (matched.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("list_files: no files match '", op.pattern(0), "'",
                     op.pattern_size() > 1 ? absl::StrCat(" or ", op.pattern_size() - 1, " more") : ""));
  }
  std::optional<int64_t> seed;
  if (op.has_seed()) seed = op.seed();
  std::vector<io::ObjectInfo> objects;
  for (const auto& [url, size] : object_sizes) objects.push_back({url, size, ""});
  return std::make_shared<ListFilesDataset>(std::vector<std::string>(matched.begin(), matched.end()),
                                            op.shuffle(), seed, io::ListingDigest(objects));
}

absl::StatusOr<DatasetPtr> MakeZipDataset(std::vector<DatasetPtr> inputs) {
  if (inputs.size() < 2) return absl::InvalidArgumentError("zip: needs at least two datasets");
  ElementSpec spec;
  bool all_named = true;
  for (const DatasetPtr& input : inputs) all_named = all_named && !input->element_spec().names.empty();
  std::set<std::string> seen;
  for (const DatasetPtr& input : inputs) {
    const ElementSpec& part = input->element_spec();
    spec.components.insert(spec.components.end(), part.components.begin(), part.components.end());
    if (!all_named) continue;
    for (const std::string& name : part.names) {
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat("zip: component name '", name, "' appears twice"));
      }
      spec.names.push_back(name);
    }
  }
  return std::make_shared<ZipDataset>(std::move(inputs), std::move(spec));
}

}  // namespace sluice
