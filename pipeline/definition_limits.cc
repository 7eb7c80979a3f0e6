#include "pipeline/definition_limits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "pipeline/builder.h"

namespace sluice {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The bound on an integer field, by name; 0 when it has none.
int64_t BoundOf(const std::string& field) {
  if (field == "batch_size" || field == "size" || field == "stride" || field == "window_size")
    return kMaxBatchSize;
  if (field == "buffer_size") return kMaxBufferSize;
  if (field == "cycle_length" || field == "block_length") return kMaxCycleLength;
  if (field == "num_parallel_calls" || field == "parallelism") return kMaxParallelism;
  return 0;
}

class LimitChecker {
 public:
  absl::Status CheckDef(const proto::DatasetDef& def, const std::string& where) {
    for (int i = 0; i < def.steps_size(); ++i) {
      if (++steps_ > kMaxDefinitionSteps) {
        return absl::InvalidArgumentError(absl::StrCat("the pipeline has more than ", kMaxDefinitionSteps,
                                                       " steps (sub-pipelines included)"));
      }
      const std::string step = absl::StrCat(where, "step ", i + 1, " (", StepOpName(def.steps(i)), ")");
      if (absl::Status s = CheckMessage(def.steps(i), step); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status CheckMessage(const Message& message, const std::string& step) {
    if (const auto* def = dynamic_cast<const proto::DatasetDef*>(&message); def != nullptr) {
      return CheckDef(*def, step + ": ");
    }
    const auto* reflection = message.GetReflection();
    std::vector<const FieldDescriptor*> fields;
    reflection->ListFields(message, &fields);
    for (const FieldDescriptor* field : fields) {
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const int n = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
        for (int i = 0; i < n; ++i) {
          const Message& child = field->is_repeated() ? reflection->GetRepeatedMessage(message, field, i)
                                                      : reflection->GetMessage(message, field);
          if (absl::Status s = CheckMessage(child, step); !s.ok()) return s;
        }
        continue;
      }
      if (field->is_repeated() || field->cpp_type() != FieldDescriptor::CPPTYPE_INT64) continue;
      const int64_t value = reflection->GetInt64(message, field);
      const int64_t bound = BoundOf(field->name());
      if (bound > 0 && value > bound) {
        return absl::InvalidArgumentError(
            absl::StrCat(step, ": ", field->name(), " ", value, " is past the limit of ", bound));
      }
    }
    // padded_batch's shapes: each dimension of a padded shape.
    if (message.GetDescriptor()->name() == "PartialShapeProto") {
      const FieldDescriptor* dims = message.GetDescriptor()->FindFieldByName("dims");
      if (dims != nullptr && dims->is_repeated() && dims->cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
        for (int i = 0; i < reflection->FieldSize(message, dims); ++i) {
          const int64_t dim = reflection->GetRepeatedInt64(message, dims, i);
          if (dim > kMaxPaddedDim) {
            return absl::InvalidArgumentError(
                absl::StrCat(step, ": a padded dimension of ", dim, " is past the limit of ", kMaxPaddedDim));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  int64_t steps_ = 0;
};

}  // namespace

absl::Status CheckDefinitionLimits(const proto::DatasetDef& def) {
  const size_t bytes = def.ByteSizeLong();
  if (bytes > static_cast<size_t>(kMaxDefinitionBytes)) {
    return absl::ResourceExhaustedError(absl::StrCat("the pipeline definition is ", bytes,
                                                     " bytes, past the limit of ", kMaxDefinitionBytes,
                                                     " (read large data from files, not from_tensors)"));
  }
  return LimitChecker().CheckDef(def, "");
}

}  // namespace sluice
