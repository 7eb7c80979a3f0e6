// For the image kernels' tests: runs a test body once per SIMD target that
// this CPU supports and the kernels were compiled for (SSE4, AVX2, ...), so
// that every dispatched path is checked on one machine, not only the best.
#ifndef SLUICE_PIPELINE_IMAGE_HWY_TEST_UTIL_H_
#define SLUICE_PIPELINE_IMAGE_HWY_TEST_UTIL_H_

#include <cstdint>

#include "hwy/targets.h"

namespace sluice::image {

// body(target_name) runs with dispatch forced to one target at a time. The
// override is process-wide, so no other thread may run kernels meanwhile.
template <typename Body>
void ForEachHwyTarget(Body&& body) {
  struct Restore {  // also when a failed REQUIRE throws out of body
    ~Restore() { hwy::SetSupportedTargetsForTest(0); }
  } restore;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    body(hwy::TargetName(target));
  }
}

}  // namespace sluice::image

#endif  // SLUICE_PIPELINE_IMAGE_HWY_TEST_UTIL_H_
