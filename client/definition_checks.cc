#include "client/definition_checks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/local_functions.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace sluice {
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

}  // namespace

int DefinitionDepth(const proto::DatasetDef& def) { return Depth(def); }

absl::Status CheckSendable(const proto::DatasetDef& def) {
  if (absl::Status local = internal::CheckNoLocalFunctions(def); !local.ok()) return local;
  const int depth = DefinitionDepth(def);
  if (depth <= kMaxDefinitionDepth) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("the pipeline's definition nests ", depth,
                                                 " messages deep (zip and interleave inside each "
                                                 "other add three levels each); the service accepts at most ",
                                                 kMaxDefinitionDepth, ": nest fewer pipelines"));
}

}  // namespace sluice
