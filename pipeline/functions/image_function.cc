#include "pipeline/functions/image_function.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/random.h"

namespace sluice::internal {

absl::StatusOr<ImageComponent> ImageComponent::FromArgs(FunctionArgs& args) {
  absl::StatusOr<ComponentSelector> selector = ComponentSelector::FromArgs(args);
  if (!selector.ok()) return selector.status();
  return ImageComponent(args.function_name(), *std::move(selector));
}

absl::StatusOr<int> ImageComponent::Resolve(const std::vector<std::string>& names,
                                            size_t num_components) const {
  if (!selector_.all()) {
    absl::StatusOr<std::vector<int>> chosen = selector_.Resolve(num_components, names);
    if (!chosen.ok()) return chosen.status();
    return chosen->front();
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "image") return static_cast<int>(i);
  }
  if (num_components == 1) return 0;
  return absl::InvalidArgumentError(
      absl::StrCat(function_name_, ": the element has ", num_components,
                   " components and none named 'image'; say which with component: INDEX or component: NAME"));
}

absl::StatusOr<int> ImageComponent::Resolve(const Element& element) const {
  static const std::vector<std::string> kNoNames;
  return Resolve(element.named() ? *element.names : kNoNames, element.size());
}

std::string FileOf(const Element& element) {
  if (!element.named()) return "";
  for (size_t i = 0; i < element.size(); ++i) {
    const Tensor& component = element.components[i];
    if ((*element.names)[i] == "path" && component.dtype() == DType::kString &&
        component.num_elements() == 1) {
      return absl::StrCat(" ('", component.data<std::string>()[0], "')");
    }
  }
  return "";
}

absl::StatusOr<std::vector<double>> GetNumbers(FunctionArgs& args, const std::string& key,
                                               std::optional<std::vector<double>> fallback,
                                               const std::vector<size_t>& lengths) {
  const proto::AttrValue* value = args.Get(key);
  std::vector<double> numbers;
  if (value == nullptr) {
    if (!fallback.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(args.function_name(), ": missing argument '", key, "'"));
    }
    return *fallback;
  }
  auto add = [&](const proto::AttrValue& item) {
    if (item.value_case() == proto::AttrValue::kI) {
      numbers.push_back(static_cast<double>(item.i()));
    } else if (item.value_case() == proto::AttrValue::kF) {
      numbers.push_back(item.f());
    } else {
      return false;
    }
    return true;
  };
  bool ok = true;
  if (value->value_case() == proto::AttrValue::kList) {
    for (const proto::AttrValue& item : value->list().values()) ok = ok && add(item);
  } else {
    ok = add(*value);
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.function_name(), ": argument '", key, "' must be a number or a list of numbers"));
  }
  if (!lengths.empty()) {
    bool allowed = false;
    std::string expected;
    for (size_t length : lengths) {
      allowed = allowed || numbers.size() == length;
      absl::StrAppend(&expected, expected.empty() ? "" : " or ", length);
    }
    if (!allowed) {
      return absl::InvalidArgumentError(absl::StrCat(args.function_name(), ": argument '", key, "' needs ",
                                                     expected, " values, got ", numbers.size()));
    }
  }
  return numbers;
}

absl::StatusOr<std::pair<int, int>> GetSize(FunctionArgs& args, const std::string& key) {
  absl::StatusOr<std::vector<double>> size = GetNumbers(args, key, std::nullopt, {1, 2});
  if (!size.ok()) return size.status();
  const double height = (*size)[0];
  const double width = size->size() == 2 ? (*size)[1] : (*size)[0];
  constexpr double kMaxSide = 1 << 16;
  for (double side : {height, width}) {
    if (side < 1 || side > kMaxSide || side != static_cast<int>(side)) {
      return absl::InvalidArgumentError(absl::StrCat(
          args.function_name(), ": '", key, "' sides must be whole numbers in [1, 65536], got ", side));
    }
  }
  return std::pair<int, int>{static_cast<int>(height), static_cast<int>(width)};
}

absl::StatusOr<uint64_t> GetSeed(FunctionArgs& args) {
  if (!args.Has("seed")) return RandomSeed();
  absl::StatusOr<int64_t> seed = args.GetInt("seed");
  if (!seed.ok()) return seed.status();
  return static_cast<uint64_t>(*seed);
}

namespace {

// A 64-bit multiply-xorshift hash over 8-byte words, the same on every
// machine (absl::Hash is seeded per process).
uint64_t HashAll(uint64_t hash, const char* bytes, size_t size) {
  hash ^= size * 0x9e3779b97f4a7c15ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    hash = (hash ^ word) * 0x9e3779b97f4a7c15ull;
    hash ^= hash >> 29;
  }
  uint64_t tail = 0;
  if (size > i) std::memcpy(&tail, bytes + i, size - i);
  hash = (hash ^ tail) * 0xbf58476d1ce4e5b9ull;
  return hash ^ (hash >> 31);
}

// Up to 8 KiB whole; past that, the size and 64 blocks of 64 bytes spread
// evenly from the first byte to the last. Hashing a whole 150 KB crop for a
// flip had been 3.4% of the ImageNet pipeline's time; a sample of an
// image's bytes tells images apart as well.
constexpr size_t kHashedWhole = 8 << 10;
constexpr size_t kSampleBlocks = 64;
constexpr size_t kSampleBlockBytes = 64;

uint64_t HashBytes(uint64_t hash, const char* bytes, size_t size) {
  if (size <= kHashedWhole) return HashAll(hash, bytes, size);
  hash = HashAll(hash, reinterpret_cast<const char*>(&size), sizeof size);
  const size_t last_block = size - kSampleBlockBytes;
  for (size_t k = 0; k < kSampleBlocks; ++k) {
    hash = HashAll(hash, bytes + last_block * k / (kSampleBlocks - 1), kSampleBlockBytes);
  }
  return hash;
}

}  // namespace

uint64_t ElementSeed(uint64_t seed, const Element& element) {
  uint64_t hash = 0x84222325cbf29ce4ull;
  for (const Tensor& component : element.components) {
    if (component.dtype() == DType::kString) {
      for (const std::string& value : component.values<std::string>())
        hash = HashBytes(hash, value.data(), value.size());
    } else {
      hash = HashBytes(hash, static_cast<const char*>(component.raw_data()), component.ByteSize());
    }
  }
  return MixSeed(seed, hash);
}

absl::StatusOr<image::ImageView> ImageOf(const Tensor& tensor, const std::string& function,
                                         const Element& element) {
  if (tensor.dtype() != DType::kUInt8 || tensor.rank() != 3 || tensor.dim(2) < 1 || tensor.dim(2) > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(function,
                     ": needs a uint8 image of shape [height, width, "
                     "channels] (1 to 4 channels; decode_image makes one), got ",
                     DTypeName(tensor.dtype()), ShapeDebugString(tensor.shape()), FileOf(element)));
  }
  return image::ImageView{static_cast<const uint8_t*>(tensor.raw_data()), static_cast<int>(tensor.dim(0)),
                          static_cast<int>(tensor.dim(1)), static_cast<int>(tensor.dim(2))};
}

Element WithComponent(const Element& input, int index, Tensor value) {
  Element output = input;
  output.components[index] = std::move(value);
  return output;
}

ElementSpec WithComponentSpec(const ElementSpec& input, int index, TensorSpec spec) {
  ElementSpec output = input;
  output.components[index] = std::move(spec);
  return output;
}

}  // namespace sluice::internal
