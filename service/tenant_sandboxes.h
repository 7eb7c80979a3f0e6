// Each tenant's pipeline sandbox on a daemon of tenants (auth.clients):
// the daemon's data_roots, shared by all, plus the tenant's own, and a
// cache_dir of its own, so that no tenant reads another's files or caches
// (issue 50). The process's sandbox then reads nothing: a pipeline runs
// under its tenant's (ScopedPipelineSandbox), or fails closed.
#ifndef SLUICE_SERVICE_TENANT_SANDBOXES_H_
#define SLUICE_SERVICE_TENANT_SANDBOXES_H_

#include "absl/status/status.h"
#include "pipeline/sandbox.h"
#include "service/server_security.h"

namespace sluice {

// With tenants in `security`, sets each one's sandbox (SetTenantSandboxes;
// the single client token, if any, is the tenant "") from `shared`, the
// daemon's own, and then makes the process's sandbox need a tenant. A
// tenant without a cache_dir gets DIR/tenants/NAME (mode 0700) under the
// daemon's cache_dir DIR. InvalidArgument naming the tenant and setting
// when a root or cache_dir is not a directory this user may use. Without
// tenants, changes nothing.
absl::Status SetUpTenantSandboxes(const ServerSecurity& security, const PipelineSandbox& shared);

}  // namespace sluice

#endif  // SLUICE_SERVICE_TENANT_SANDBOXES_H_
