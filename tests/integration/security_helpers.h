// What the integration tests of auth share: the tokens, their files and
// flags, and the process's channel security for one test.
#ifndef SLUICE_TESTS_INTEGRATION_SECURITY_HELPERS_H_
#define SLUICE_TESTS_INTEGRATION_SECURITY_HELPERS_H_

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "service/channel_security.h"
#include "tests/testing/test_util.h"

namespace sluice::testing {

inline constexpr char kClusterToken[] = "cluster-0123456789abcdef";
inline constexpr char kClientToken[] = "client-fedcba9876543210";

// The process's channel security for one test, reset after.
class ScopedClientSecurity {
 public:
  explicit ScopedClientSecurity(ChannelSecurity security) { SetDefaultChannelSecurity(std::move(security)); }
  ~ScopedClientSecurity() { SetDefaultChannelSecurity({}); }
};

// Token files (mode 0400) in `dir`; the flags that name them.
inline std::vector<std::string> TokenFlags(const TempDir& dir) {
  WriteFile(dir.File("cluster.token"), std::string(kClusterToken) + "\n");
  WriteFile(dir.File("client.token"), std::string(kClientToken) + "\n");
  std::filesystem::permissions(dir.File("cluster.token"), std::filesystem::perms::owner_read);
  std::filesystem::permissions(dir.File("client.token"), std::filesystem::perms::owner_read);
  return {"--auth-cluster-token-file", dir.File("cluster.token"), "--auth-client-token-file",
          dir.File("client.token")};
}

// The cluster token's flags, and for each tenant a token file (mode
// 0400, "token-of-NAME-0123456789") and its --auth-clients flag: a cluster
// of tenants without the single client token.
inline std::vector<std::string> TenantFlags(const TempDir& dir, const std::vector<std::string>& tenants) {
  std::vector<std::string> flags = TokenFlags(dir);
  flags.resize(2);
  for (const std::string& tenant : tenants) {
    const std::string file = dir.File(tenant + ".token");
    WriteFile(file, "token-of-" + tenant + "-0123456789\n");
    std::filesystem::permissions(file, std::filesystem::perms::owner_read);
    flags.insert(flags.end(), {"--auth-clients", "name=" + tenant + ",token_file=" + file});
  }
  return flags;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_INTEGRATION_SECURITY_HELPERS_H_
