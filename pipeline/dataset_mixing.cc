// sample_from_datasets and choose_from_datasets: each element comes from
// one of several input pipelines, picked by seeded weighted draws or by the
// indices a choice pipeline yields (tf.data's directed interleave).
//
// A draw depends only on the seed and its number, so a checkpoint of
// sample_from_datasets is the draw count, the seed and the inputs' states
// (and, with a weights_file, the weights read from it: a restore reads the
// file again and goes on with what it says then).
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "pipeline/io/readable_file.h"
#include "pipeline/iterator_state.h"
#include "pipeline/ops.h"
#include "pipeline/random.h"
#include "pipeline/sandbox.h"
#include "spdlog/spdlog.h"

namespace sluice {
namespace {

// How the next input is picked: weighted draws (sample_from_datasets) or a
// choice dataset (choose_from_datasets).
struct Selector {
  std::vector<double> weights;  // one per input, >= 0, when sampling
  std::string weights_file;     // when set, the weights come from it
  uint64_t seed = 0;
  DatasetPtr choice;  // when choosing
};

constexpr char kSample[] = "sample_from_datasets";
// A weights file holds a few numbers; past this it is something else.
constexpr size_t kMaxWeightsFileBytes = size_t{1} << 20;

// InvalidArgument unless `weights` are `count` finite values >= 0 with a
// positive sum; `what` names where they came from, and `where` (empty or
// ending in ": ") starts the messages about their values.
absl::Status CheckWeights(const std::vector<double>& weights, size_t count, const std::string& what,
                          const std::string& where) {
  if (weights.size() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(kSample, ": ", what, " has ", weights.size(), " values for ", count, " datasets"));
  }
  double total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(kSample, ": ", where, "weight ", i + 1, " is ",
                                                     weights[i], "; weights must be finite and >= 0"));
    }
    total += weights[i];
  }
  if (total <= 0)
    return absl::InvalidArgumentError(absl::StrCat(kSample, ": ", where, "the weights sum to 0"));
  return absl::OkStatus();
}

// The weights in `path`: numbers separated by spaces, commas or new lines.
absl::StatusOr<std::vector<double>> ReadWeightsFile(const std::string& path, size_t count) {
  const std::string what = absl::StrCat("weights_file '", path, "'");
  absl::StatusOr<std::string> text = io::ReadWholeFile(path, kSample, kMaxWeightsFileBytes);
  if (!text.ok()) return text.status();
  std::vector<double> weights;
  for (absl::string_view token : absl::StrSplit(*text, absl::ByAnyChar(" ,\t\r\n"), absl::SkipEmpty())) {
    double value = 0;
    // Which value, never its text: an error quotes nothing of a file.
    if (!absl::SimpleAtod(token, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          kSample, ": ", what, ": value ", weights.size() + 1,
          " is not a number (a weights file holds numbers separated by spaces, commas or new lines)"));
    }
    weights.push_back(value);
  }
  if (absl::Status status = CheckWeights(weights, count, what, what + ": "); !status.ok()) return status;
  return weights;
}

class MixDataset : public DatasetBase {
 public:
  MixDataset(std::string name, std::vector<DatasetPtr> inputs, ElementSpec spec, Selector selector,
             bool stop_on_empty_dataset)
      : name_(std::move(name)),
        inputs_(std::move(inputs)),
        spec_(std::move(spec)),
        selector_(std::move(selector)),
        stop_on_empty_(stop_on_empty_dataset) {}

