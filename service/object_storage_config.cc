#include "service/object_storage_config.h"

#include <spdlog/spdlog.h>

#include <memory>

namespace sluice {

void AddObjectStorageSettings(ConfigSchema* schema, io::ObjectStorageSettings* settings) {
  schema->AddString(
      "object_storage.endpoint", &settings->endpoint,
      "S3 endpoint, http(s)://HOST[:PORT]; unset: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, or AWS's");
  schema->AddString("object_storage.region", &settings->region,
                    "S3 region; unset: AWS_REGION, AWS_DEFAULT_REGION, us-east-1");
  schema->AddString("object_storage.addressing_style", &settings->addressing_style,
                    "path or virtual; unset: path with a custom endpoint, virtual on AWS");
  schema->AddString("object_storage.credentials_file", &settings->credentials_file,
                    "AWS credentials file (INI); unset: AWS_ACCESS_KEY_ID..., AWS_SHARED_CREDENTIALS_FILE, "
                    "~/.aws/credentials, or anonymous requests");
  schema->AddString("object_storage.profile", &settings->profile,
                    "profile of the credentials file; unset: AWS_PROFILE, default");
  schema->AddString("object_storage.ca_file", &settings->ca_file,
                    "CA certificates for https endpoints and URLs; unset: AWS_CA_BUNDLE, the system's");
  schema->AddInt("object_storage.part_bytes", &settings->part_bytes, 64 << 10, int64_t{1} << 30,
                 "bytes per ranged GET of a large object");
  schema->AddInt("object_storage.parts_in_flight", &settings->parts_in_flight, 1, 64,
                 "ranged GETs of one object in flight at once");
  schema->AddInt("object_storage.max_attempts", &settings->max_attempts, 1, 100,
                 "tries per request on 5xx, 429, timeouts and resets, the first included");
  schema->AddInt("object_storage.initial_backoff_ms", &settings->initial_backoff_ms, 1, 600000,
                 "the first retry's backoff; it doubles per retry, with jitter");
  schema->AddInt("object_storage.max_backoff_ms", &settings->max_backoff_ms, 1, 3600000,
                 "the longest backoff");
  schema->AddInt("object_storage.connect_timeout_ms", &settings->connect_timeout_ms, 1, 600000,
                 "the longest wait for a connection");
  schema->AddInt("object_storage.stall_timeout_ms", &settings->stall_timeout_ms, 1000, 3600000,
                 "a transfer with no byte for this long is cut and resumed");
  schema->AddInt("object_storage.objects_in_flight", &settings->objects_in_flight, 1, 1024,
                 "small objects fetched at once by one source");
  schema->AddInt("object_storage.max_listed_objects", &settings->max_listed_objects, 1, 100000000,
                 "the most objects one listing (list_files, image_folder) may hold");
  schema->AddString("object_storage.cache.dir", &settings->cache_dir,
                    "keep whole objects on local disk here (LRU, checked by ETag); unset: no cache");
  schema->AddInt("object_storage.cache.max_bytes", &settings->cache_max_bytes, 1, int64_t{1} << 50,
                 "the most bytes the local object cache holds");
}

absl::Status SetUpObjectStorage(const io::ObjectStorageSettings& settings) {
  absl::StatusOr<io::ObjectStorageContext> context = io::ResolveObjectStorage(settings);
  if (!context.ok()) return context.status();
  spdlog::info("object storage: endpoint {} ({}-style), region {}, credentials: {}{}", context->endpoint,
               context->path_style ? "path" : "virtual", context->region, context->credentials_source,
               context->cache_dir.empty() ? "" : ", cache " + context->cache_dir);
  io::SetObjectStorage(std::make_shared<const io::ObjectStorageContext>(*std::move(context)));
  return absl::OkStatus();
}

}  // namespace sluice
