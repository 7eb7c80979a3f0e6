#include "pipeline/python_wire.h"

#include <simdjson.h>

#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace sluice {
namespace {

void AppendAttrJson(const proto::AttrValue& value, std::string* out) {
  switch (value.value_case()) {
    case proto::AttrValue::kI:
      absl::StrAppend(out, value.i());
      return;
    case proto::AttrValue::kF:
      absl::StrAppend(out, value.f());
      return;
    case proto::AttrValue::kS:
      AppendJsonString(value.s(), out);
      return;
    case proto::AttrValue::kB:
      absl::StrAppend(out, value.b() ? "true" : "false");
      return;
    case proto::AttrValue::kList: {
      out->push_back('[');
      for (int i = 0; i < value.list().values_size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendAttrJson(value.list().values(i), out);
      }
      out->push_back(']');
      return;
    }
    case proto::AttrValue::kMap: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, entry] : value.map().entries()) {
        if (!first) out->push_back(',');
        first = false;
        AppendJsonString(key, out);
        out->push_back(':');
        AppendAttrJson(entry, out);
      }
      out->push_back('}');
      return;
    }
    default:
      absl::StrAppend(out, "null");
  }
}

absl::Status Malformed(const std::string& what, const std::string& why) {
  return absl::InternalError(absl::StrCat(what, ": a malformed reply from its Python process (", why, ")"));
}

}  // namespace

std::string FunctionArgsToJson(const google::protobuf::Map<std::string, proto::AttrValue>& args) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : args) {
    if (!first) out.push_back(',');
    first = false;
    AppendJsonString(key, &out);
    out.push_back(':');
    AppendAttrJson(value, &out);
  }
  out.push_back('}');
  return out;
}

PythonFrame EncodePythonCall(const std::string& fn, const std::string& args_json, uint64_t seed,
                             const Element& element, int64_t state_components) {
  PythonFrame frame;
  std::string& h = frame.header;
  h = "{\"fn\":";
  AppendJsonString(fn, &h);
  // The seed as a non-negative int63, which JSON and Python carry exactly.
  absl::StrAppend(&h, ",\"args\":", args_json, ",\"seed\":", seed >> 1,
                  ",\"state_components\":", state_components, ",\"names\":[");
  if (element.named()) {
    for (size_t i = 0; i < element.names->size(); ++i) {
      if (i > 0) h.push_back(',');
      AppendJsonString((*element.names)[i], &h);
    }
  }
  h += "],\"components\":[";
  uint64_t total = 0;
  for (size_t i = 0; i < element.components.size(); ++i) {
    const Tensor& t = element.components[i];
    if (i > 0) h.push_back(',');
    h += "{\"dtype\":";
    AppendJsonString(t.dtype() == DType::kString ? "string" : DTypeName(t.dtype()), &h);
    h += ",\"shape\":[";
    for (size_t d = 0; d < t.shape().size(); ++d) absl::StrAppend(&h, d > 0 ? "," : "", t.shape()[d]);
    h.push_back(']');
    if (t.dtype() == DType::kString) {
      h += ",\"lengths\":[";
      bool first = true;
      for (const std::string& s : t.values<std::string>()) {
        absl::StrAppend(&h, first ? "" : ",", s.size());
        first = false;
        frame.payload.emplace_back(s.data(), s.size());
        total += s.size();
      }
      h.push_back(']');
    } else {
      absl::StrAppend(&h, ",\"nbytes\":", t.ByteSize());
      frame.payload.emplace_back(static_cast<const char*>(t.raw_data()), t.ByteSize());
      total += t.ByteSize();
    }
    h.push_back('}');
  }
  absl::StrAppend(&h, "],\"payload_bytes\":", total, "}");
  return frame;
}

absl::StatusOr<PayloadPlace> PayloadOf(const std::string& header) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(header).get_object().get(object)) return Malformed("python", "not a JSON object");
  PayloadPlace place;
  if (object["payload_bytes"].get_uint64().get(place.bytes)) place.bytes = 0;
  if (object["shm"].get_bool().get(place.shared)) place.shared = false;
  return place;
}

