// tokenize: a string component becomes an int32 vector of SentencePiece
// token ids (docs/design.md says why SentencePiece). The model is the
// operator's file, read through the data roots' checks as any file source's,
// and loaded once per process: every tokenize over the same path shares it.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/file_io.h"
#include "pipeline/function.h"
#include "pipeline/io/readable_file.h"
#include "pipeline/ops.h"
#include "pipeline/sandbox.h"
#include "pipeline/sentencepiece_model.h"

namespace sluice {
namespace {

using Processor = SentencePieceModel;

// A tokenizer model is a few MB; past this it is not one.
constexpr size_t kMaxModelBytes = size_t{1} << 30;

absl::StatusOr<std::shared_ptr<const Processor>> ReadModel(const std::string& path) {
  // A local path or an object URL, under the data roots.
  absl::StatusOr<std::string> bytes = io::ReadWholeFile(path, "tokenize", kMaxModelBytes);
  if (!bytes.ok()) return bytes.status();
  std::string why;
  std::unique_ptr<Processor> processor = Processor::FromBytes(*bytes, &why);
  if (processor == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenize: '", path, "' is not a SentencePiece model: ", why));
  }
  return std::shared_ptr<const Processor>(std::move(processor));
}

// The process's models by path. A failed load is not kept: the operator
// may put the file in place and the next build tries again.
absl::StatusOr<std::shared_ptr<const Processor>> LoadModel(const std::string& path) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* models ABSL_GUARDED_BY(mu) = new std::map<std::string, std::shared_ptr<const Processor>>();
  absl::MutexLock lock(&mu);
  if (auto known = models->find(path); known != models->end()) return known->second;
  absl::StatusOr<std::shared_ptr<const Processor>> model = ReadModel(path);
  if (model.ok()) models->emplace(path, *model);
  return model;
}

// The work of one element, as a function, so that tokenize runs on map's
// threads (num_parallel_calls) in the input's order and saves as map does.
class TokenizeFunction : public ElementFunction {
 public:
  TokenizeFunction(std::shared_ptr<const Processor> model, int component, bool add_bos, bool add_eos)
      : model_(std::move(model)), component_(component), add_bos_(add_bos), add_eos_(add_eos) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    ElementSpec spec = input;
    spec.components[component_] = TensorSpec{PartialShape::Known({kUnknownDim}), DType::kInt32};
    return spec;
  }
  absl::StatusOr<Element> Call(const Element& input) const override { return CallOwned(input); }
  absl::StatusOr<Element> CallOwned(Element element) const override {
    Tensor& text = element.components[component_];
    if (text.dtype() != DType::kString || text.num_elements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenize: component ", component_, " must be a string scalar, got ",
                       DTypeName(text.dtype()), " of shape ", ShapeDebugString(text.shape())));
    }
    std::vector<int> ids;
    if (add_bos_) ids.push_back(model_->bos_id());
    if (std::string why; !model_->Encode(text.values<std::string>()[0], &ids, &why)) {
      return absl::InvalidArgumentError(absl::StrCat("tokenize: ", why));
    }
    if (add_eos_) ids.push_back(model_->eos_id());
    Tensor tokens(DType::kInt32, {static_cast<int64_t>(ids.size())});
    std::copy(ids.begin(), ids.end(), tokens.mutable_data<int32_t>());
    text = std::move(tokens);
    return element;
  }

 private:
  const std::shared_ptr<const Processor> model_;
  const int component_;
  const bool add_bos_;
  const bool add_eos_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeTokenizeDataset(DatasetPtr input, const proto::TokenizeOp& op) {
  if (op.model().empty())
    return absl::InvalidArgumentError("tokenize: missing 'model' (a SentencePiece model file)");
  ElementSpec spec = input->element_spec();
  const auto components = static_cast<int64_t>(spec.components.size());
  if (op.component() < 0 || op.component() >= components) {
    return absl::InvalidArgumentError(absl::StrCat("tokenize: component ", op.component(),
                                                   " is out of range for elements of ", components,
                                                   " components (", spec.DebugString(), ")"));
  }
  TensorSpec& text = spec.components[op.component()];
  if (text.dtype != DType::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenize: component ", op.component(), " must be a string, got ", spec.DebugString()));
  }
  absl::StatusOr<std::shared_ptr<const Processor>> model = LoadModel(op.model());
  if (!model.ok()) return model.status();
  for (const auto& [wanted, id, name] : {std::tuple{op.add_bos(), (*model)->bos_id(), "add_bos"},
                                         std::tuple{op.add_eos(), (*model)->eos_id(), "add_eos"}}) {
    if (wanted && id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenize: ", name, " is set but model '", op.model(), "' has no ",
                       name == std::string("add_bos") ? "<s>" : "</s>", " piece (trained with its id -1)"));
    }
  }
  text = TensorSpec{PartialShape::Known({kUnknownDim}), DType::kInt32};
  auto function = std::make_shared<const TokenizeFunction>(
      *std::move(model), static_cast<int>(op.component()), op.add_bos(), op.add_eos());
  return MakeFunctionMapDataset(std::move(input), std::move(function), std::move(spec), "tokenize",
                                op.num_parallel_calls());
}

}  // namespace sluice
