// Tests of CheckDefinitionLimits (definition_limits.cc) on sub-pipelines:
// a bound is checked wherever a step sits. The service's refusals of whole
// definitions are in tests/integration/limits_test.cc.
#include "pipeline/definition_limits.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// range(3), then a batch past the limit.
proto::DatasetDef OverBatched() {
  proto::DatasetDef def;
  def.add_steps()->mutable_range()->set_stop(3);
  def.add_steps()->mutable_batch()->set_batch_size(kMaxBatchSize + 1);
  return def;
}

TEST_CASE("definition_limits: bounds hold inside every op's sub-pipelines", "[pipeline][hardening]") {
  const std::string batch =
      absl::StrCat("step 2 (batch): batch_size ", kMaxBatchSize + 1, " is past the limit of ", kMaxBatchSize);
  proto::DatasetDef concatenated;
  concatenated.add_steps()->mutable_range()->set_stop(3);
  *concatenated.add_steps()->mutable_concatenate()->mutable_pipeline() = OverBatched();
  CHECK(CheckDefinitionLimits(concatenated).message() == absl::StrCat("step 2 (concatenate): ", batch));

  proto::DatasetDef flat = concatenated;
  *flat.mutable_steps(1)->mutable_flat_map()->mutable_pipeline() = OverBatched();
  CHECK(CheckDefinitionLimits(flat).message() == absl::StrCat("step 2 (flat_map): ", batch));

  proto::DatasetDef sampled;
  auto* sample = sampled.add_steps()->mutable_sample_from_datasets();
  sample->add_datasets()->add_steps()->mutable_range()->set_stop(1);
  *sample->add_datasets() = OverBatched();
  CHECK(CheckDefinitionLimits(sampled).message() == absl::StrCat("step 1 (sample_from_datasets): ", batch));

  proto::DatasetDef chosen;
  auto* choose = chosen.add_steps()->mutable_choose_from_datasets();
  choose->add_datasets()->add_steps()->mutable_range()->set_stop(1);
  *choose->mutable_choice_pipeline() = OverBatched();
  CHECK(CheckDefinitionLimits(chosen).message() == absl::StrCat("step 1 (choose_from_datasets): ", batch));
  choose->mutable_choice_pipeline()->mutable_steps(1)->mutable_batch()->set_batch_size(2);
  CHECK(CheckDefinitionLimits(chosen).ok());
}

}  // namespace
}  // namespace sluice
