#include "sluice/metrics.h"

#include <catch2/catch.hpp>
#include <string>

namespace sluice {
namespace {

TEST_CASE("public metrics: a trainer's counter adds up and shows in the process's text",
          "[client][metrics]") {
  IncrementCounter("sluice_public_api_test_total", "Counted by the public metrics test.", 2);
  IncrementCounter("sluice_public_api_test_total", "Counted by the public metrics test.");
  const std::string text = MetricsText();
  CHECK(text.find("# HELP sluice_public_api_test_total Counted by the public metrics test.\n"
                  "# TYPE sluice_public_api_test_total counter\n"
                  "sluice_public_api_test_total 3\n") != std::string::npos);
  // The process's own metrics are there too.
  CHECK(text.find("\nprocess_resident_memory_bytes ") != std::string::npos);
}

}  // namespace
}  // namespace sluice
