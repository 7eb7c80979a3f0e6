// The secrets the dispatcher hands out as capabilities: each iteration
// client's, so that only the client that joined can heartbeat in its name
// or release it, and each task's read secret, which its worker asks of
// every reader (ids are sequential, so an id proves nothing). Each is an
// HMAC of what it names under a key the dispatcher keeps in work_dir (or
// in memory without one), so that nothing per client or task is journaled
// and secrets outlive a restart.
#ifndef SLUICE_DISPATCHER_CLIENT_SECRETS_H_
#define SLUICE_DISPATCHER_CLIENT_SECRETS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::dispatcher {

class ClientSecrets {
 public:
  // A fresh random key, kept in memory.
  ClientSecrets();
  // The key in `work_dir`/client_secrets.key, created (mode 0600) when
  // missing. Errors name the file.
  static absl::StatusOr<ClientSecrets> Open(const std::string& work_dir);

  // 32 hex digits.
  std::string For(int64_t iteration_client_id) const;
  // Constant time in the secret's contents.
  bool Matches(int64_t iteration_client_id, const std::string& presented) const;
  // A task's read secret: 32 hex digits, never equal to a client's.
  std::string ForTask(int64_t task_id) const;
  // Names the key, and so the state it goes with (TaskDef's
  // dispatcher_incarnation): 32 hex digits.
  std::string Incarnation() const { return Mac("incarnation"); }
  // A restore's proof for one repetition of a job, by what names the job
  // across jobs and dispatchers: its tenant, name and dataset fingerprint.
  std::string ForRestore(const std::string& tenant, const std::string& job_name,
                         const std::string& fingerprint, int64_t repetition) const;
  // The same for an anonymous job, which its id names: the job its read
  // was first saved from (GetOrCreateIterationRequest.restore_job_id).
  std::string ForAnonymousRestore(const std::string& tenant, int64_t job_id, const std::string& fingerprint,
                                  int64_t repetition) const;
  // Secrets under `key` (the cluster token, for restore proofs that every
  // dispatcher of the cluster gives alike).
  static ClientSecrets WithKey(std::string key) { return ClientSecrets(std::move(key)); }

 private:
  std::string Mac(absl::string_view message) const;

  explicit ClientSecrets(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_CLIENT_SECRETS_H_
