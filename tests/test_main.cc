// The Catch2 entry point for the test binaries. Logs below warnings are
// silenced, so that test output shows failures rather than chatter.
#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
  spdlog::set_level(spdlog::level::warn);
  return Catch::Session().run(argc, argv);
}
