#include "client/read/definition_checks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace sluice::reader {
namespace {

int Depth(const google::protobuf::Message& message) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  int deepest = 0;
  for (const auto* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        deepest = std::max(deepest, Depth(reflection->GetRepeatedMessage(message, field, i)));
      }
    } else {
      deepest = std::max(deepest, Depth(reflection->GetMessage(message, field)));
    }
  }
  return deepest + 1;
}

// The first FunctionDef under `message` whose name is local, depth first.
const proto::FunctionDef* FindLocal(const google::protobuf::Message& message) {
  if (message.GetDescriptor() == proto::FunctionDef::descriptor()) {
    const auto& fn = static_cast<const proto::FunctionDef&>(message);
    return IsLocalFunctionName(fn.name()) ? &fn : nullptr;
  }
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const auto* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        if (const auto* found = FindLocal(reflection->GetRepeatedMessage(message, field, i))) return found;
      }
    } else if (const auto* found = FindLocal(reflection->GetMessage(message, field))) {
      return found;
    }
  }
  return nullptr;
}

}  // namespace

bool IsLocalFunctionName(const std::string& name) { return absl::StartsWith(name, kLocalFunctionPrefix); }

absl::Status CheckNoLocalFunctions(const proto::DatasetDef& def) {
  for (int i = 0; i < def.steps_size(); ++i) {
    const proto::FunctionDef* local = FindLocal(def.steps(i));
    if (local == nullptr) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", i + 1, " runs a function of this process (", local->name(),
        ", a Python callable or a C++ MapLocal/FilterLocal function), which the data service's workers "
        "cannot run: move the step after `distribute`, or run it on the workers as a registered element "
        "function (`sluice functions` lists them) or one from a plugin (docs/pipeline.md)"));
  }
  return absl::OkStatus();
}

int DefinitionDepth(const proto::DatasetDef& def) { return Depth(def); }

absl::Status CheckSendable(const proto::DatasetDef& def) {
  if (absl::Status local = CheckNoLocalFunctions(def); !local.ok()) return local;
  const int depth = DefinitionDepth(def);
  if (depth <= kMaxDefinitionDepth) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the pipeline's definition nests ", depth,
                                                 " messages deep (zip and interleave inside each "
                                                 "other add three levels each); the service accepts at most ",
                                                 kMaxDefinitionDepth, ": nest fewer pipelines"));
}

}  // namespace sluice::reader