std::string PythonErrorOf(const std::string& header) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(header).get_object().get(object)) return "a reply that is not a JSON object";
  bool ok = false;
  if (!object["ok"].get_bool().get(ok) && ok) return "";
  std::string_view type, message;
  if (object["type"].get_string().get(type)) type = "Error";
  if (object["message"].get_string().get(message)) message = "";
  return absl::StrCat(std::string(type), ": ", std::string(message));
}

absl::StatusOr<Element> DecodePythonReply(const std::string& header, std::string_view payload,
                                          const std::string& what) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(header).get_object().get(object)) return Malformed(what, "not a JSON object");
  bool ok = false;
  if (object["ok"].get_bool().get(ok)) return Malformed(what, "no 'ok'");
  if (!ok) {
    std::string_view trace;
    if (object["traceback"].get_string().get(trace)) trace = "";
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", PythonErrorOf(header),
                                                   trace.empty() ? "" : "\nTraceback (last frames):\n",
                                                   std::string(trace)));
  }
  std::vector<std::string> names;
  simdjson::dom::array name_list;
  if (!object["names"].get_array().get(name_list)) {
    for (simdjson::dom::element name : name_list) {
      std::string_view text;
      if (name.get_string().get(text)) return Malformed(what, "a name that is not a string");
      names.emplace_back(text);
    }
  }
  simdjson::dom::array components;
  if (object["components"].get_array().get(components)) return Malformed(what, "no 'components'");
  std::vector<Tensor> tensors;
  size_t offset = 0;
  for (simdjson::dom::element c : components) {
    std::string_view dtype_name;
    simdjson::dom::array dims;
    if (c["dtype"].get_string().get(dtype_name) || c["shape"].get_array().get(dims)) {
      return Malformed(what, "a component without dtype or shape");
    }
    Shape shape;
    for (simdjson::dom::element d : dims) {
      int64_t dim = 0;
      if (d.get_int64().get(dim) || dim < 0) return Malformed(what, "a bad dimension");
      shape.push_back(dim);
    }
    if (dtype_name == "string") {
      simdjson::dom::array lengths;
      if (c["lengths"].get_array().get(lengths)) return Malformed(what, "a string component without lengths");
      std::vector<std::string> values;
      for (simdjson::dom::element l : lengths) {
        uint64_t n = 0;
        if (l.get_uint64().get(n) || n > payload.size() - offset)
          return Malformed(what, "a bad string length");
        values.emplace_back(payload.data() + offset, n);
        offset += n;
      }
      if (static_cast<int64_t>(values.size()) != NumElements(shape)) {
        return Malformed(what, "string count and shape differ");
      }
      Tensor t(DType::kString, shape);
      std::string* out = t.mutable_data<std::string>();
      for (size_t i = 0; i < values.size(); ++i) out[i] = std::move(values[i]);
      tensors.push_back(std::move(t));
      continue;
    }
    absl::StatusOr<DType> dtype = ParseDType(dtype_name);
    uint64_t nbytes = 0;
    if (!dtype.ok() || c["nbytes"].get_uint64().get(nbytes)) return Malformed(what, "a bad dtype or nbytes");
    if (nbytes > payload.size() - offset ||
        nbytes != static_cast<uint64_t>(NumElements(shape)) * static_cast<uint64_t>(DTypeSize(*dtype))) {
      return Malformed(what, "nbytes does not fit the shape or the payload");
    }
    Tensor t = Tensor::Uninitialized(*dtype, shape);
    if (nbytes > 0) std::memcpy(t.mutable_raw_data(), payload.data() + offset, nbytes);
    offset += nbytes;
    tensors.push_back(std::move(t));
  }
  if (!names.empty() && names.size() != tensors.size()) return Malformed(what, "names and components differ");
  return Element(std::move(tensors), MakeNames(names));
}

}  // namespace sluice
