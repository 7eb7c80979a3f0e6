// The image_folder source: torchvision's ImageFolder layout, root/CLASS/FILE,
// one element per image file: {image: the file's bytes, label, path}.
// Labels number the class folders in sorted order, as ImageFolder does; the
// files are listed once, sorted, when the pipeline is built, and read one
// at a time as the iterator reaches them. Splittable by file
// (pipeline/file_list_source.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "pipeline/file_list_source.h"
#include "pipeline/io/object_client.h"
#include "pipeline/io/object_storage_settings.h"
#include "pipeline/io/object_url.h"
#include "pipeline/io/readable_file.h"
#include "pipeline/ops.h"
#include "pipeline/sandbox.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

// A file bigger than this is not an image anyone trains on; refusing it
// keeps a stray disk image in the folder from taking the worker's memory.
constexpr int64_t kMaxImageFileBytes = int64_t{1} << 30;

struct ImageFile {
  std::string path;
  int64_t label = 0;
  // An object's size and ETag from the listing (path is then its URL): it
  // is read with no HEAD.
  std::optional<io::ObjectInfo> object;
};

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  // The listing took regular files only; one replaced since (by a FIFO,
  // which would block the read for ever) is refused here.
  absl::StatusOr<int> opened = OpenDataFile(path, "image_folder");
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  struct stat info {};
  if (fstat(fd, &info) == 0 && info.st_size > kMaxImageFileBytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("image_folder: '", path, "' is ", info.st_size,
                                                   " bytes, more than the ", kMaxImageFileBytes,
                                                   "-byte limit of an image file"));
  }
  std::string bytes;
  const int error = ReadToEnd(fd, static_cast<size_t>(kMaxImageFileBytes), &bytes);
  close(fd);
  if (error == EFBIG) {
    return absl::InvalidArgumentError(
        absl::StrCat("image_folder: '", path, "' grew past the ", kMaxImageFileBytes, "-byte limit"));
  }
  if (error != 0) {
    return absl::DataLossError(absl::StrCat("image_folder: reading '", path, "': ", std::strerror(error)));
  }
  return bytes;
}

class ImageFolderDataset : public FileListDataset {
 public:
  ImageFolderDataset(std::vector<ImageFile> files, bool shuffle, std::optional<int64_t> seed,
                     int64_t read_ahead)
      : FileListDataset(static_cast<int64_t>(files.size()), shuffle, seed, Spec()),
        files_(std::move(files)),
        names_(std::make_shared<const std::vector<std::string>>(element_spec().names)),
        read_ahead_(read_ahead) {}
  std::string DebugName() const override { return "image_folder"; }
  int64_t ReadAheadFiles() const override { return read_ahead_; }
  uint64_t FileBytes(int64_t index) const override {
    return files_[index].object.has_value() ? files_[index].object->size : 0;
  }
  std::string ObjectListingDigest() const override {
    std::vector<io::ObjectInfo> objects;
    for (const ImageFile& file : files_) {
      if (file.object.has_value()) objects.push_back(*file.object);
    }
    return io::ListingDigest(objects);
  }

 private:
  static ElementSpec Spec() {
    ElementSpec spec;
    spec.components = {{PartialShape::Known({}), DType::kString},
                       {PartialShape::Known({}), DType::kInt64},
                       {PartialShape::Known({}), DType::kString}};
    spec.names = {"image", "label", "path"};
    return spec;
  }

  absl::StatusOr<Element> FileElement(int64_t index) const override {
    const ImageFile& file = files_[index];
    absl::StatusOr<std::string> bytes =
        file.object.has_value() ? io::ReadWholeObject(*file.object, "image_folder", kMaxImageFileBytes)
                                : ReadWholeFile(file.path);
    if (!bytes.ok()) return bytes.status();
    return Element({Tensor::StringScalar(*std::move(bytes)), Tensor::Scalar<int64_t>(file.label),
                    Tensor::StringScalar(file.path)},
                   names_);
  }

  const std::vector<ImageFile> files_;
  const ComponentNames names_;
  // Objects fetched at once (object_storage.objects_in_flight, within
  // kReadAheadBytes); 0 for files.
  const int64_t read_ahead_;
};

// Lower-case extensions without their dot.
std::set<std::string> Extensions(const proto::ImageFolderOp& op) {
  std::set<std::string> extensions;
  for (std::string extension : op.extensions()) {
    if (!extension.empty() && extension.front() == '.') extension.erase(0, 1);
    extensions.insert(absl::AsciiStrToLower(extension));
  }
  if (extensions.empty()) extensions = {"jpeg", "jpg", "png"};
  return extensions;
}

