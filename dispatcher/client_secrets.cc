#include "dispatcher/client_secrets.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace sluice::dispatcher {
namespace {

constexpr size_t kKeyBytes = 32;

std::string RandomKey() {
  std::string key(kKeyBytes, '\0');
  // RAND_bytes fails only without an entropy source, when every secret
  // would be guessable: stop rather than hand those out.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) != 1) {
    std::abort();
  }
  return key;
}

}  // namespace

ClientSecrets::ClientSecrets() : key_(RandomKey()) {}

absl::StatusOr<ClientSecrets> ClientSecrets::Open(const std::string& work_dir) {
  const std::string path = (std::filesystem::path(work_dir) / "client_secrets.key").string();
  auto error = [&](const std::string& what, int code) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", what, ": ", std::strerror(code)));
  };
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    std::string key(kKeyBytes, '\0');
    const ssize_t n = read(fd, key.data(), key.size());
    close(fd);
    if (n != static_cast<ssize_t>(kKeyBytes)) {
      return absl::DataLossError(absl::StrCat(path, ": expected ", kKeyBytes, " bytes, read ", n));
    }
    return ClientSecrets(std::move(key));
  }
  if (errno != ENOENT) return error("cannot read", errno);
  std::string key = RandomKey();
  const std::string temporary = path + ".tmp";
  fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return error("cannot create", errno);
  const ssize_t written = write(fd, key.data(), key.size());
  const int write_error = written < 0 ? errno : ENOSPC;  // a short write: the disk is full
  if (written != static_cast<ssize_t>(key.size())) {
    close(fd);
    return error("cannot write", write_error);
  }
  if (fsync(fd) != 0) {
    const int sync_error = errno;
    close(fd);
    return error("cannot sync", sync_error);
  }
  close(fd);
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    return error("cannot rename the new key into place", errno);
  // The rename is durable once the directory is.
  const int dir = open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)fsync(dir);
    close(dir);
  }
  return ClientSecrets(std::move(key));
}

std::string ClientSecrets::For(int64_t iteration_client_id) const {
  return Mac(absl::StrCat(iteration_client_id));
}

std::string ClientSecrets::ForTask(int64_t task_id) const {
  // The prefix keeps a task's secret from being a client's of the same id.
  return Mac(absl::StrCat("task:", task_id));
}

std::string ClientSecrets::ForRestore(const std::string& tenant, const std::string& job_name,
                                      const std::string& fingerprint, int64_t repetition) const {
  // Lengths first, so that no two tuples give one message.
  return Mac(absl::StrCat("restore:", tenant.size(), ":", tenant, job_name.size(), ":", job_name,
                          fingerprint.size(), ":", fingerprint, repetition));
}

std::string ClientSecrets::ForAnonymousRestore(const std::string& tenant, int64_t job_id,
                                               const std::string& fingerprint, int64_t repetition) const {
  return Mac(absl::StrCat("restore-anonymous:", tenant.size(), ":", tenant, job_id, ":", fingerprint.size(),
                          ":", fingerprint, repetition));
}

std::string ClientSecrets::Mac(absl::string_view message) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 16));
}

bool ClientSecrets::Matches(int64_t iteration_client_id, const std::string& presented) const {
  const std::string expected = For(iteration_client_id);
  return presented.size() == expected.size() &&
         CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

}  // namespace sluice::dispatcher
