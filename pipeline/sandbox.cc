#include "pipeline/sandbox.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/builder.h"
#include "pipeline/io/object_url.h"

namespace sluice {
namespace {

absl::Mutex sandbox_mu(absl::kConstInit);
PipelineSandbox* current_sandbox ABSL_GUARDED_BY(sandbox_mu) = nullptr;
std::map<std::string, std::shared_ptr<const PipelineSandbox>>* tenant_sandboxes ABSL_GUARDED_BY(sandbox_mu) =
    nullptr;
thread_local std::shared_ptr<const PipelineSandbox> thread_sandbox;

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root ||
         (path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/');
}

std::string OwnerOf(const PipelineSandbox& sandbox) {
  const std::string owner = sandbox.owner.empty() ? "this daemon" : sandbox.owner;
  return sandbox.tenant.empty() ? owner : absl::StrCat(owner, " for tenant '", sandbox.tenant, "'");
}

// A read on a daemon of tenants that runs under no tenant's sandbox: one
// made with the cluster token, which is no tenant's.
absl::Status NoTenant(const PipelineSandbox& sandbox, const std::string& path) {
  return absl::PermissionDeniedError(absl::StrCat(
      "'", path, "': ", OwnerOf(sandbox),
      " reads files only for a tenant (auth.clients), under that tenant's data roots, and this read is for "
      "none: run the pipeline with a tenant's token (the cluster token is no tenant's)"));
}

absl::Status NoRoots(const PipelineSandbox& sandbox, const std::string& path) {
  return absl::PermissionDeniedError(absl::StrCat(
      "'", path, "': ", OwnerOf(sandbox),
      " has no data roots, so file sources read nothing (on a daemon of several tenants no roots means "
      "none, not every path): give the tenant data_roots in its auth.clients entry, or the daemon "
      "data_roots that every tenant shares"));
}

// The refusal that comes before the data roots are looked at, if any.
std::optional<absl::Status> RefusedForAnyPath(const PipelineSandbox& sandbox, const std::string& path) {
  if (!sandbox.enabled) return std::nullopt;
  if (sandbox.needs_tenant) return NoTenant(sandbox, path);
  if (sandbox.reads_no_files) return NoRoots(sandbox, path);
  return std::nullopt;
}

absl::Status CheckResolved(const PipelineSandbox& sandbox, const std::string& resolved,
                           const std::string& path) {
  for (const std::string& root : sandbox.data_roots) {
    if (IsUnder(resolved, root)) return absl::OkStatus();
  }
  // The cache op reads its own files back through the file sources' reader.
  if (!sandbox.cache_dir.empty() && IsUnder(resolved, sandbox.cache_dir)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("'", path, "'", resolved != path ? absl::StrCat(" (resolved: '", resolved, "')") : "",
                   " is outside the data roots of ", OwnerOf(sandbox), " (",
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

// `path` resolved, or InvalidArgument naming `setting` when it is not an
// existing directory.
absl::StatusOr<std::string> CanonicalDirectory(const char* setting, const std::string& path) {
  char resolved[PATH_MAX];
  if (path.empty() || realpath(path.c_str(), resolved) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(setting, ": '", path, "' does not exist"));
  }
  std::error_code error;
  if (!std::filesystem::is_directory(resolved, error)) {
    return absl::InvalidArgumentError(absl::StrCat(setting, ": '", path, "' is not a directory"));
  }
  return std::string(resolved);
}

// What a file that is not a regular one is, for messages.
const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
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
  current_sandbox->owner = owner;
  if (tenant_sandboxes == nullptr) return;
  for (auto& [tenant, sandbox] : *tenant_sandboxes) {
    auto renamed = std::make_shared<PipelineSandbox>(*sandbox);
    renamed->owner = owner;
    sandbox = std::move(renamed);
  }
}

PipelineSandbox CurrentPipelineSandbox() {
  if (thread_sandbox != nullptr) return *thread_sandbox;
  absl::MutexLock lock(&sandbox_mu);
  return current_sandbox == nullptr ? PipelineSandbox{} : *current_sandbox;
}

void SetTenantSandboxes(std::map<std::string, PipelineSandbox> sandboxes) {
  auto made = std::make_unique<std::map<std::string, std::shared_ptr<const PipelineSandbox>>>();
  for (auto& [tenant, sandbox] : sandboxes) {
    sandbox.tenant = tenant;
    (*made)[tenant] = std::make_shared<const PipelineSandbox>(std::move(sandbox));
  }
  absl::MutexLock lock(&sandbox_mu);
  delete tenant_sandboxes;
  tenant_sandboxes = made.release();
}

std::shared_ptr<const PipelineSandbox> TenantPipelineSandbox(const std::string& tenant) {
  absl::MutexLock lock(&sandbox_mu);
  if (tenant_sandboxes == nullptr) return nullptr;
  const auto found = tenant_sandboxes->find(tenant);
  return found == tenant_sandboxes->end() ? nullptr : found->second;
}

ScopedPipelineSandbox::ScopedPipelineSandbox(std::shared_ptr<const PipelineSandbox> sandbox)
    : previous_(std::move(thread_sandbox)) {
  thread_sandbox = std::move(sandbox);
}

ScopedPipelineSandbox::~ScopedPipelineSandbox() { thread_sandbox = std::move(previous_); }

std::shared_ptr<const PipelineSandbox> ThreadPipelineSandbox() { return thread_sandbox; }

absl::StatusOr<std::vector<std::string>> CanonicalDataRoots(const std::vector<std::string>& roots) {
  std::vector<std::string> canonical;
  for (const std::string& root : roots) {
    if (io::HasUrlScheme(root)) {
      absl::StatusOr<io::ObjectUrl> url = io::ParseObjectUrl(root);
      if (!url.ok()) return absl::InvalidArgumentError(absl::StrCat("data_roots: ", url.status().message()));
      // A root is a prefix of whole path segments: s3://b/train/ must not
      // admit s3://b/train-private/.
      canonical.push_back(absl::EndsWith(root, "/") ? root : absl::StrCat(root, "/"));
      continue;
    }
    absl::StatusOr<std::string> directory = CanonicalDirectory("data_roots", root);
    if (!directory.ok()) return directory.status();
    canonical.push_back(*std::move(directory));
  }
  return canonical;
}

absl::StatusOr<std::string> CanonicalCacheDir(const std::string& dir) {
  absl::StatusOr<std::string> canonical = CanonicalDirectory("cache_dir", dir);
  if (!canonical.ok()) return canonical.status();
  if (access(canonical->c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache_dir: '", dir, "' is not writable by this user: ", std::strerror(errno)));
  }
  return canonical;
}

absl::StatusOr<std::string> CacheFilePath(const std::string& filename) {
  const std::filesystem::path name(filename);
  if (filename.empty() || !name.has_filename() || name.filename() == "." || name.filename() == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("cache: filename '", filename, "' names no file (its files are FILENAME.data, ...)"));
  }
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (!sandbox.enabled) return filename;
  if (sandbox.needs_tenant) return NoTenant(sandbox, filename);
  if (sandbox.cache_dir.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("cache: ", OwnerOf(sandbox),
                     " has no cache_dir, so pipelines cannot write file caches on it ('", filename,
                     "'); the operator sets cache_dir, a directory the worker may write, or the pipeline "
                     "caches in memory (no filename)"));
  }
  const std::filesystem::path full = name.is_absolute() ? name : sandbox.cache_dir / name;
  // The directory resolved, the file's own name kept: FILENAME is a prefix
  // of the names the cache writes, never a file of its own.
  const std::string directory = Resolve(full.parent_path().string());
  if (!IsUnder(directory, sandbox.cache_dir)) {
    return absl::PermissionDeniedError(
        absl::StrCat("cache: '", filename, "' (in '", directory, "') is outside the cache_dir of ",
                     OwnerOf(sandbox), " (", sandbox.cache_dir,
                     "): pipelines write file caches only under cache_dir (a relative filename is "
                     "taken relative to it)"));
  }
  return (std::filesystem::path(directory) / name.filename()).string();
}

absl::Status CheckReadableUrl(const std::string& url) {
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (std::optional<absl::Status> refused = RefusedForAnyPath(sandbox, url)) return *refused;
  if (!sandbox.enabled || sandbox.data_roots.empty()) return absl::OkStatus();
  for (const std::string& root : sandbox.data_roots) {
    // The root's own folder ("s3://b/images" for the root s3://b/images/)
    // lists what is under it.
    if (io::HasUrlScheme(root) && (absl::StartsWith(url, root) || url + "/" == root)) {
      // ".." segments could climb out of the prefix on the server's side.
      if (absl::StrContains(url, "/../") || absl::EndsWith(url, "/..") || absl::StrContains(url, "/./"))
        break;
      return absl::OkStatus();
    }
  }
  return absl::PermissionDeniedError(
      absl::StrCat("'", url, "' is outside the data roots of ", OwnerOf(sandbox), " (",
                   absl::StrJoin(sandbox.data_roots, ", "), "): file sources read only under data_roots"));
}

absl::Status CheckReadablePath(const std::string& path) {
  if (io::HasUrlScheme(path)) return CheckReadableUrl(path);
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (std::optional<absl::Status> refused = RefusedForAnyPath(sandbox, path)) return *refused;
  if (!sandbox.enabled || sandbox.data_roots.empty()) return absl::OkStatus();
  return CheckResolved(sandbox, Resolve(path), path);
}

absl::Status CheckOpenedFile(int fd, const std::string& path) {
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (std::optional<absl::Status> refused = RefusedForAnyPath(sandbox, path)) return *refused;
  if (!sandbox.enabled || sandbox.data_roots.empty()) return absl::OkStatus();
  char resolved[PATH_MAX];
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = readlink(link.c_str(), resolved, sizeof(resolved) - 1);
  if (n <= 0) return CheckResolved(sandbox, Resolve(path), path);
  return CheckResolved(sandbox, std::string(resolved, static_cast<size_t>(n)), path);
}

absl::StatusOr<int> OpenDataFile(const std::string& path, const std::string& op) {
  // Checked before the open too, so that a path outside the data roots is
  // never opened (a device could act on it).
  if (absl::Status allowed = CheckReadablePath(path); !allowed.ok()) return allowed;
  const std::string prefix = op.empty() ? "" : op + ": ";
  // O_NONBLOCK: open() of a FIFO returns at once instead of waiting for a
  // writer; O_NOCTTY: a terminal does not become the daemon's.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    std::string message = absl::StrCat(prefix, "cannot open '", path, "': ", std::strerror(error));
    return error == ENOENT ? absl::NotFoundError(message) : absl::PermissionDeniedError(message);
  }
  // Closed on every way out but success (a message's allocation may throw).
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) close(fd);
    }
  } closer{fd};
  if (absl::Status allowed = CheckOpenedFile(fd, path); !allowed.ok()) return allowed;
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(prefix, "cannot open '", path, "': fstat: ", std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    // A FIFO or a terminal would block the read (and the task) for ever, a
    // directory has no bytes, a device may never end.
    return absl::InvalidArgumentError(absl::StrCat(prefix, "'", path, "' is ", FileKind(info.st_mode),
                                                   ": file sources read only regular files"));
  }
  // Reads block as usual: on a regular file O_NONBLOCK changes nothing, but
  // the descriptor should not say otherwise.
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return absl::InternalError(
        absl::StrCat(prefix, "cannot open '", path, "': fcntl: ", std::strerror(errno)));
  }
  closer.fd = -1;
  return fd;
}

absl::Status RequirePlugin(const std::string& plugin) {
  const PipelineSandbox sandbox = CurrentPipelineSandbox();
  if (!sandbox.enabled) return LoadPlugin(plugin);
  const std::string name = std::filesystem::path(plugin).filename().string();
  for (const std::string& loaded : LoadedPlugins()) {
    if (std::filesystem::path(loaded).filename().string() == name) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("the pipeline needs plugin '", plugin, "', which ",
                                                    OwnerOf(sandbox),
                                                    " has not loaded: a daemon loads only the plugins in its "
                                                    "own config ('plugins:'), never one a request names"));
}

}  // namespace sluice