// root/CLASS/.../FILE under an s3:// root, from one listing: the classes
// are the first folders under the root, sorted; objects directly under the
// root belong to no class and are left out, as ImageFolder leaves files.
absl::Status ListImageObjects(const std::string& root, const std::set<std::string>& extensions,
                              std::vector<std::string>* classes, std::vector<ImageFile>* files) {
  const std::string prefix = absl::EndsWith(root, "/") ? root : root + "/";
  absl::StatusOr<std::vector<io::ObjectInfo>> objects = io::ListObjects(prefix);
  if (!objects.ok())
    return absl::Status(objects.status().code(), absl::StrCat("image_folder: ", objects.status().message()));
  std::map<std::string, std::vector<io::ObjectInfo>> by_class;
  for (io::ObjectInfo& object : *objects) {
    const std::string relative = object.url.substr(prefix.size());
    const size_t slash = relative.find('/');
    if (slash == std::string::npos || slash == 0) continue;
    std::vector<io::ObjectInfo>& in_class = by_class[relative.substr(0, slash)];
    std::string extension = fs::path(relative).extension().string();
    if (!extension.empty()) extension.erase(0, 1);
    if (extensions.contains(absl::AsciiStrToLower(extension))) in_class.push_back(std::move(object));
  }
  for (auto& [name, objects_of_class] : by_class) {
    const auto label = static_cast<int64_t>(classes->size());
    classes->push_back(name);
    for (io::ObjectInfo& object : objects_of_class) {
      std::string url = object.url;
      files->push_back({std::move(url), label, std::move(object)});
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ImageFolderClasses(const std::string& root) {
  if (absl::Status allowed = CheckReadablePath(root); !allowed.ok()) return allowed;
  if (io::HasUrlScheme(root)) {
    std::vector<std::string> classes;
    std::vector<ImageFile> files;
    if (absl::Status listed = ListImageObjects(root, {"jpeg", "jpg", "png"}, &classes, &files);
        !listed.ok()) {
      return listed;
    }
    return classes;
  }
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return absl::NotFoundError(absl::StrCat("image_folder: root '", root, "' is not a directory",
                                            error ? absl::StrCat(" (", error.message(), ")") : ""));
  }
  std::vector<std::string> classes;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) classes.push_back(it->path().filename().string());
  }
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("image_folder: cannot list '", root, "': ", error.message()));
  }
  std::sort(classes.begin(), classes.end());
  return classes;
}

absl::StatusOr<DatasetPtr> MakeImageFolderDataset(const proto::ImageFolderOp& op) {
  if (op.root().empty()) return absl::InvalidArgumentError("image_folder: missing 'root'");
  if (op.num_shards() < 0 ||
      (op.num_shards() > 0 && (op.shard_index() < 0 || op.shard_index() >= op.num_shards()))) {
    return absl::InvalidArgumentError(absl::StrCat("image_folder: shard_index ", op.shard_index(),
                                                   " is outside [0, ", op.num_shards(), ")"));
  }
  const std::set<std::string> extensions = Extensions(op);
  std::vector<ImageFile> files;
  absl::StatusOr<std::vector<std::string>> classes;
  if (io::HasUrlScheme(op.root())) {
    if (absl::Status allowed = CheckReadablePath(op.root()); !allowed.ok()) return allowed;
    classes.emplace();
    if (absl::Status listed = ListImageObjects(op.root(), extensions, &*classes, &files); !listed.ok())
      return listed;
  } else {
    classes = ImageFolderClasses(op.root());
  }
  if (!classes.ok()) return classes.status();
  if (classes->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("image_folder: '", op.root(), "' has no class folders (expected root/CLASS/FILE)"));
  }
  for (size_t label = 0; label < classes->size() && !io::HasUrlScheme(op.root()); ++label) {
    const fs::path folder = fs::path(op.root()) / (*classes)[label];
    std::vector<std::string> names;
    std::error_code error;
    for (fs::recursive_directory_iterator it(folder, fs::directory_options::follow_directory_symlink, error),
         end;
         !error && it != end; it.increment(error)) {
      if (!it->is_regular_file(error)) continue;
      std::string extension = it->path().extension().string();
      if (!extension.empty()) extension.erase(0, 1);
      if (extensions.contains(absl::AsciiStrToLower(extension))) names.push_back(it->path().string());
    }
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("image_folder: cannot list '", folder.string(), "': ", error.message()));
    }
    std::sort(names.begin(), names.end());
    for (std::string& name : names)
      files.push_back({std::move(name), static_cast<int64_t>(label), std::nullopt});
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("image_folder: no files with extension ",
                                                   absl::StrJoin(extensions, ", "), " under '", op.root(),
                                                   "/CLASS/'"));
  }
  if (op.num_shards() > 0) {
    std::vector<ImageFile> mine;
    for (size_t i = static_cast<size_t>(op.shard_index()); i < files.size(); i += op.num_shards())
      mine.push_back(std::move(files[i]));
    files = std::move(mine);
  }
  std::optional<int64_t> seed;
  if (op.has_seed()) seed = op.seed();
  int64_t read_ahead = 0;
  if (io::HasUrlScheme(op.root())) {
    absl::StatusOr<std::shared_ptr<const io::ObjectStorageContext>> context = io::CurrentObjectStorage();
    if (!context.ok()) return context.status();
    read_ahead = (*context)->objects_in_flight;
  }
  return std::make_shared<ImageFolderDataset>(std::move(files), op.shuffle(), seed, read_ahead);
}

}  // namespace sluice
