#include "pipeline/sentencepiece_model.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <utility>

namespace sluice {
namespace {

// The bridge's functions (sentencepiece_bridge.cc).
struct Bridge {
  void* (*load)(const std::string* bytes, std::string* error) = nullptr;
  bool (*encode)(const void* model, const char* text, size_t size, std::vector<int>* ids,
                 std::string* error) = nullptr;
  int (*special_id)(const void* model, int which) = nullptr;
  void (*free)(void* model) = nullptr;
  std::string error;  // why it could not be loaded
};

constexpr char kBridgeFile[] = "libsluice_sentencepiece.so";

// Loaded once, from the folder of the library this code is in (the build's
// pipeline/, or an install's lib/).
const Bridge& LoadedBridge() {
  static const Bridge* bridge = [] {
    auto* loaded = new Bridge;
    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&LoadedBridge), &self) == 0 || self.dli_fname == nullptr) {
      loaded->error = "cannot tell where this library is, to load the SentencePiece bridge beside it";
      return loaded;
    }
    const std::string path = (std::filesystem::path(self.dli_fname).parent_path() / kBridgeFile).string();
#if defined(__SANITIZE_ADDRESS__)
    // ASan's runtime aborts the process at a dlopen with RTLD_DEEPBIND
    // (google/sanitizers#611), which the bridge needs.
    loaded->error = "cannot load the SentencePiece bridge '" + path +
                    "' in a build with AddressSanitizer: it needs RTLD_DEEPBIND, which ASan does not support";
    return loaded;
#endif
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* why = dlerror();
      loaded->error = "cannot load the SentencePiece bridge '" + path + "': " + (why ? why : "unknown error");
      return loaded;
    }
    loaded->load = reinterpret_cast<decltype(loaded->load)>(dlsym(handle, "SluiceSentencePieceLoad"));
    loaded->encode = reinterpret_cast<decltype(loaded->encode)>(dlsym(handle, "SluiceSentencePieceEncode"));
    loaded->special_id =
        reinterpret_cast<decltype(loaded->special_id)>(dlsym(handle, "SluiceSentencePieceSpecialId"));
    loaded->free = reinterpret_cast<decltype(loaded->free)>(dlsym(handle, "SluiceSentencePieceFree"));
    if (!loaded->load || !loaded->encode || !loaded->special_id || !loaded->free) {
      loaded->error =
          "the SentencePiece bridge '" + path + "' lacks a function (a bridge of another release?)";
      loaded->load = nullptr;
    }
    return loaded;
  }();
  return *bridge;
}

}  // namespace

struct SentencePieceModel::Impl {
  void* model = nullptr;
  ~Impl() {
    if (model != nullptr) LoadedBridge().free(model);
  }
};

SentencePieceModel::SentencePieceModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceModel::~SentencePieceModel() = default;

std::unique_ptr<SentencePieceModel> SentencePieceModel::FromBytes(const std::string& bytes,
                                                                  std::string* error) {
  const Bridge& bridge = LoadedBridge();
  if (bridge.load == nullptr) {
    *error = bridge.error;
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->model = bridge.load(&bytes, error);
  if (impl->model == nullptr) return nullptr;
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(std::move(impl)));
}

bool SentencePieceModel::Encode(std::string_view text, std::vector<int>* ids, std::string* error) const {
  return LoadedBridge().encode(impl_->model, text.data(), text.size(), ids, error);
}

int SentencePieceModel::bos_id() const { return LoadedBridge().special_id(impl_->model, 0); }
int SentencePieceModel::eos_id() const { return LoadedBridge().special_id(impl_->model, 1); }

}  // namespace sluice
