#include "pipeline/yaml_loader.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto_convert.h"
#include "common/strings.h"
#include "pipeline/builder.h"
#include "pipeline/data_paths.h"
#include "pipeline/function.h"
#include "pipeline/yaml_document.h"
#include "pipeline/yaml_keys.h"
#include "pipeline/yaml_tensors.h"

namespace sluice {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The argument a scalar or list stands for, as in `range: 10`.
const std::map<std::string, std::string, std::less<>> kShorthand = {
    {"range", "stop"},
    {"repeat", "count"},
    {"take", "count"},
    {"skip", "count"},
    {"shuffle", "buffer_size"},
    {"batch", "batch_size"},
    {"rebatch", "batch_size"},
    {"padded_batch", "batch_size"},
    {"prefetch", "buffer_size"},
    {"enumerate", "start"},
    {"list_files", "pattern"},
    {"text_line", "files"},
    {"tfrecord", "files"},
    {"fixed_length_record", "files"},
    {"zip", "datasets"},
    {"interleave", "pipeline"},
    {"image_folder", "root"},
    {"webdataset", "files"},
    {"json_lines", "files"},
    {"tokenize", "model"},
    {"pack_sequences", "length"},
    {"concatenate", "pipeline"},
    {"flat_map", "pipeline"},
    {"sample_from_datasets", "datasets"},
    {"window", "size"},
    {"cache", "filename"},
};

// The ops that call an element function, and its field: written
// `{FIELD: NAME, ARG: VALUE, ...}` (or just NAME), the keys that are not the
// op's own arguments being the function's. bucket_by_sequence_length's is
// optional: without it, its keys are all its own.
const std::map<std::string, std::string, std::less<>> kFunctionField = {
    {"map", "fn"},
    {"filter", "fn"},
    {"scan", "fn"},
    {"take_while", "predicate"},
    {"group_by_window", "key_fn"},
    {"bucket_by_sequence_length", "length_fn"},
};

class Loader {
 public:
  Loader(std::string source_name, std::string base_dir)
      : source_name_(std::move(source_name)), base_dir_(std::move(base_dir)) {}

  absl::StatusOr<LoadedPipeline> Load(const YAML::Node& root) {
    LoadedPipeline result;
    YAML::Node steps;
    bool has_steps = false;
    if (root.IsSequence()) {
      steps.reset(root);
      has_steps = true;
    } else if (root.IsMap()) {
      for (const auto& entry : root) {
        const std::string key = entry.first.Scalar();
        if (key == "pipeline") {
          steps.reset(entry.second);
          has_steps = true;
        } else if (key == "plugins") {
          if (absl::Status s = LoadPlugins(entry.second, &result.def); !s.ok()) return s;
        } else {
          return Error(entry.first,
                       absl::StrCat("unknown top-level key '", key, "'",
                                    DidYouMean(key, {"pipeline", "plugins"}), " (valid: pipeline, plugins)"));
        }
      }
      if (!has_steps) return Error(root, "missing 'pipeline': the list of steps");
    } else {
      return Error(root, "expected a map with a 'pipeline' list");
    }
    if (absl::Status s = ParseSteps(steps, &result.def, &result.step_locations); !s.ok()) return s;
    return result;
  }

 private:
  std::string Location(const YAML::Node& node) const { return YamlLocation(node, source_name_); }

  absl::Status Error(const YAML::Node& node, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(Location(node), ": ", message));
  }

  absl::Status LoadPlugins(const YAML::Node& node, proto::DatasetDef* def) {
    std::vector<YAML::Node> items;
    if (node.IsSequence()) {
      for (const auto& item : node) items.push_back(item);
    } else {
      items.push_back(node);
    }
    for (const YAML::Node& item : items) {
      if (!item.IsScalar()) return Error(item, "plugins: expected a library path");
      std::filesystem::path path(item.Scalar());
      if (path.is_relative()) path = std::filesystem::path(base_dir_) / path;
      const std::string resolved = path.lexically_normal().string();
      if (absl::Status s = LoadPlugin(resolved); !s.ok()) return Error(item, s.message());
      def->add_plugins(resolved);
    }
    return absl::OkStatus();
  }

