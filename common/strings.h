// Small string helpers shared by the error paths.
#ifndef SLUICE_COMMON_STRINGS_H_
#define SLUICE_COMMON_STRINGS_H_

#include <string>
#include <string_view>
#include <vector>

namespace sluice {

// Levenshtein distance, for "did you mean" suggestions.
int EditDistance(std::string_view a, std::string_view b);

// "; did you mean 'x'?" for the closest candidate, or "" when none is close
// enough to be a plausible typo.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates);

// True when `bytes` is well-formed UTF-8.
bool IsValidUtf8(std::string_view bytes);

// `text` with its control characters escaped ("\n", "\r", "\t", "\x1b"),
// the rest unchanged: a log line quoting a file name or a request's field
// stays one line, so that a newline in it cannot forge another.
std::string EscapeControlCharacters(std::string_view text);

// The first `digest_bytes` bytes (at most 32) of SHA-256 over `bytes`, in
// lowercase hex: fingerprints and names derived from content.
std::string Sha256Hex(std::string_view bytes, size_t digest_bytes);

}  // namespace sluice

#endif  // SLUICE_COMMON_STRINGS_H_
