#include "pipeline/sandbox.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/builder.h"

namespace sluice {
namespace {

absl::Mutex sandbox_mu(absl::kConstInit);
PipelineSandbox* current_sandbox ABSL_GUARDED_BY(sandbox_mu) = nullptr;

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

absl::Status CheckResolved(const PipelineSandbox& sandbox, const std::string& resolved,
                           const std::string& path) {
  for (const std::string& root : sandbox.data_roots) {
    if (IsUnder(resolved, root)) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "'", path, "'", resolved != path ? absl::StrCat(" (resolved: '", resolved, "')") : "",
      " is outside the data roots of ", sandbox.owner.empty() ? "this daemon" : sandbox.owner, " (",
      absl::StrJoin(sandbox.data_roots, ", "), "): file sources read only under data_roots"));
}

// The canonical form of as much of `path` as exists, with the rest
// appended: a file not there yet still cannot name its way out.
std::string Resolve(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return path;
  return std::filesystem::weakly_canonical(absolute, error).lexically_normal().string();
}

}  // namespace

void SetPipelineSandbox(PipelineSandbox sandbox) {
  absl::MutexLock lock(&sandbox_mu);
  if (current_sandbox == nullptr) {
    current_sandbox = new PipelineSandbox(std::move(sandbox));
  } else {
    *current_sandbox = std::move(sandbox);
  }
}

void SetPipelineSandboxOwner(std::string owner) {
  absl::MutexLock lock(&sandbox_mu);
  if (current_sandbox == nullptr) current_sandbox = new PipelineSandbox();
  current_sandbox->owner = std::move(owner);
}

PipelineSandbox CurrentPipelineSandbox() {
  absl::MutexLock lock(&sandbox_mu);
  return current_sandbox == nullptr ? PipelineSandbox{} : *current_sandbox;
}

absl::StatusOr<std::vector<std::string>> CanonicalDataRoots(const std::vector<std::string>& roots) {
  std::vector<std::string> canonical;
  for (const std::string& root : roots) {
    char resolved[PATH_MAX];
    if (root.empty() || realpath(root.c_str(), resolved) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("data_roots: '", root, "' does not exist"));
    }
    std::error_code error;
    if (!std::filesystem::is_directory(resolved, error)) {
      return absl::InvalidArgumentError(absl::StrCat("data_roots: '", root, "' is not a directory"));
    }
    canonical.push_back(resolved);
  }
  return canonical;
}

absl::Status CheckReadablePath(const std::string& path) {
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (!sandbox.enabled || sandbox.data_roots.empty()) return absl::OkStatus();
  return CheckResolved(sandbox, Resolve(path), path);
}

absl::Status CheckOpenedFile(int fd, const std::string& path) {
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (!sandbox.enabled || sandbox.data_roots.empty()) return absl::OkStatus();
  char resolved[PATH_MAX];
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = readlink(link.c_str(), resolved, sizeof(resolved) - 1);
  if (n <= 0) return CheckResolved(sandbox, Resolve(path), path);
  return CheckResolved(sandbox, std::string(resolved, static_cast<size_t>(n)), path);
}

absl::Status RequirePlugin(const std::string& plugin) {
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (!sandbox.enabled) return LoadPlugin(plugin);
  const std::string name = std::filesystem::path(plugin).filename().string();
  for (const std::string& loaded : LoadedPlugins()) {
    if (std::filesystem::path(loaded).filename().string() == name) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("the pipeline needs plugin '", plugin, "', which ",
                                                    sandbox.owner.empty() ? "this daemon" : sandbox.owner,
                                                    " has not loaded: a daemon loads only the plugins in its "
                                                    "own config ('plugins:'), never one a request names"));
}

}  // namespace sluice
