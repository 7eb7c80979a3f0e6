#include "pipeline/iterator_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"

namespace sluice {
namespace {

constexpr char kCannotSave[] = "cannot save its position yet (issue 20 adds the remaining ops)";

}  // namespace

absl::Status IteratorBase::Save(proto::IteratorState*) { return CannotSave(); }
absl::Status IteratorBase::Restore(const proto::IteratorState&) { return CannotSave(); }

absl::StatusOr<std::string> SavePipelineState(IteratorBase& root, const std::string& fingerprint) {
  proto::PipelineCheckpoint checkpoint;
  checkpoint.set_version(kPipelineCheckpointVersion);
  checkpoint.set_fingerprint(fingerprint);
  if (absl::Status status = root.Save(checkpoint.mutable_root()); !status.ok()) return status;
  return checkpoint.SerializeAsString();
}

absl::StatusOr<proto::PipelineCheckpoint> ParsePipelineCheckpoint(const std::string& bytes,
                                                                  const std::string& fingerprint) {
  proto::PipelineCheckpoint checkpoint;
  if (!checkpoint.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        "the saved iterator state does not parse (not Iterator::Save's bytes?)");
  }
  if (checkpoint.version() != kPipelineCheckpointVersion) {
    return absl::FailedPreconditionError(absl::StrCat("the saved iterator state has version ",
                                                      checkpoint.version(), "; this build reads version ",
                                                      kPipelineCheckpointVersion));
  }
  if (checkpoint.fingerprint() != fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the saved iterator state is from another pipeline (fingerprint ", checkpoint.fingerprint(),
        "; this pipeline's is ", fingerprint, "): restore a state into the pipeline that saved it"));
  }
  return checkpoint;
}

absl::Status CannotSave() { return absl::UnimplementedError(kCannotSave); }
bool IsCannotSave(const absl::Status& status) {
  return absl::IsUnimplemented(status) && status.message() == kCannotSave;
}

absl::Status MalformedState(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("the saved iterator state is malformed: ", what));
}

absl::StatusOr<int64_t> StateInt(const proto::IteratorState& state, const std::string& key) {
  auto it = state.ints().find(key);
  if (it == state.ints().end()) return MalformedState(absl::StrCat("'", key, "' is missing"));
  return it->second;
}

absl::Status SaveInput(IteratorBase& input, proto::IteratorState* state) {
  return input.Save(state->add_inputs());
}

absl::Status RestoreInput(IteratorBase& input, const proto::IteratorState& state, int index) {
  if (index >= state.inputs_size()) return MalformedState(absl::StrCat("input ", index, " is missing"));
  return input.Restore(state.inputs(index));
}

absl::Status SaveCounter(IteratorBase& input, const std::string& key, int64_t value,
                         proto::IteratorState* state) {
  (*state->mutable_ints())[key] = value;
  return SaveInput(input, state);
}

absl::Status RestoreCounter(IteratorBase& input, const std::string& key, int64_t* value,
                            const proto::IteratorState& state) {
  absl::StatusOr<int64_t> saved = StateInt(state, key);
  if (!saved.ok()) return saved.status();
  if (absl::Status s = RestoreInput(input, state); !s.ok()) return s;
  *value = *saved;
  return absl::OkStatus();
}

absl::Status SaveFileOrder(const std::vector<int64_t>& order, uint64_t orders_drawn,
                           const SourcePositions& positions, proto::IteratorState* state) {
  std::string packed(order.size() * sizeof(int64_t), '\0');
  if (!order.empty()) std::memcpy(packed.data(), order.data(), packed.size());
  (*state->mutable_blobs())["order"] = std::move(packed);
  (*state->mutable_ints())["orders_drawn"] = static_cast<int64_t>(orders_drawn);
  return positions.Save(state);
}

