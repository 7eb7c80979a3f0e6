#include "pipeline/declared_spec.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

proto::AttrValue Type(const std::string& type) {
  proto::AttrValue value;
  value.set_s(type);
  return value;
}

std::string ErrorOf(const proto::AttrValue& value) {
  absl::StatusOr<ElementSpec> spec = ParseDeclaredSpec(value, "py:aug.jitter");
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST_CASE("declared_spec: a type, a list of types or a map of names", "[pipeline]") {
  proto::AttrValue named;
  (*named.mutable_map()->mutable_entries())["label"] = Type("int64");
  (*named.mutable_map()->mutable_entries())["image"] = Type("float32[?, ?,3]");
  (*named.mutable_map()->mutable_entries())["ids"] = Type("int32[]");
  (*named.mutable_map()->mutable_entries())["any"] = Type("uint8[...]");
  absl::StatusOr<ElementSpec> spec = ParseDeclaredSpec(named, "py:aug.jitter");
  REQUIRE(spec.ok());
  // Sorted by name: a map in a definition keeps no order.
  CHECK(spec->names == std::vector<std::string>{"any", "ids", "image", "label"});
  CHECK(spec->components ==
        std::vector<TensorSpec>{{PartialShape::UnknownRank(), DType::kUInt8},
                                {PartialShape::Known({kUnknownDim}), DType::kInt32},
                                {PartialShape::Known({kUnknownDim, kUnknownDim, 3}), DType::kFloat32},
                                {PartialShape::Known({}), DType::kInt64}});
  std::vector<std::string> written;
  for (const TensorSpec& component : spec->components) written.push_back(DeclaredTypeName(component));
  CHECK(written == std::vector<std::string>{"uint8[...]", "int32[?]", "float32[?,?,3]", "int64"});
  // Written back, it declares the same.
  absl::StatusOr<ElementSpec> again = ParseDeclaredSpec(DeclaredSpecToAttr(*spec), "f");
  REQUIRE(again.ok());
  CHECK(*again == *spec);

  proto::AttrValue tuple;
  *tuple.mutable_list()->add_values() = Type("string");
  *tuple.mutable_list()->add_values() = Type("bool[2]");
  spec = ParseDeclaredSpec(tuple, "f");
  REQUIRE(spec.ok());
  CHECK(spec->names.empty());
  CHECK(spec->components == std::vector<TensorSpec>{{PartialShape::Known({}), DType::kString},
                                                    {PartialShape::Known({2}), DType::kBool}});
  spec = ParseDeclaredSpec(Type("float64"), "f");
  REQUIRE(spec.ok());
  CHECK(spec->components == std::vector<TensorSpec>{{PartialShape::Known({}), DType::kFloat64}});
}

TEST_CASE("declared_spec: what does not parse is named", "[pipeline]") {
  constexpr char kForms[] =
      "a dtype, with [d, ...] for a shape (? for an unknown size, [] for a vector, [...] for any rank), as "
      "in "
      "\"float32[?,?,3]\"";
  CHECK_THAT(ErrorOf(Type("flaot32[3]")),
             Catch::Matchers::StartsWith("py:aug.jitter: output_spec: 'flaot32[3]' is not a type ("));
  CHECK(ErrorOf(Type("int64[3")) ==
        absl::StrCat("py:aug.jitter: output_spec: 'int64[3' is not a type (no closing ]): write ", kForms));
  CHECK(
      ErrorOf(Type("int64[3,x]")) ==
      absl::StrCat("py:aug.jitter: output_spec: 'int64[3,x]' is not a type (size 'x' is neither a count nor "
                   "?): write ",
                   kForms));
  CHECK(
      ErrorOf(Type("int64[-2]")) ==
      absl::StrCat("py:aug.jitter: output_spec: 'int64[-2]' is not a type (size '-2' is neither a count nor "
                   "?): write ",
                   kForms));
  proto::AttrValue named;
  (*named.mutable_map()->mutable_entries())["image"].set_i(3);
  CHECK(ErrorOf(named) == absl::StrCat("py:aug.jitter: output_spec 'image' must be a type: ", kForms));
  proto::AttrValue empty;
  empty.mutable_list();
  CHECK(ErrorOf(empty) == "py:aug.jitter: output_spec declares no component");
  proto::AttrValue number;
  number.set_i(1);
  CHECK(ErrorOf(number) ==
        absl::StrCat(
            "py:aug.jitter: output_spec must be a type, a list of types or a map of component names to "
            "types; a type is ",
            kForms));
}

}  // namespace
}  // namespace sluice
