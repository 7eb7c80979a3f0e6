#include "common/json_writer.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

namespace sluice {

TEST_CASE("JsonWriter writes objects and arrays with their commas, integers exact", "[common][json]") {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject()
      .String("name", "w\"1")
      .Int("now_ms", int64_t{1764331200123})
      .Double("rate", 0.1)
      .Bool("alive", true)
      .BeginArray("tags")
      .String(nullptr, "gpu")
      .String(nullptr, "a")
      .End(']')
      .BeginArray("empty")
      .End(']')
      .BeginArray("objects")
      .BeginObject()
      .Int("id", -1)
      .End('}')
      .BeginObject()
      .End('}')
      .End(']')
      .End('}');
  CHECK(out ==
        "{\"name\":\"w\\\"1\",\"now_ms\":1764331200123,\"rate\":0.1,\"alive\":true,\"tags\":[\"gpu\",\"a\"],"
        "\"empty\":[],\"objects\":[{\"id\":-1},{}]}");
}

}  // namespace sluice