absl::Status RestoreFileOrder(const proto::IteratorState& state, std::vector<int64_t>* order,
                              std::atomic<uint64_t>* orders_drawn, SourcePositions* positions) {
  auto packed = state.blobs().find("order");
  absl::StatusOr<int64_t> drawn = StateInt(state, "orders_drawn");
  if (packed == state.blobs().end()) return MalformedState("the file order is missing");
  if (!drawn.ok()) return drawn.status();
  if (packed->second.size() != order->size() * sizeof(int64_t)) {
    return MalformedState(absl::StrCat("the file order has ", packed->second.size() / sizeof(int64_t),
                                       " files; the source lists ", order->size()));
  }
  std::vector<int64_t> restored(order->size());
  if (!restored.empty()) std::memcpy(restored.data(), packed->second.data(), packed->second.size());
  std::vector<bool> seen(restored.size(), false);
  for (int64_t index : restored) {
    if (index < 0 || index >= static_cast<int64_t>(restored.size()) || seen[index]) {
      return MalformedState("the file order is not a permutation of the files");
    }
    seen[index] = true;
  }
  if (absl::Status s = positions->Restore(state); !s.ok()) return s;
  *order = std::move(restored);
  orders_drawn->store(static_cast<uint64_t>(*drawn));
  return absl::OkStatus();
}

absl::Status SaveOpenFile(const OpenFileState& open_file, const SourcePositions& files,
                          proto::IteratorState* state) {
  (*state->mutable_ints())["file_open"] = open_file.open ? 1 : 0;
  (*state->mutable_ints())["file"] = open_file.file;
  (*state->mutable_ints())["items"] = open_file.items;
  return files.Save(state);
}

absl::StatusOr<OpenFileState> RestoreOpenFile(const proto::IteratorState& state, int64_t num_files,
                                              SourcePositions* files) {
  absl::StatusOr<int64_t> open = StateInt(state, "file_open");
  absl::StatusOr<int64_t> file = StateInt(state, "file");
  absl::StatusOr<int64_t> items = StateInt(state, "items");
  if (!open.ok()) return open.status();
  if (!file.ok()) return file.status();
  if (!items.ok()) return items.status();
  if (*open != 0 && (*file < 0 || *file >= num_files)) {
    return MalformedState(absl::StrCat("file ", *file, " is out of range"));
  }
  if (absl::Status s = files->Restore(state); !s.ok()) return s;
  return OpenFileState{.open = *open != 0, .file = *file, .items = *items};
}

absl::Status SkipItems(int64_t count, const std::function<absl::StatusOr<bool>()>& read_one,
                       const std::string& path, const char* items) {
  for (int64_t i = 0; i < count; ++i) {
    absl::StatusOr<bool> got = read_one();
    if (!got.ok()) return got.status();
    if (!*got) {
      return absl::DataLossError(absl::StrCat("'", path, "' has ", i, " ", items,
                                              " now; the saved state had read ", count,
                                              " (the file changed since the save)"));
    }
  }
  return absl::OkStatus();
}

void SaveElement(const Element& element, proto::IteratorState* state) {
  ElementToProto(element, state->add_elements());
}

absl::StatusOr<Element> RestoreElement(const proto::IteratorState& state, int index) {
  if (index >= state.elements_size()) return MalformedState(absl::StrCat("element ", index, " is missing"));
  absl::StatusOr<Element> element = ElementFromProto(state.elements(index));
  if (!element.ok()) return MalformedState(std::string(element.status().message()));
  return element;
}

absl::StatusOr<std::vector<Element>> RestoreElements(const proto::IteratorState& state) {
  std::vector<Element> elements;
  for (int i = 0; i < state.elements_size(); ++i) {
    absl::StatusOr<Element> element = RestoreElement(state, i);
    if (!element.ok()) return element.status();
    elements.push_back(*std::move(element));
  }
  return elements;
}

void SaveStatus(const absl::Status& status, proto::IteratorState* state) {
  (*state->mutable_ints())["code"] = static_cast<int64_t>(status.code());
  if (!status.ok()) (*state->mutable_blobs())["message"] = std::string(status.message());
}

absl::StatusOr<absl::Status> RestoreStatus(const proto::IteratorState& state) {
  absl::StatusOr<int64_t> code = StateInt(state, "code");
  if (!code.ok()) return code.status();
  if (*code < 0 || *code > static_cast<int64_t>(absl::StatusCode::kUnauthenticated)) {
    return MalformedState(absl::StrCat("status code ", *code, " is not one"));
  }
  auto message = state.blobs().find("message");
  return absl::Status(static_cast<absl::StatusCode>(*code),
                      message == state.blobs().end() ? "" : message->second);
}

}  // namespace sluice
