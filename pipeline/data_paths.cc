#include "pipeline/data_paths.h"

#include <filesystem>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace sluice {
namespace {

std::string Resolved(const std::filesystem::path& base, const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find("://") != std::string::npos) return path;
  return (base / path).lexically_normal().string();
}

// The repeated string field of `message` that names files, if it is one of
// the file sources or list_files (image_folder's root is a single string,
// resolved on its own).
const google::protobuf::FieldDescriptor* PathField(const google::protobuf::Message& message) {
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  if (type == proto::ListFilesOp::descriptor()) return type->FindFieldByName("pattern");
  if (type == proto::TextLineOp::descriptor() || type == proto::JsonLinesOp::descriptor() ||
      type == proto::TFRecordOp::descriptor() || type == proto::FixedLengthRecordOp::descriptor() ||
      type == proto::WebDatasetOp::descriptor()) {
    return type->FindFieldByName("files");
  }
  return nullptr;
}

// Walks every message field, so that pipelines nested in zip, interleave
// and any later op are covered without naming them.
void ResolveIn(const std::filesystem::path& base, google::protobuf::Message* message) {
  const google::protobuf::Reflection* reflection = message->GetReflection();
  if (message->GetDescriptor() == proto::ImageFolderOp::descriptor()) {
    auto* folder = static_cast<proto::ImageFolderOp*>(message);
    folder->set_root(Resolved(base, folder->root()));
    return;
  }
  if (message->GetDescriptor() == proto::TokenizeOp::descriptor()) {
    auto* tokenize = static_cast<proto::TokenizeOp*>(message);
    tokenize->set_model(Resolved(base, tokenize->model()));
    return;
  }
  if (const auto* field = PathField(*message); field != nullptr) {
    for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
      reflection->SetRepeatedString(message, field, i,
                                    Resolved(base, reflection->GetRepeatedString(*message, field, i)));
    }
    return;
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const auto* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        ResolveIn(base, reflection->MutableRepeatedMessage(message, field, i));
      }
    } else {
      ResolveIn(base, reflection->MutableMessage(message, field));
    }
  }
}

}  // namespace

void ResolveDataPaths(const std::string& base_dir, proto::DatasetDef* def) {
  ResolveIn(std::filesystem::absolute(base_dir), def);
}

}  // namespace sluice
