// A worker's pool of Python processes (/usr/bin/python3 running
// python/sluice/_worker_host.py, which the binary carries), which run the
// `py:` element functions of pipelines: N processes, started when first
// needed and kept, each doing one call at a time, so that calls run in
// parallel without one GIL. A process that dies (a segfault in an
// extension), passes max_rss_bytes or outlives call_timeout_ms fails that
// call with a clear error and is killed; the next call starts another.
// Tensor bytes cross through memory each process shares with the worker
// (kSharedBytes, half each way; larger ones go over the socket).
#ifndef SLUICE_PIPELINE_PYTHON_POOL_H_
#define SLUICE_PIPELINE_PYTHON_POOL_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/python_wire.h"
#include "sluice/element.h"

namespace sluice {

struct PythonSettings {
  std::vector<std::string> path;     // put first on the processes' sys.path
  std::vector<std::string> modules;  // imported at start; the only ones pipelines may name
  int64_t processes = 2;
  int64_t max_rss_bytes = 0;  // 0: no limit
  int64_t call_timeout_ms = 60000;
  std::string interpreter = "/usr/bin/python3";
  // Run the callables clients ship (py:__client__.call, cloudpickled):
  // remote code execution for every holder of the client token.
  bool allow_client_functions = false;
  // Accept allow_client_functions on a daemon of several tenants, whose
  // isolation it ends: a client's function runs beside every tenant's and
  // the operator's modules, reads what the daemon can, and can change them.
  bool allow_client_functions_with_tenants = false;
  // Local use only (no daemon): import a module when a call first names it.
  bool import_on_call = false;
};

class PythonPool {
 public:
  static constexpr size_t kSharedBytes = size_t{64} << 20;

  PythonPool(PythonSettings settings, std::string owner);
  ~PythonPool();
  PythonPool(const PythonPool&) = delete;
  PythonPool& operator=(const PythonPool&) = delete;

  // Starts every process now, in parallel (kept for the first calls):
  // FailedPrecondition naming the module when one does not import.
  absl::Status StartAll();
  // Runs `request` (EncodePythonCall) in a free process; `what` names the
  // function in errors.
  absl::StatusOr<Element> Call(const std::string& what, const PythonFrame& request);

  const PythonSettings& settings() const { return settings_; }

 private:
  struct Process {
    pid_t pid = -1;
    int fd = -1;
    // Shared with the process (a memfd): requests' tensor bytes in the
    // first half, replies' in the second, when they fit.
    char* shared = nullptr;
  };
  absl::StatusOr<std::unique_ptr<Process>> Spawn();
  absl::StatusOr<std::unique_ptr<Process>> Acquire();
  void Release(std::unique_ptr<Process> process);
  // Kills the process and says how it ended.
  std::string Discard(std::unique_ptr<Process> process, bool kill_it);
  // Reads one frame within `deadline_ms`, checking the process's memory.
  // *payload views the shared reply half, or *storage read from the socket.
  absl::Status ReadFrame(Process& process, int64_t deadline_ms, const std::string& what, std::string* header,
                         std::string_view* payload, std::string* storage);

  const PythonSettings settings_;
  const std::string owner_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Process>> idle_ ABSL_GUARDED_BY(mu_);
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;  // processes idle or in a call
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_PYTHON_POOL_H_
