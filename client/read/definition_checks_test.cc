#include "client/read/definition_checks.h"

#include <catch2/catch.hpp>
#include <string>

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

// range(3), then a map of a function of this process.
proto::DatasetDef WithLocalMap() {
  proto::DatasetDef def = internal::DefinitionOf(Dataset::Range(3));
  def.add_steps()->mutable_map()->mutable_fn()->set_name(std::string(kLocalFunctionPrefix) + "7");
  return def;
}

TEST_CASE("definition_checks: every op's sub-pipelines are walked, issue 34's too", "[client][hardening]") {
  const std::string refused = "runs a function of this process (local:7, a Python callable";
  proto::DatasetDef concatenated = internal::DefinitionOf(Dataset::Range(2));
  *concatenated.add_steps()->mutable_concatenate()->mutable_pipeline() = WithLocalMap();
  CHECK_THAT(std::string(CheckSendable(concatenated).message()), Catch::StartsWith("step 2 " + refused));
  CHECK(DefinitionDepth(internal::DefinitionOf(Dataset::Range(2).Concatenate(Dataset::Range(2)))) == 6);

  proto::DatasetDef flat = concatenated;
  *flat.mutable_steps(1)->mutable_flat_map()->mutable_pipeline() = WithLocalMap();
  CHECK_THAT(std::string(CheckSendable(flat).message()), Catch::StartsWith("step 2 " + refused));

  proto::DatasetDef sampled;
  auto* sample = sampled.add_steps()->mutable_sample_from_datasets();
  *sample->add_datasets() = internal::DefinitionOf(Dataset::Range(2));
  *sample->add_datasets() = WithLocalMap();
  CHECK_THAT(std::string(CheckSendable(sampled).message()), Catch::StartsWith("step 1 " + refused));

  proto::DatasetDef chosen;
  auto* choose = chosen.add_steps()->mutable_choose_from_datasets();
  *choose->add_datasets() = internal::DefinitionOf(Dataset::Range(2));
  *choose->mutable_choice_pipeline() = WithLocalMap();
  CHECK_THAT(std::string(CheckSendable(chosen).message()), Catch::StartsWith("step 1 " + refused));
  *choose->mutable_choice_pipeline() = internal::DefinitionOf(Dataset::Range(1));
  CHECK(CheckSendable(chosen).ok());
}

}  // namespace
}  // namespace sluice::reader
