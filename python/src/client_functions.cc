#include "python/src/client_functions.h"

#include <iterator>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "python/src/status.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice::python {
namespace py = pybind11;
namespace {

constexpr char kClientFunction[] = "py:__client__.call";

// Local function names ("local:N") to their callables, for the life of the
// process (as the local functions themselves). Used under the GIL.
std::map<std::string, py::object>& Callables() {
  static auto* callables = new std::map<std::string, py::object>();
  return *callables;
}

proto::DatasetDef Parse(const Dataset& dataset) {
  proto::DatasetDef def;
  if (!def.ParseFromString(dataset.Serialize())) {
    ThrowStatus(absl::InternalError("a dataset's definition did not parse"));
  }
  return def;
}

// Replaces the remembered callables in `message` and below; true when one
// was.
bool Ship(google::protobuf::Message* message) {
  if (auto* fn = dynamic_cast<proto::FunctionDef*>(message)) {
    auto known = Callables().find(fn->name());
    if (known == Callables().end()) return false;
    py::object cloudpickle;
    try {
      cloudpickle = py::module_::import("cloudpickle");
    } catch (py::error_already_set&) {
      ThrowStatus(absl::FailedPreconditionError(
          "running a Python callable on the workers ships it with cloudpickle, which is not installed "
          "(Debian: python3-cloudpickle)"));
    }
    const py::object pickled = cloudpickle.attr("dumps")(known->second);
    const std::string text =
        py::str(py::module_::import("base64").attr("b64encode")(pickled).attr("decode")());
    fn->set_name(kClientFunction);
    // Its declared output (declared_spec.h) goes with it; nothing else.
    for (auto arg = fn->mutable_args()->begin(); arg != fn->mutable_args()->end();) {
      arg = arg->first == "output_spec" ? std::next(arg) : fn->mutable_args()->erase(arg);
    }
    (*fn->mutable_args())["pickled"].set_s(text);
    return true;
  }
  const auto* reflection = message->GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  bool shipped = false;
  for (const auto* field : fields) {
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        shipped |= Ship(reflection->MutableRepeatedMessage(message, field, i));
      }
    } else {
      shipped |= Ship(reflection->MutableMessage(message, field));
    }
  }
  return shipped;
}

}  // namespace

void RememberCallable(const Dataset& made, py::function fn) {
  const proto::DatasetDef def = Parse(made);
  if (def.steps().empty()) return;
  const proto::Step& last = def.steps(def.steps_size() - 1);
  const std::string& name = last.has_map() ? last.map().fn().name() : last.filter().fn().name();
  Callables()[name] = std::move(fn);
}

Dataset ShipCallables(const Dataset& dataset) {
  proto::DatasetDef def = Parse(dataset);
  if (!Ship(&def)) return dataset;
  return ValueOrThrow(Dataset::Deserialize(def.SerializeAsString()));
}

}  // namespace sluice::python