  absl::Status ParseSteps(const YAML::Node& node, proto::DatasetDef* def,
                          std::vector<std::string>* locations) {
    if (!node.IsSequence()) return Error(node, "expected a list of steps");
    if (node.size() == 0) return Error(node, "the pipeline has no steps");
    for (const auto& item : node) {
      if (locations != nullptr) locations->push_back(Location(item));
      if (absl::Status s = ParseStep(item, def->add_steps()); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // A sub-pipeline: a list of steps, or a map with a `pipeline` list.
  absl::Status ParseDatasetDef(const YAML::Node& node, proto::DatasetDef* def) {
    if (node.IsMap() && node["pipeline"]) return ParseSteps(node["pipeline"], def, nullptr);
    return ParseSteps(node, def, nullptr);
  }

  absl::Status ParseStep(const YAML::Node& node, proto::Step* step) {
    YAML::Node name_node;
    YAML::Node args;
    if (node.IsScalar()) {
      name_node.reset(node);
    } else if (node.IsMap() && node.size() == 1) {
      name_node.reset(node.begin()->first);
      args.reset(node.begin()->second);
    } else {
      return Error(node, "a step must be a map with one key, the op name (as in '- batch: {batch_size: 4}')");
    }
    const std::string op = name_node.Scalar();
    absl::StatusOr<proto::Step> fresh = NewStep(op);
    if (!fresh.ok()) return Error(name_node, fresh.status().message());
    *step = *std::move(fresh);
    const FieldDescriptor* field = proto::Step::descriptor()->FindFieldByName(op);
    Message* message = step->GetReflection()->MutableMessage(step, field);
    if (!args.IsDefined() || args.IsNull()) return absl::OkStatus();
    if (auto function = kFunctionField.find(op);
        function != kFunctionField.end() &&
        (op != "bucket_by_sequence_length" || (args.IsMap() && args[function->second]))) {
      return ParseFunctionOp(op, function->second, args, message);
    }
    if (op == "from_tensors" || op == "from_tensor_slices") return ParseTensorsOp(op, args, message);
    if (op == "json_lines" && args.IsMap() && args["fields"] && args["fields"].IsMap()) {
      return ParseTypedJsonFields(args, static_cast<proto::JsonLinesOp*>(message));
    }
    if (args.IsMap()) return SetFields(message, args, op, {});
    auto shorthand = kShorthand.find(op);
    if (shorthand == kShorthand.end())
      return Error(args, absl::StrCat("'", op, "' takes a map of arguments"));
    return SetField(message, message->GetDescriptor()->FindFieldByName(shorthand->second), args, op);
  }

  // json_lines with `fields: {id: int64, text: string}`: the names in the
  // map's order, each with its type; the other arguments as usual.
  absl::Status ParseTypedJsonFields(const YAML::Node& args, proto::JsonLinesOp* op) {
    for (const auto& entry : args["fields"]) {
      if (!entry.second.IsScalar()) {
        return Error(entry.second, absl::StrCat("json_lines: field '", entry.first.Scalar(),
                                                "' needs a type name (string, bool, int32, int64, float32, "
                                                "float64, or a numeric type with [])"));
      }
      op->add_fields(entry.first.Scalar());
      op->add_field_types(entry.second.Scalar());
    }
    return SetFields(op, args, "json_lines", {"fields"});
  }

  // Sets each key of `args` on `message`; keys in `skip` are handled by the
  // caller.
  absl::Status SetFields(Message* message, const YAML::Node& args, const std::string& op,
                         const std::vector<std::string>& skip) {
    const auto* descriptor = message->GetDescriptor();
    for (const auto& entry : args) {
      const std::string key = entry.first.Scalar();
      if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
      const FieldDescriptor* field = descriptor->FindFieldByName(key);
      if (field == nullptr) {
        std::vector<std::string> valid;
        for (int i = 0; i < descriptor->field_count(); ++i) valid.push_back(descriptor->field(i)->name());
        return Error(entry.first,
                     absl::StrCat("unknown argument '", key, "' for op '", op, "'", DidYouMean(key, valid)));
      }
      if (absl::Status s = SetField(message, field, entry.second, op); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status SetField(Message* message, const FieldDescriptor* field, const YAML::Node& value,
                        const std::string& op) {
    const auto* reflection = message->GetReflection();
    const std::string what = absl::StrCat(op, ": argument '", field->name(), "'");
    if (field->is_repeated()) {
      std::vector<YAML::Node> items;
      // A list of steps is one DatasetDef, so only a list of lists is many.
      const bool many = value.IsSequence() &&
                        !(field->message_type() == proto::DatasetDef::descriptor() && value.size() > 0 &&
                          !value[0].IsSequence() && !(value[0].IsMap() && value[0]["pipeline"]));
      if (many) {
        for (const auto& item : value) items.push_back(item);
      } else {
        items.push_back(value);
      }
      for (const YAML::Node& item : items) {
        if (absl::Status s = AddValue(message, field, item, what); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    if (!value.IsScalar() && field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      return Error(value, absl::StrCat(what, " must be a single value"));
    }
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT64: {
        absl::StatusOr<int64_t> v = ParseInt(value, what);
        if (!v.ok()) return v.status();
        reflection->SetInt64(message, field, *v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        absl::StatusOr<bool> v = ParseBool(value, what);
        if (!v.ok()) return v.status();
        reflection->SetBool(message, field, *v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        absl::StatusOr<double> v = ParseDouble(value, what);
        if (!v.ok()) return v.status();
        reflection->SetDouble(message, field, *v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_STRING:
        reflection->SetString(message, field, value.Scalar());
        return absl::OkStatus();
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return ParseMessage(reflection->MutableMessage(message, field), value, what);
      default:
        return Error(value, absl::StrCat(what, " has a type the YAML loader does not handle"));
    }
  }

  absl::Status AddValue(Message* message, const FieldDescriptor* field, const YAML::Node& item,
                        const std::string& what) {
    const auto* reflection = message->GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        if (!item.IsScalar()) return Error(item, absl::StrCat(what, ": expected a string"));
        reflection->AddString(message, field, item.Scalar());
        return absl::OkStatus();
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return ParseMessage(reflection->AddMessage(message, field), item, what);
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        absl::StatusOr<double> v = ParseDouble(item, what);
        if (!v.ok()) return v.status();
        reflection->AddDouble(message, field, *v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_INT64: {
        absl::StatusOr<int64_t> v = ParseInt(item, what);
        if (!v.ok()) return v.status();
        reflection->AddInt64(message, field, *v);
        return absl::OkStatus();
      }
      default:
        return Error(item, absl::StrCat(what, " has a type the YAML loader does not handle"));
    }
  }

  absl::Status ParseMessage(Message* message, const YAML::Node& value, const std::string& what) {
    if (auto* def = dynamic_cast<proto::DatasetDef*>(message)) return ParseDatasetDef(value, def);
    if (auto* shape = dynamic_cast<proto::PartialShapeProto*>(message)) return ParseShape(value, shape, what);
    if (auto* tensor = dynamic_cast<proto::TensorProto*>(message)) {
      absl::StatusOr<Tensor> t = ParseYamlTensor(value, what, source_name_);
      if (!t.ok()) return t.status();
      TensorToProto(*t, tensor);
      return absl::OkStatus();
    }
    // Any other message (cross_trainer_cache: {trainer_id: ..., max_bytes:
    // ...}): a map of its fields.
    if (value.IsMap()) return SetFields(message, value, what, {});
    return Error(value, absl::StrCat(what, " has a type the YAML loader does not handle"));
  }

  absl::Status ParseShape(const YAML::Node& value, proto::PartialShapeProto* shape, const std::string& what) {
    if (!value.IsSequence())
      return Error(value, absl::StrCat(what, ": a shape is a list of sizes, -1 for unknown"));
    for (const auto& d : value) {
      if (d.IsNull()) {
        shape->add_dims(kUnknownDim);
        continue;
      }
      absl::StatusOr<int64_t> size = ParseInt(d, what);
      if (!size.ok()) return size.status();
      if (*size < kUnknownDim) return Error(d, absl::StrCat(what, ": sizes must be >= -1"));
      shape->add_dims(*size);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> ParseInt(const YAML::Node& node, const std::string& what) {
    int64_t v = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
      return Error(node, absl::StrCat(what, " must be an integer, got '", Describe(node), "'"));
    }
    return v;
  }

  absl::StatusOr<double> ParseDouble(const YAML::Node& node, const std::string& what) {
    double v = 0;
    if (!node.IsScalar() || !LooksNumeric(node.Scalar()) || !absl::SimpleAtod(node.Scalar(), &v)) {
      return Error(node, absl::StrCat(what, " must be a number, got '", Describe(node), "'"));
    }
    return v;
  }

  // YAML 1.2's core-schema spellings of booleans.
  static bool IsBoolWord(const std::string& s) {
    return s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE";
  }

  absl::StatusOr<bool> ParseBool(const YAML::Node& node, const std::string& what) {
    if (node.IsScalar() && IsBoolWord(node.Scalar())) {
      const char first = node.Scalar()[0];
      return first == 't' || first == 'T';
    }
    return Error(node, absl::StrCat(what, " must be true or false, got '", Describe(node), "'"));
  }

  static std::string Describe(const YAML::Node& node) {
    if (node.IsScalar()) return node.Scalar();
    if (node.IsSequence()) return "a list";
    if (node.IsMap()) return "a map";
    return "nothing";
  }

  // The ops of kFunctionField: `{FIELD: NAME, ...}` where the keys that are
  // not the op's own arguments are the function's.
  absl::Status ParseFunctionOp(const std::string& op, const std::string& fn_field, const YAML::Node& args,
                               Message* message) {
    auto* fn = static_cast<proto::FunctionDef*>(message->GetReflection()->MutableMessage(
        message, message->GetDescriptor()->FindFieldByName(fn_field)));
    YAML::Node fn_node;
    fn_node.reset(args);
    std::map<std::string, YAML::Node> arg_keys;
    if (args.IsScalar()) {
      fn->set_name(args.Scalar());
    } else if (args.IsMap()) {
      const YAML::Node fn_value = args[fn_field];
      if (!fn_value) {
        return Error(args, absl::StrCat(op, ": missing '", fn_field, "', the element function to apply"));
      }
      fn_node.reset(fn_value);
      if (!fn_node.IsScalar()) {
        return Error(fn_node, absl::StrCat(op, ": '", fn_field, "' must be a function name"));
      }
      fn->set_name(fn_node.Scalar());
      const auto* descriptor = message->GetDescriptor();
      for (const auto& entry : args) {
        const std::string key = entry.first.Scalar();
        if (key == fn_field) continue;
        const FieldDescriptor* field = descriptor->FindFieldByName(key);
        if (field != nullptr) {
          if (absl::Status s = SetField(message, field, entry.second, op); !s.ok()) return s;
          continue;
        }
        absl::StatusOr<proto::AttrValue> value = ToAttr(entry.second);
        if (!value.ok()) return value.status();
        (*fn->mutable_args())[key] = *std::move(value);
        arg_keys[key] = entry.first;
      }
    } else {
      return Error(args, absl::StrCat(op, ": expected {", fn_field, ": NAME, ...} or a function name"));
    }
    // Checked here, where the YAML positions are known.
    absl::StatusOr<std::unique_ptr<ElementFunction>> created = FunctionRegistry::Global().Create(*fn);
    if (!created.ok()) {
      YAML::Node where;
      where.reset(fn_node);
      for (const auto& [key, node] : arg_keys) {
        if (absl::StrContains(created.status().message(), absl::StrCat("argument '", key, "'")))
          where.reset(node);
      }
      return Error(where, absl::StrCat(op, ": ", created.status().message()));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<proto::AttrValue> ToAttr(const YAML::Node& node) {
    proto::AttrValue value;
    if (node.IsSequence()) {
      value.mutable_list();  // an empty list is still a list
      for (const auto& item : node) {
        absl::StatusOr<proto::AttrValue> v = ToAttr(item);
        if (!v.ok()) return v.status();
        *value.mutable_list()->add_values() = *std::move(v);
      }
    } else if (node.IsMap()) {
      value.mutable_map();
      for (const auto& entry : node) {
        absl::StatusOr<proto::AttrValue> v = ToAttr(entry.second);
        if (!v.ok()) return v.status();
        (*value.mutable_map()->mutable_entries())[entry.first.Scalar()] = *std::move(v);
      }
    } else if (node.IsScalar()) {
      const std::string& s = node.Scalar();
      int64_t i = 0;
      double f = 0;
      if (node.Tag() == "!") {
        value.set_s(s);  // quoted: always a string
      } else if (absl::SimpleAtoi(s, &i)) {
        value.set_i(i);
      } else if (LooksNumeric(s) && absl::SimpleAtod(s, &f)) {
        value.set_f(f);
      } else if (IsBoolWord(s)) {
        value.set_b(s[0] == 't' || s[0] == 'T');
      } else {
        value.set_s(s);
      }
    } else {
      return Error(node, "expected a value");
    }
    return value;
  }

  // from_tensors / from_tensor_slices: a tensor literal, a map of named
  // tensor literals, or {tuple: [literal, ...]}.
  absl::Status ParseTensorsOp(const std::string& op, const YAML::Node& args, Message* message) {
    auto* components = message->GetReflection()->MutableRepeatedPtrField<proto::TensorProto>(
        message, message->GetDescriptor()->FindFieldByName("components"));
    auto* names = message->GetReflection()->MutableRepeatedPtrField<std::string>(
        message, message->GetDescriptor()->FindFieldByName("names"));
    auto add = [&](const YAML::Node& literal, const std::string& what) -> absl::Status {
      absl::StatusOr<Tensor> t = ParseYamlTensor(literal, what, source_name_);
      if (!t.ok()) return t.status();
      TensorToProto(*t, components->Add());
      return absl::OkStatus();
    };
    if (!args.IsMap() || IsTypedTensorLiteral(args)) return add(args, op);
    if (args.size() == 1 && args["tuple"]) {
      const YAML::Node tuple = args["tuple"];
      if (!tuple.IsSequence()) return Error(tuple, absl::StrCat(op, ": 'tuple' must be a list of tensors"));
      for (const auto& item : tuple) {
        if (absl::Status s = add(item, op); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    for (const auto& entry : args) {
      const std::string name = entry.first.Scalar();
      if (absl::Status s = add(entry.second, absl::StrCat(op, ": component '", name, "'")); !s.ok()) return s;
      names->Add()->assign(name);
    }
    return absl::OkStatus();
  }

  const std::string source_name_;
  const std::string base_dir_;
};

}  // namespace

// Builds the dataset, so that argument values are checked at load time.
static absl::StatusOr<LoadedPipeline> Validated(LoadedPipeline loaded) {
  BuildOptions build;
  build.step_locations = &loaded.step_locations;
  absl::StatusOr<DatasetPtr> dataset = BuildDataset(loaded.def, build);
  if (!dataset.ok()) return dataset.status();
  return loaded;
}

absl::StatusOr<LoadedPipeline> ParsePipelineYaml(std::string_view text, const std::string& source_name,
                                                 const std::string& base_dir,
                                                 const YamlLoadOptions& options) {
  absl::StatusOr<YAML::Node> root = LoadYamlDocument(text, source_name, "nest fewer pipelines");
  if (!root.ok()) return root.status();
  absl::StatusOr<LoadedPipeline> loaded;
  try {
    loaded = Loader(source_name, base_dir).Load(*root);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  if (!loaded.ok() || !options.validate) return loaded;
  return Validated(*std::move(loaded));
}

absl::StatusOr<LoadedPipeline> LoadPipelineFile(const std::string& path, const YamlLoadOptions& options) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read pipeline file '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  std::string base_dir = std::filesystem::path(path).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  absl::StatusOr<LoadedPipeline> loaded = ParsePipelineYaml(text.str(), path, base_dir, {.validate = false});
  if (!loaded.ok()) return loaded;
  ResolveDataPaths(base_dir, &loaded->def);
  if (!options.validate) return loaded;
  return Validated(*std::move(loaded));
}

}  // namespace sluice
