#include "service/rpc_auth.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

constexpr char kHowTo[] =
    "send 'Authorization: Bearer TOKEN', or basic auth with the token as the password; the cluster token "
    "sees every tenant, a client token its own";

std::string Basic(const std::string& user_and_password) {
  return "Basic " + absl::Base64Escape(user_and_password);
}

TEST_CASE("rpc_auth: the HTTP port's caller is who its token names", "[rpc_auth]") {
  const RpcAuthenticator auth("cluster-token", "client-token", {{"vision", "vision-token"}}, "metrics-token");
  const auto tenant_of = [&](const std::string& header) {
    absl::StatusOr<Caller> caller = auth.CheckHttp(header);
    REQUIRE(caller.ok());
    return caller->tenant;
  };
  CHECK(tenant_of("Bearer cluster-token") == std::nullopt);
  CHECK(tenant_of("Bearer metrics-token") == std::nullopt);
  CHECK(tenant_of("Bearer client-token") == std::string());
  CHECK(tenant_of("Bearer vision-token") == "vision");
  CHECK(tenant_of(Basic("alice:vision-token")) == "vision");
  CHECK(tenant_of(Basic(":cluster-token")) == std::nullopt);
  // Without a colon, the whole is the token; with two, the password
  // starts after the first.
  CHECK(tenant_of(Basic("vision-token")) == "vision");
  CHECK(!auth.CheckHttp(Basic("user:vision-token:x")).ok());

  const auto refusal = [&](const std::string& header) {
    absl::StatusOr<Caller> caller = auth.CheckHttp(header);
    REQUIRE(!caller.ok());
    CHECK(caller.status().code() == absl::StatusCode::kUnauthenticated);
    return std::string(caller.status().message());
  };
  CHECK(refusal("") == absl::StrCat("this port needs a token: ", kHowTo));
  CHECK(refusal("Bearer nobody") == absl::StrCat("the request carried a wrong token: ", kHowTo));
  CHECK(refusal("Bearer ") == absl::StrCat("the request carried a wrong token: ", kHowTo));
  CHECK(refusal("Basic !!!") == absl::StrCat("the basic auth credentials are not base64: ", kHowTo));
  CHECK(refusal("Token cluster-token") ==
        absl::StrCat("the Authorization header is neither Bearer nor Basic: ", kHowTo));
}

TEST_CASE("rpc_auth: without client tokens the HTTP port is open, as the gRPC port is to clients",
          "[rpc_auth]") {
  const RpcAuthenticator no_tokens("", "");
  const RpcAuthenticator cluster_only("cluster-token", "", {}, "metrics-token");
  for (const RpcAuthenticator* auth : {&no_tokens, &cluster_only}) {
    for (const std::string header : {"", "Bearer wrong", "Bearer cluster-token"}) {
      absl::StatusOr<Caller> caller = auth->CheckHttp(header);
      REQUIRE(caller.ok());
      CHECK(caller->SeesAll());
    }
  }
}

}  // namespace
}  // namespace sluice
