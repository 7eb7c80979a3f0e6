// Where object storage is and who this process is to it: the endpoint,
// region, addressing style and credentials, taken as AWS's tools take
// them, and the knobs of reading (part size, parts in flight, retries,
// timeouts, the local cache). A daemon sets them from its config's
// `object_storage:` section, which wins over the environment; a process
// that sets nothing (the CLI, the SDK reading locally) takes the
// environment alone. Credentials never come from a pipeline.
#ifndef SLUICE_PIPELINE_IO_OBJECT_STORAGE_SETTINGS_H_
#define SLUICE_PIPELINE_IO_OBJECT_STORAGE_SETTINGS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pipeline/io/retry_policy.h"
#include "pipeline/io/sigv4.h"

namespace sluice::io {

// The operator's settings, as written (empty: unset).
struct ObjectStorageSettings {
  std::string endpoint;          // http(s)://HOST[:PORT]; unset: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS
  std::string region;            // unset: AWS_REGION, AWS_DEFAULT_REGION, us-east-1
  std::string addressing_style;  // path or virtual; unset: path with a custom endpoint, virtual on AWS
  std::string credentials_file;  // unset: AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials
  std::string profile;           // unset: AWS_PROFILE, default
  std::string ca_file;           // unset: AWS_CA_BUNDLE, the system's
  int64_t part_bytes = int64_t{8} << 20;
  int64_t parts_in_flight = 8;
  int64_t max_attempts = 6;
  int64_t initial_backoff_ms = 100;
  int64_t max_backoff_ms = 5000;
  int64_t connect_timeout_ms = 10000;
  int64_t stall_timeout_ms = 30000;
  int64_t objects_in_flight = 128;
  int64_t max_listed_objects = 2000000;
  std::string cache_dir;  // unset: no local cache
  int64_t cache_max_bytes = int64_t{10} << 30;
};

// The settings resolved against the environment, ready for requests.
struct ObjectStorageContext {
  std::string endpoint;  // "http://127.0.0.1:9000", no trailing '/'
  bool custom_endpoint = false;
  bool path_style = false;
  std::string region;
  AwsCredentials credentials;      // empty: anonymous requests
  std::string credentials_source;  // for logs: "environment", "file /x (profile p)", "none"
  std::string ca_file;
  RetryPolicy retry;
  int64_t part_bytes = 0;
  int parts_in_flight = 0;
  int objects_in_flight = 0;
  int64_t max_listed_objects = 0;
  int64_t connect_timeout_ms = 0;
  int64_t stall_timeout_ms = 0;
  std::string cache_dir;  // canonical; empty: none
  int64_t cache_max_bytes = 0;
};

// Resolves `settings` against the environment; InvalidArgument naming the
// setting (an endpoint that is not http(s)://, a style that is neither,
// a credentials file that cannot be read or lacks the profile, a cache
// directory that is not one).
absl::StatusOr<ObjectStorageContext> ResolveObjectStorage(const ObjectStorageSettings& settings);

// Process-wide: a daemon sets it once before serving.
void SetObjectStorage(std::shared_ptr<const ObjectStorageContext> context);
// What requests use: what was set, or the environment resolved once.
absl::StatusOr<std::shared_ptr<const ObjectStorageContext>> CurrentObjectStorage();

// Parses an AWS credentials file (INI); the profile's keys, or NotFound
// naming the profile and the file. Exposed for the tests.
absl::StatusOr<AwsCredentials> CredentialsFromIni(const std::string& text, const std::string& profile,
                                                  const std::string& file_name);

}  // namespace sluice::io

#endif  // SLUICE_PIPELINE_IO_OBJECT_STORAGE_SETTINGS_H_
