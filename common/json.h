// JSON rendering of elements, as printed by `sluice run` and `sluice read`.
//
// A scalar is a JSON number (or true/false); a tensor is nested arrays; an
// element of several components is an array of them, or an object when the
// components are named. Strings are JSON strings; bytes that are not valid
// UTF-8 are base64 with a "b64:" prefix. Non-finite floats are written as
// NaN, Infinity and -Infinity, as Python's json module does.
#ifndef SLUICE_COMMON_JSON_H_
#define SLUICE_COMMON_JSON_H_

#include <string>
#include <string_view>

#include "sluice/element.h"

namespace sluice {

std::string ElementToJson(const Element& element);
void AppendTensorJson(const Tensor& tensor, std::string* out);
void AppendJsonString(std::string_view bytes, std::string* out);

}  // namespace sluice

#endif  // SLUICE_COMMON_JSON_H_
