// The secret each iteration client gets with its id, so that only the
// client that created it can release it: an HMAC of the id under a key
// the dispatcher keeps in work_dir (or in memory without one), so that no
// per-client state is journaled and secrets outlive a restart.
#ifndef SLUICE_DISPATCHER_CLIENT_SECRETS_H_
#define SLUICE_DISPATCHER_CLIENT_SECRETS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

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

 private:
  explicit ClientSecrets(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_CLIENT_SECRETS_H_
