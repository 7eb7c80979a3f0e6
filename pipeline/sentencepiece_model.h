// SentencePieceModel: a SentencePiece model's encoder, behind standard types.
// SentencePiece itself is in a bridge module (sentencepiece_bridge.cc)
// loaded on first use: its header declares its own `absl::string_view`,
// which clashes with Abseil's, and its library carries a protobuf of its
// own, which clashes with the one every Sluice binary links.
#ifndef SLUICE_PIPELINE_SENTENCEPIECE_MODEL_H_
#define SLUICE_PIPELINE_SENTENCEPIECE_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

class SentencePieceModel {
 public:
  // A model from its serialized bytes (a .model file's contents); null
  // with *error set when the bytes are not one, or the bridge cannot be
  // loaded (the error names its path).
  static std::unique_ptr<SentencePieceModel> FromBytes(const std::string& bytes, std::string* error);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  // Appends the ids of `text` to *ids; false with *error set on failure.
  // Thread-safe.
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;
  // The ids of <s> and </s>, or -1 when the model was trained without.
  int bos_id() const;
  int eos_id() const;

 private:
  struct Impl;
  explicit SentencePieceModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_SENTENCEPIECE_MODEL_H_
