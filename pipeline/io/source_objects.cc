#include "pipeline/io/source_objects.h"

#include <fnmatch.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "pipeline/io/object_client.h"
#include "pipeline/io/object_url.h"

namespace sluice::io {
namespace {

// The string fields of the source op that name data, by their YAML names.
void CollectUrls(const google::protobuf::Message& op,
                 std::vector<std::pair<std::string, std::string>>* urls) {
  const google::protobuf::Reflection* reflection = op.GetReflection();
  const google::protobuf::Descriptor* descriptor = op.GetDescriptor();
  for (const char* name : {"files", "root", "pattern"}) {
    const google::protobuf::FieldDescriptor* field = descriptor->FindFieldByName(name);
    if (field == nullptr || field->type() != google::protobuf::FieldDescriptor::TYPE_STRING) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(op, field); ++i) {
        urls->emplace_back(name, reflection->GetRepeatedString(op, field, i));
      }
    } else {
      urls->emplace_back(name, reflection->GetString(op, field));
    }
  }
}

}  // namespace

absl::StatusOr<SourceObjects> CountSourceObjects(const proto::DatasetDef& def) {
  SourceObjects counted;
  if (def.steps_size() == 0) return counted;
  const proto::Step& source = def.steps(0);
  const google::protobuf::OneofDescriptor* oneof = source.GetDescriptor()->FindOneofByName("op");
  const google::protobuf::FieldDescriptor* set =
      source.GetReflection()->GetOneofFieldDescriptor(source, oneof);
  if (set == nullptr || set->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) return counted;
  std::vector<std::pair<std::string, std::string>> urls;
  CollectUrls(source.GetReflection()->GetMessage(source, set), &urls);
  for (const auto& [field, url] : urls) {
    if (!HasUrlScheme(url)) continue;
    ++counted.urls;
    if (field == "files") {
      absl::StatusOr<ObjectInfo> info = StatObject(url);
      if (!info.ok()) return info.status();
      ++counted.objects;
      counted.bytes += info->size;
      continue;
    }
    // A root lists what is under it; a pattern, what matches it.
    const std::string prefix = field == "root" ? (absl::EndsWith(url, "/") ? url : url + "/")
                                               : url.substr(0, url.find_first_of("*?["));
    absl::StatusOr<std::vector<ObjectInfo>> listed = ListObjects(prefix);
    if (!listed.ok()) return listed.status();
    for (const ObjectInfo& object : *listed) {
      if (field == "pattern" && fnmatch(url.c_str(), object.url.c_str(), FNM_PATHNAME) != 0) continue;
      ++counted.objects;
      counted.bytes += object.size;
    }
  }
  return counted;
}

}  // namespace sluice::io