  const ElementSpec& element_spec() const override { return spec_; }
  // Infinite when every input that can be picked is, and so is the choice
  // dataset; else unknown (the picks decide).
  int64_t Cardinality() const override {
    if (selector_.choice != nullptr) {
      const int64_t choices = selector_.choice->Cardinality();
      if (choices == 0) return 0;
      if (choices != kInfiniteCardinality) return kUnknownCardinality;
    }
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (Pickable(i) && inputs_[i]->Cardinality() != kInfiniteCardinality) return kUnknownCardinality;
    }
    return kInfiniteCardinality;
  }
  std::string DebugName() const override { return name_; }

  absl::StatusOr<std::unique_ptr<IteratorBase>> MakeIterator(const IteratorContext&) const override {
    // Sub-pipelines read whole: neither op is splittable.
    std::vector<std::unique_ptr<IteratorBase>> inputs(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!Pickable(i)) continue;
      absl::StatusOr<std::unique_ptr<IteratorBase>> it = inputs_[i]->MakeIterator(IteratorContext{});
      if (!it.ok()) return it.status();
      inputs[i] = *std::move(it);
    }
    std::vector<double> weights = selector_.weights;
    if (!selector_.weights_file.empty()) {
      absl::StatusOr<std::vector<double>> read = ReadWeightsFile(selector_.weights_file, inputs_.size());
      if (!read.ok()) return read.status();
      weights = *std::move(read);
    }
    std::unique_ptr<IteratorBase> choice;
    if (selector_.choice != nullptr) {
      absl::StatusOr<std::unique_ptr<IteratorBase>> it = selector_.choice->MakeIterator(IteratorContext{});
      if (!it.ok()) return it.status();
      choice = *std::move(it);
    }
    return std::make_unique<Iterator>(this, std::move(inputs), std::move(choice), std::move(weights));
  }

 private:
  // tf.data leaves out the inputs of weight 0 altogether; a weights file
  // may give them weight later.
  bool Pickable(size_t i) const {
    return selector_.choice != nullptr || !selector_.weights_file.empty() || selector_.weights[i] > 0;
  }

  class Iterator : public IteratorBase {
   public:
    Iterator(const MixDataset* dataset, std::vector<std::unique_ptr<IteratorBase>> inputs,
             std::unique_ptr<IteratorBase> choice, std::vector<double> weights)
        : dataset_(dataset),
          inputs_(std::move(inputs)),
          choice_(std::move(choice)),
          weights_(std::move(weights)) {
      for (const auto& input : inputs_) active_ += input != nullptr ? 1 : 0;
    }

    absl::Status GetNext(Element* element, bool* end) override {
      while (!done_ && active_ > 0) {
        int64_t index = 0;
        bool choices_end = false;
        if (absl::Status s = Select(&index, &choices_end); !s.ok()) return s;
        if (choices_end || index < 0) {  // no choice left, or only inputs of weight 0
          done_ = true;
          break;
        }
        std::unique_ptr<IteratorBase>& input = inputs_[index];
        // choose_from_datasets may name an input that has ended; tf.data
        // goes on with the next choice.
        if (input == nullptr) continue;
        bool input_end = false;
        if (absl::Status s = input->GetNext(element, &input_end); !s.ok()) return s;
        if (!input_end) {
          element->names = names_;
          *end = false;
          return absl::OkStatus();
        }
        if (dataset_->stop_on_empty_) done_ = true;
        input.reset();
        --active_;
      }
      *end = true;
      return absl::OkStatus();
    }

    // Per input: whether it is still open and its state; then the draw
    // count and seed, or the choice pipeline's state.
    absl::Status Save(proto::IteratorState* state) override {
      for (const auto& input : inputs_) {
        proto::IteratorState* slot = state->add_inputs();
        (*slot->mutable_ints())["open"] = input != nullptr ? 1 : 0;
        if (input == nullptr) continue;
        if (absl::Status s = SaveInput(*input, slot); !s.ok()) return s;
      }
      (*state->mutable_ints())["done"] = done_ ? 1 : 0;
      (*state->mutable_ints())["draws"] = static_cast<int64_t>(draws_);
      (*state->mutable_ints())["seed"] = static_cast<int64_t>(seed_);
      if (!dataset_->selector_.weights_file.empty())
        (*state->mutable_blobs())["weights"] = WeightsText(weights_);
      return choice_ != nullptr ? SaveInput(*choice_, state) : absl::OkStatus();
    }

    absl::Status Restore(const proto::IteratorState& state) override {
      const int slots = static_cast<int>(inputs_.size());
      if (state.inputs_size() != slots + (choice_ != nullptr ? 1 : 0)) {
        return MalformedState(absl::StrCat(dataset_->name_, " has ", slots, " inputs, the state ",
                                           state.inputs_size() - (choice_ != nullptr ? 1 : 0)));
      }
      absl::StatusOr<int64_t> done = StateInt(state, "done");
      absl::StatusOr<int64_t> draws = StateInt(state, "draws");
      absl::StatusOr<int64_t> seed = StateInt(state, "seed");
      if (!done.ok()) return done.status();
      if (!draws.ok()) return draws.status();
      if (!seed.ok()) return seed.status();
      for (int i = 0; i < slots; ++i) {
        absl::StatusOr<int64_t> open = StateInt(state.inputs(i), "open");
        if (!open.ok()) return open.status();
        if (*open == 0) {
          if (inputs_[i] != nullptr) --active_;
          inputs_[i].reset();
          continue;
        }
        if (inputs_[i] == nullptr)
          return MalformedState(absl::StrCat("input ", i + 1, " of weight 0 is open"));
        if (absl::Status s = RestoreInput(*inputs_[i], state.inputs(i)); !s.ok()) return s;
      }
      done_ = *done != 0;
      draws_ = static_cast<uint64_t>(*draws);
      seed_ = static_cast<uint64_t>(*seed);
      if (absl::Status s = RestoreWeights(state); !s.ok()) return s;
      return choice_ != nullptr ? RestoreInput(*choice_, state, slots) : absl::OkStatus();
    }

   private:
    static std::string WeightsText(const std::vector<double>& weights) {
      return absl::StrCat("[", absl::StrJoin(weights, ", "), "]");
    }

    // With a weights file: its weights of now, which may differ from those
    // the checkpoint was saved with (the point of the file); said in the
    // log when they do.
    absl::Status RestoreWeights(const proto::IteratorState& state) {
      const std::string& path = dataset_->selector_.weights_file;
      if (path.empty()) return absl::OkStatus();
      const auto saved = state.blobs().find("weights");
      if (saved == state.blobs().end())
        return MalformedState("the weights of sample_from_datasets are missing");
      absl::StatusOr<std::vector<double>> now = ReadWeightsFile(path, inputs_.size());
      if (!now.ok()) return now.status();
      weights_ = *std::move(now);
      if (WeightsText(weights_) != saved->second) {
        spdlog::info("{}: restored with the weights {} of '{}'; the checkpoint was saved with {}", kSample,
                     WeightsText(weights_), path, saved->second);
      }
      return absl::OkStatus();
    }

    // The next input's index (-1 when every open input has weight 0), or
    // *choices_end when the choice pipeline has ended.
    absl::Status Select(int64_t* index, bool* choices_end) {
      if (choice_ == nullptr) {
        *index = Draw();
        return absl::OkStatus();
      }
      Element choice;
      if (absl::Status s = choice_->GetNext(&choice, choices_end); !s.ok() || *choices_end) return s;
      const int64_t value = choice.components[0].data<int64_t>()[0];
      if (value < 0 || value >= static_cast<int64_t>(inputs_.size())) {
        return absl::InvalidArgumentError(absl::StrCat(dataset_->name_, ": the choice pipeline yielded ",
                                                       value, ", out of range for ", inputs_.size(),
                                                       " datasets (valid: 0 to ", inputs_.size() - 1, ")"));
      }
      *index = value;
      return absl::OkStatus();
    }

    // A weighted draw among the open inputs: the weights of those that
    // ended are left out, the others' renormalised. -1 when they all have
    // weight 0.
    int64_t Draw() {
      const double u = static_cast<double>(MixSeed(seed_, draws_++) >> 11) * 0x1.0p-53;
      double total = 0;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        if (inputs_[i] != nullptr) total += weights_[i];
      }
      if (total <= 0) return -1;
      const double target = u * total;
      double sum = 0;
      int64_t last = -1;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        if (inputs_[i] == nullptr || weights_[i] <= 0) continue;
        sum += weights_[i];
        last = static_cast<int64_t>(i);
        if (target < sum) return last;
      }
      return last;  // rounding at the top end
    }

    const MixDataset* const dataset_;
    const ComponentNames names_ = MakeNames(dataset_->spec_.names);
    std::vector<std::unique_ptr<IteratorBase>> inputs_;  // null once ended
    std::unique_ptr<IteratorBase> choice_;
    std::vector<double> weights_;  // when sampling
    int64_t active_ = 0;
    bool done_ = false;
    uint64_t seed_ = dataset_->selector_.seed;
    uint64_t draws_ = 0;
  };

  const std::string name_;
  const std::vector<DatasetPtr> inputs_;
  const ElementSpec spec_;
  const Selector selector_;
  const bool stop_on_empty_;
};

