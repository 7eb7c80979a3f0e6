// The SentencePiece bridge: a module of its own that links Debian's
// libsentencepiece, loaded by sentencepiece_model.cc with RTLD_DEEPBIND.
// libsentencepiece carries its own copy of protobuf-lite 3.14 and exports
// its symbols; in a process that already has protobuf 3.21 (every Sluice
// binary), they would bind to 3.21's and its version check aborts the
// load. Loaded this way, the bridge and libsentencepiece resolve their
// own symbols first, and nothing of theirs reaches the global scope.
// The functions take standard types only; the caller and the bridge share
// one libstdc++.
#include <sentencepiece_processor.h>

#include <string>
#include <vector>

extern "C" {

__attribute__((visibility("default"))) void* SluiceSentencePieceLoad(const std::string* bytes,
                                                                     std::string* error) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  if (const auto status = processor->LoadFromSerializedProto(*bytes); !status.ok()) {
    *error = status.ToString();
    delete processor;
    return nullptr;
  }
  return processor;
}

__attribute__((visibility("default"))) bool SluiceSentencePieceEncode(const void* model, const char* text,
                                                                      size_t size, std::vector<int>* ids,
                                                                      std::string* error) {
  const auto* processor = static_cast<const sentencepiece::SentencePieceProcessor*>(model);
  std::vector<int> pieces;
  if (const auto status = processor->Encode(std::string_view(text, size), &pieces); !status.ok()) {
    *error = status.ToString();
    return false;
  }
  ids->insert(ids->end(), pieces.begin(), pieces.end());
  return true;
}

// which: 0 for <s>, 1 for </s>; -1 when the model has none.
__attribute__((visibility("default"))) int SluiceSentencePieceSpecialId(const void* model, int which) {
  const auto* processor = static_cast<const sentencepiece::SentencePieceProcessor*>(model);
  return which == 0 ? processor->bos_id() : processor->eos_id();
}

__attribute__((visibility("default"))) void SluiceSentencePieceFree(void* model) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(model);
}
}
