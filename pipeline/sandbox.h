// What a daemon lets a pipeline that came over the network do. A pipeline
// may name plugins but never loads one: the daemon's operator loads them
// from its own config, and a pipeline naming one that is not loaded is
// refused. File sources read only under the operator's data roots, checked
// on the path the file was actually opened at (after symlinks and ".."),
// so that a client cannot read /etc/passwd or the dispatcher's journal as
// text_line elements.
//
// A pipeline's file caches (the cache op) are written only under the
// operator's cache_dir: a pipeline names a file, the operator decides
// where files may be written. The cache op reads its files back through
// the file sources' reader, so cache_dir counts as a data root too.
//
// Off (the default, for the CLI and the SDK reading locally), pipelines
// load their plugins, read any path their user can and write their
// caches wherever they name.
#ifndef SLUICE_PIPELINE_SANDBOX_H_
#define SLUICE_PIPELINE_SANDBOX_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice {

struct PipelineSandbox {
  bool enabled = false;
  // Canonical directories and URL prefixes (CanonicalDataRoots); empty:
  // any path or URL.
  std::vector<std::string> data_roots;
  // Canonical directory (CanonicalCacheDir) file caches are written under;
  // empty: pipelines cannot write file caches.
  std::string cache_dir;
  // Who refuses, for messages: "worker 10.0.0.5:6000".
  std::string owner;
  // The tenant (auth.clients) whose sandbox this is; messages name it.
  std::string tenant;
  // The process's sandbox on a daemon of tenants: file sources read
  // nothing under it, since each tenant's pipeline runs under the tenant's
  // own (ScopedPipelineSandbox). A thread that lacks its tenant's scope
  // fails closed rather than reading under every tenant's roots.
  bool needs_tenant = false;
  // A tenant of a daemon of several whose sandbox has no data roots (none
  // of its own, none shared): it reads no files, since "no roots" meaning
  // "every path" would let it read the other tenants'.
  bool reads_no_files = false;
};

// Process-wide: a daemon sets it once before serving (and again when it
// knows its own address).
void SetPipelineSandbox(PipelineSandbox sandbox);
// This thread's sandbox while a ScopedPipelineSandbox is installed on it,
// the process's otherwise.
PipelineSandbox CurrentPipelineSandbox();
// Names the daemon in refusals, once it knows its address.
void SetPipelineSandboxOwner(std::string owner);

// A daemon of tenants sets each one's sandbox once, before serving: its
// data roots (the shared ones and its own) and its cache_dir.
void SetTenantSandboxes(std::map<std::string, PipelineSandbox> sandboxes);
// `tenant`'s sandbox; null on a daemon without tenant sandboxes, and for a
// tenant it does not know (whose reads then meet the process's sandbox).
std::shared_ptr<const PipelineSandbox> TenantPipelineSandbox(const std::string& tenant);

// Installs `sandbox` as this thread's while it lives (null: none, the
// process's applies), restoring the one before. A daemon installs a
// tenant's around building and running that tenant's pipeline; an op that
// starts threads takes ThreadPipelineSandbox() where it starts them and
// installs it in each, so that what they open is checked for the tenant.
class ScopedPipelineSandbox {
 public:
  explicit ScopedPipelineSandbox(std::shared_ptr<const PipelineSandbox> sandbox);
  ~ScopedPipelineSandbox();
  ScopedPipelineSandbox(const ScopedPipelineSandbox&) = delete;
  ScopedPipelineSandbox& operator=(const ScopedPipelineSandbox&) = delete;

 private:
  std::shared_ptr<const PipelineSandbox> previous_;
};
// The sandbox installed on this thread; null when none is.
std::shared_ptr<const PipelineSandbox> ThreadPipelineSandbox();

// The roots as canonical absolute paths, and URL roots ("s3://b/p/",
// "https://host/sets/") as prefixes ending with '/'; InvalidArgument
// naming a root that does not exist, is not a directory, or is not a
// valid URL.
absl::StatusOr<std::vector<std::string>> CanonicalDataRoots(const std::vector<std::string>& roots);

// cache_dir as a canonical absolute path; InvalidArgument naming it when
// it does not exist, is not a directory or this user cannot write it.
absl::StatusOr<std::string> CanonicalCacheDir(const std::string& dir);

// Where the cache op keeps the files of `filename` (FILENAME.data and its
// siblings): `filename` itself with the sandbox off. With it on, a
// relative filename is taken relative to cache_dir and an absolute one
// must lie under it once its directory is resolved (symlinks, ".."); the
// path returned has that directory resolved. PermissionDenied naming the
// filename, cache_dir and the owner when it does not, or when there is no
// cache_dir; InvalidArgument when `filename` names no file ("dir/").
absl::StatusOr<std::string> CacheFilePath(const std::string& filename);

// PermissionDenied naming `path` and the roots when `path`, resolved,
// is not under a data root. OK when the sandbox is off or has no roots.
// A path that does not exist is checked as far as it resolves.
// A URL ("s3://...", "https://...") is checked by CheckReadableUrl.
absl::Status CheckReadablePath(const std::string& path);
// PermissionDenied naming `url` and the roots unless a URL root
// ("s3://corp-data/imagenet/") is a prefix of it (a root is taken to end
// with '/'); a URL with "." or ".." segments is refused. OK when the
// sandbox is off or has no roots.
absl::Status CheckReadableUrl(const std::string& url);
// The same for a file already opened as `fd` (the check that counts: it
// sees where the open really led).
absl::Status CheckOpenedFile(int fd, const std::string& path);

// Opens a file source's file for reading, with the checks every file
// source makes: the data roots (above), before the open and on where it
// led; NotFound or PermissionDenied ("cannot open 'PATH': why") when it
// cannot be opened; InvalidArgument ("'PATH' is a FIFO: ...") when it is
// not a regular file. The open never blocks: a FIFO without a writer would
// hold its task, and a stopping worker, for ever. A non-empty `op`
// ("image_folder") starts those last two messages. The caller owns the
// descriptor (close-on-exec; reads block as usual).
absl::StatusOr<int> OpenDataFile(const std::string& path, const std::string& op = "");

// A pipeline's `plugins` entry: loaded here when the sandbox is off;
// with it on, FailedPrecondition naming the plugin and the owner unless a
// plugin of that file name was loaded from the daemon's config.
absl::Status RequirePlugin(const std::string& plugin);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_SANDBOX_H_
