#include "client/read/definition_checks.h"

#include <catch2/catch.hpp>

#include "client/dataset_internal.h"
#include "sluice/dataset.h"

namespace sluice::reader {
namespace {

// A zip nested `levels` deep.
proto::DatasetDef NestedZip(int levels) {
  Dataset dataset = Dataset::Range(2);
  for (int i = 0; i < levels; ++i) dataset = Dataset::Zip({dataset, Dataset::Range(2)});
  return internal::DefinitionOf(dataset);
}

TEST_CASE("definition_checks: a definition nested past protobuf's parse limit is refused before sending",
          "[client][hardening]") {
  CHECK(DefinitionDepth(internal::DefinitionOf(Dataset::Range(2))) == 3);  // def, step, range op
  CHECK(DefinitionDepth(NestedZip(1)) == 6);
  CHECK(CheckSendable(NestedZip(28)).ok());
  const absl::Status deep = CheckSendable(NestedZip(60));
  CHECK(deep.code() == absl::StatusCode::kInvalidArgument);
  CHECK(deep.message() ==
        "the pipeline's definition nests 183 messages deep (zip and interleave inside each other add three "
        "levels "
        "each); the service accepts at most 90: nest fewer pipelines");
}

}  // namespace
}  // namespace sluice::reader
