// What each op of a pipeline is, from the Step message alone: its name,
// its sub-pipelines, and a new step with its defaults (declared in
// builder.h).
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "pipeline/builder.h"

namespace sluice {
namespace {

using google::protobuf::FieldDescriptor;

const google::protobuf::OneofDescriptor* OpOneof() {
  return proto::Step::descriptor()->FindOneofByName("op");
}

}  // namespace

std::string StepOpName(const proto::Step& step) {
  const FieldDescriptor* field = step.GetReflection()->GetOneofFieldDescriptor(step, OpOneof());
  return field == nullptr ? "" : field->name();
}

std::vector<SubPipeline> SubPipelines(const proto::Step& step) {
  std::vector<SubPipeline> subs;
  const FieldDescriptor* op_field = step.GetReflection()->GetOneofFieldDescriptor(step, OpOneof());
  if (op_field == nullptr || op_field->message_type() == nullptr) return subs;
  const google::protobuf::Message& op = step.GetReflection()->GetMessage(step, op_field);
  const google::protobuf::Reflection* reflection = op.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(op, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->message_type() != proto::DatasetDef::descriptor()) continue;
    if (!field->is_repeated()) {
      subs.push_back(
          {field->name(), static_cast<const proto::DatasetDef*>(&reflection->GetMessage(op, field))});
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(op, field); ++i) {
      subs.push_back({absl::StrCat(field->name(), " ", i + 1),
                      static_cast<const proto::DatasetDef*>(&reflection->GetRepeatedMessage(op, field, i))});
    }
  }
  return subs;
}

std::vector<std::string> AllOpNames() {
  std::vector<std::string> names;
  const auto* oneof = OpOneof();
  for (int i = 0; i < oneof->field_count(); ++i) names.push_back(oneof->field(i)->name());
  return names;
}

absl::StatusOr<proto::Step> NewStep(std::string_view op) {
  const FieldDescriptor* field = proto::Step::descriptor()->FindFieldByName(std::string(op));
  if (field == nullptr || field->containing_oneof() != OpOneof()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown op '", std::string(op), "'", DidYouMean(op, AllOpNames())));
  }
  proto::Step step;
  step.GetReflection()->MutableMessage(&step, field);
  switch (step.op_case()) {
    case proto::Step::kRange:
      step.mutable_range()->set_step(1);
      break;
    case proto::Step::kListFiles:
      step.mutable_list_files()->set_shuffle(true);
      break;
    case proto::Step::kMap:
      step.mutable_map()->set_deterministic(true);
      break;
    case proto::Step::kBatch:
      step.mutable_batch()->set_deterministic(true);
      break;
    case proto::Step::kShuffle:
      step.mutable_shuffle()->set_reshuffle_each_iteration(true);
      break;
    case proto::Step::kRepeat:
      step.mutable_repeat()->set_count(-1);
      break;
    case proto::Step::kTake:
      step.mutable_take()->set_count(-1);
      break;
    case proto::Step::kPrefetch:
      step.mutable_prefetch()->set_buffer_size(-1);
      break;
    case proto::Step::kPackSequences:
      step.mutable_pack_sequences()->set_length(2048);
      step.mutable_pack_sequences()->set_method("first_fit");
      break;
    case proto::Step::kInterleave:
      step.mutable_interleave()->set_cycle_length(4);
      step.mutable_interleave()->set_block_length(1);
      step.mutable_interleave()->set_deterministic(true);
      break;
    case proto::Step::kChooseFromDatasets:
      step.mutable_choose_from_datasets()->set_stop_on_empty_dataset(true);
      break;
    case proto::Step::kWindow:
      step.mutable_window()->set_stride(1);
      break;
    default:
      break;
  }
  return step;
}

}  // namespace sluice
