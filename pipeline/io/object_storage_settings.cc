#include "pipeline/io/object_storage_settings.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/file_io.h"

namespace sluice::io {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string FirstSet(std::initializer_list<std::string> values) {
  for (const std::string& value : values) {
    if (!value.empty()) return value;
  }
  return "";
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& setting) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(setting, ": cannot open '", path, "': ", std::strerror(errno)));
  }
  std::string text;
  const int error = ReadToEnd(fd, size_t{1} << 20, &text);
  close(fd);
  if (error != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(setting, ": cannot read '", path,
                     "': ", error == EFBIG ? "larger than 1 MiB" : std::strerror(error)));
  }
  return text;
}

absl::StatusOr<AwsCredentials> CredentialsFromFile(const std::string& path, const std::string& profile,
                                                   const std::string& setting) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, setting);
  if (!text.ok()) return text.status();
  absl::StatusOr<AwsCredentials> credentials = CredentialsFromIni(*text, profile, path);
  if (!credentials.ok())
    return absl::InvalidArgumentError(absl::StrCat(setting, ": ", credentials.status().message()));
  return credentials;
}

}  // namespace

absl::StatusOr<AwsCredentials> CredentialsFromIni(const std::string& text, const std::string& profile,
                                                  const std::string& file_name) {
  AwsCredentials credentials;
  std::string section;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = std::string(absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)));
      // The config file's form ("[profile NAME]") names the same profile.
      if (absl::StartsWith(section, "profile "))
        section = std::string(absl::StripAsciiWhitespace(section.substr(8)));
      found = found || section == profile;
      continue;
    }
    if (section != profile) continue;
    const size_t equals = line.find('=');
    if (equals == absl::string_view::npos) continue;
    const std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, equals)));
    const std::string value(absl::StripAsciiWhitespace(line.substr(equals + 1)));
    if (key == "aws_access_key_id") credentials.access_key_id = value;
    if (key == "aws_secret_access_key") credentials.secret_access_key = value;
    if (key == "aws_session_token") credentials.session_token = value;
  }
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("the credentials file '", file_name, "' has no profile [", profile, "]"));
  }
  if (credentials.access_key_id.empty() != credentials.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile [", profile, "] of '", file_name,
                     "' sets only one of aws_access_key_id and aws_secret_access_key"));
  }
  return credentials;
}

absl::StatusOr<ObjectStorageContext> ResolveObjectStorage(const ObjectStorageSettings& settings) {
  ObjectStorageContext context;
  context.region = FirstSet({settings.region, Env("AWS_REGION"), Env("AWS_DEFAULT_REGION"), "us-east-1"});
  const std::string endpoint =
      FirstSet({settings.endpoint, Env("AWS_ENDPOINT_URL_S3"), Env("AWS_ENDPOINT_URL")});
  context.custom_endpoint = !endpoint.empty();
  context.endpoint =
      endpoint.empty() ? absl::StrCat("https://s3.", context.region, ".amazonaws.com") : endpoint;
  while (absl::EndsWith(context.endpoint, "/")) context.endpoint.pop_back();
  if (!absl::StartsWith(context.endpoint, "http://") && !absl::StartsWith(context.endpoint, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("object_storage.endpoint: '", endpoint, "' is not an http:// or https:// URL"));
  }
  if (settings.addressing_style.empty()) {
    context.path_style = context.custom_endpoint;
  } else if (settings.addressing_style == "path" || settings.addressing_style == "virtual") {
    context.path_style = settings.addressing_style == "path";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "object_storage.addressing_style: '", settings.addressing_style, "' is neither path nor virtual"));
  }
  // Credentials: the environment's keys, else the shared file's profile,
  // else none (anonymous requests, as for public buckets).
  const std::string profile = FirstSet({settings.profile, Env("AWS_PROFILE"), "default"});
  if (!Env("AWS_ACCESS_KEY_ID").empty() && settings.credentials_file.empty()) {
    context.credentials = {Env("AWS_ACCESS_KEY_ID"), Env("AWS_SECRET_ACCESS_KEY"), Env("AWS_SESSION_TOKEN")};
    if (context.credentials.secret_access_key.empty()) {
      return absl::InvalidArgumentError("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
    }
    context.credentials_source = "environment";
  } else {
    std::string file = FirstSet({settings.credentials_file, Env("AWS_SHARED_CREDENTIALS_FILE")});
    const bool named = !file.empty();
    if (!named && !Env("HOME").empty()) file = Env("HOME") + "/.aws/credentials";
    std::error_code error;
    if (named || (!file.empty() && std::filesystem::exists(file, error))) {
      absl::StatusOr<AwsCredentials> credentials =
          CredentialsFromFile(file, profile, "object_storage.credentials_file");
      if (!credentials.ok()) return credentials.status();
      context.credentials = *std::move(credentials);
      context.credentials_source = absl::StrCat("file ", file, " (profile ", profile, ")");
    } else {
      context.credentials_source = "none (anonymous requests)";
    }
  }
  context.ca_file = FirstSet({settings.ca_file, Env("AWS_CA_BUNDLE")});
  context.retry = {.max_attempts = static_cast<int>(settings.max_attempts),
                   .initial_backoff = absl::Milliseconds(settings.initial_backoff_ms),
                   .max_backoff = absl::Milliseconds(settings.max_backoff_ms)};
  context.part_bytes = settings.part_bytes;
  context.parts_in_flight = static_cast<int>(settings.parts_in_flight);
  context.objects_in_flight = static_cast<int>(settings.objects_in_flight);
  context.max_listed_objects = settings.max_listed_objects;
  context.connect_timeout_ms = settings.connect_timeout_ms;
  context.stall_timeout_ms = settings.stall_timeout_ms;
  if (!settings.cache_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(settings.cache_dir, error);
    const std::filesystem::path canonical = std::filesystem::canonical(settings.cache_dir, error);
    if (error || !std::filesystem::is_directory(canonical) || access(canonical.c_str(), W_OK | X_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("object_storage.cache.dir: '", settings.cache_dir,
                                                     "' is not a directory this user can write"));
    }
    context.cache_dir = canonical.string();
    context.cache_max_bytes = settings.cache_max_bytes;
  }
  return context;
}

namespace {
absl::Mutex context_mu(absl::kConstInit);
std::shared_ptr<const ObjectStorageContext>* current_context ABSL_GUARDED_BY(context_mu) = nullptr;
}  // namespace

void SetObjectStorage(std::shared_ptr<const ObjectStorageContext> context) {
  absl::MutexLock lock(&context_mu);
  if (current_context == nullptr) current_context = new std::shared_ptr<const ObjectStorageContext>();
  *current_context = std::move(context);
}

absl::StatusOr<std::shared_ptr<const ObjectStorageContext>> CurrentObjectStorage() {
  absl::MutexLock lock(&context_mu);
  if (current_context != nullptr && *current_context != nullptr) return *current_context;
  absl::StatusOr<ObjectStorageContext> resolved = ResolveObjectStorage({});
  if (!resolved.ok()) return resolved.status();
  auto context = std::make_shared<const ObjectStorageContext>(*std::move(resolved));
  if (current_context == nullptr) current_context = new std::shared_ptr<const ObjectStorageContext>();
  *current_context = context;
  return context;
}

}  // namespace sluice::io