// The spec every input's elements fit, or InvalidArgument naming the first
// input that does not fit the ones before it.
absl::StatusOr<ElementSpec> MixedSpec(const std::vector<DatasetPtr>& inputs, const char* op) {
  ElementSpec spec = inputs[0]->element_spec();
  for (size_t i = 1; i < inputs.size(); ++i) {
    absl::StatusOr<ElementSpec> common = CommonElementSpec(spec, inputs[i]->element_spec(), op);
    if (!common.ok()) {
      absl::string_view message = common.status().message();
      absl::ConsumePrefix(&message, absl::StrCat(op, ": "));
      return absl::InvalidArgumentError(absl::StrCat(op, ": dataset ", i + 1, ": ", message));
    }
    spec = *std::move(common);
  }
  return spec;
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeSampleFromDatasetsDataset(std::vector<DatasetPtr> inputs,
                                                         const proto::SampleFromDatasetsOp& op) {
  if (inputs.empty()) return absl::InvalidArgumentError("sample_from_datasets: 'datasets' is empty");
  Selector selector;
  selector.weights_file = op.weights_file();
  if (!selector.weights_file.empty()) {
    if (!op.weights().empty()) {
      return absl::InvalidArgumentError("sample_from_datasets: give 'weights' or 'weights_file', not both");
    }
    // Read now too, so that a wrong file fails the build, not the first read.
    absl::StatusOr<std::vector<double>> read = ReadWeightsFile(selector.weights_file, inputs.size());
    if (!read.ok()) return read.status();
    selector.weights = *std::move(read);
  } else {
    selector.weights.assign(op.weights().begin(), op.weights().end());
    if (selector.weights.empty()) selector.weights.assign(inputs.size(), 1.0);
    if (absl::Status s = CheckWeights(selector.weights, inputs.size(), "'weights'", ""); !s.ok()) return s;
  }
  absl::StatusOr<ElementSpec> spec = MixedSpec(inputs, kSample);
  if (!spec.ok()) return spec.status();
  selector.seed = op.has_seed() ? static_cast<uint64_t>(op.seed()) : RandomSeed();
  return std::make_shared<MixDataset>(kSample, std::move(inputs), *std::move(spec), std::move(selector),
                                      op.stop_on_empty_dataset());
}

absl::StatusOr<DatasetPtr> MakeChooseFromDatasetsDataset(std::vector<DatasetPtr> inputs, DatasetPtr choice,
                                                         const proto::ChooseFromDatasetsOp& op) {
  constexpr const char* kOp = "choose_from_datasets";
  if (inputs.empty()) return absl::InvalidArgumentError("choose_from_datasets: 'datasets' is empty");
  const ElementSpec& choice_spec = choice->element_spec();
  if (choice_spec.components.size() != 1 || choice_spec.components[0].dtype != DType::kInt64 ||
      choice_spec.components[0].shape.unknown_rank || !choice_spec.components[0].shape.dims.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("choose_from_datasets: choice_pipeline must yield int64 scalars; its elements are ",
                     choice_spec.DebugString()));
  }
  absl::StatusOr<ElementSpec> spec = MixedSpec(inputs, kOp);
  if (!spec.ok()) return spec.status();
  Selector selector;
  selector.choice = std::move(choice);
  return std::make_shared<MixDataset>(kOp, std::move(inputs), *std::move(spec), std::move(selector),
                                      op.stop_on_empty_dataset());
}

}  // namespace sluice
