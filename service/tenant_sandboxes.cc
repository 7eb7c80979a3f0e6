#include "service/tenant_sandboxes.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {
namespace {

// DIR/tenants/NAME, made owner-only; the single client token's tenant ""
// gets DIR/tenants/_client_token.
absl::StatusOr<std::string> DefaultCacheDir(const std::string& shared_dir, const std::string& tenant) {
  const std::filesystem::path dir =
      std::filesystem::path(shared_dir) / "tenants" / (tenant.empty() ? "_client_token" : tenant);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || ::chmod(dir.c_str(), 0700) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cache_dir: cannot make tenant '", tenant,
                                                   "''s directory '", dir.string(),
                                                   "': ", error ? error.message() : std::strerror(errno)));
  }
  return CanonicalCacheDir(dir.string());
}

absl::StatusOr<PipelineSandbox> SandboxOf(const PipelineSandbox& shared, const std::string& tenant,
                                          const std::vector<std::string>& own_roots,
                                          const std::string& own_cache_dir) {
  PipelineSandbox sandbox = shared;
  const std::string what = absl::StrCat("auth.clients '", tenant, "' ");
  absl::StatusOr<std::vector<std::string>> roots = CanonicalDataRoots(own_roots);
  if (!roots.ok()) return absl::InvalidArgumentError(absl::StrCat(what, roots.status().message()));
  sandbox.data_roots.insert(sandbox.data_roots.end(), roots->begin(), roots->end());
  sandbox.cache_dir.clear();
  absl::StatusOr<std::string> cache_dir = !own_cache_dir.empty() ? CanonicalCacheDir(own_cache_dir)
                                          : !shared.cache_dir.empty()
                                              ? DefaultCacheDir(shared.cache_dir, tenant)
                                              : absl::StatusOr<std::string>("");
  if (!cache_dir.ok()) return absl::InvalidArgumentError(absl::StrCat(what, cache_dir.status().message()));
  sandbox.cache_dir = *std::move(cache_dir);
  return sandbox;
}

}  // namespace

absl::Status SetUpTenantSandboxes(const ServerSecurity& security, const PipelineSandbox& shared) {
  if (security.tenants.empty()) return absl::OkStatus();
  // With several principals, no roots must mean no files: "any path" would
  // be every other tenant's roots too.
  const bool several = security.tenants.size() + (security.client_token.empty() ? 0 : 1) > 1;
  std::map<std::string, PipelineSandbox> sandboxes;
  if (!security.client_token.empty()) {
    absl::StatusOr<PipelineSandbox> sandbox = SandboxOf(shared, "", {}, "");
    if (!sandbox.ok()) return sandbox.status();
    sandbox->reads_no_files = several && sandbox->data_roots.empty();
    sandboxes[""] = *std::move(sandbox);
  }
  for (const TenantToken& tenant : security.tenants) {
    absl::StatusOr<PipelineSandbox> sandbox =
        SandboxOf(shared, tenant.name, tenant.data_roots, tenant.cache_dir);
    if (!sandbox.ok()) return sandbox.status();
    sandbox->reads_no_files = several && sandbox->data_roots.empty();
    spdlog::info("tenant '{}': file sources read {}; file caches go to {}", tenant.name,
                 sandbox->reads_no_files ? std::string("nothing (no data_roots of its own or shared)")
                 : sandbox->data_roots.empty()
                     ? std::string("any path (no data_roots)")
                     : absl::StrCat("only under ", absl::StrJoin(sandbox->data_roots, ", ")),
                 sandbox->cache_dir.empty() ? std::string("nowhere (no cache_dir)") : sandbox->cache_dir);
    sandboxes[tenant.name] = *std::move(sandbox);
  }
  SetTenantSandboxes(std::move(sandboxes));
  PipelineSandbox process = shared;
  process.needs_tenant = true;
  process.cache_dir.clear();
  SetPipelineSandbox(std::move(process));
  return absl::OkStatus();
}

}  // namespace sluice
