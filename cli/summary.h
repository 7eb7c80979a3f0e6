// `--summary`: one short line per element instead of its full JSON, for
// elements too big to print (a batch of images is millions of numbers).
#ifndef SLUICE_CLI_SUMMARY_H_
#define SLUICE_CLI_SUMMARY_H_

#include <string>

#include "sluice/element.h"

namespace sluice::cli {

// Components of at most kMaxListed values print in full, as JSON (a
// string past 32 bytes as "<N bytes>"); bigger ones as one short string:
// "dtype[shape] v0, v1, v2, ..." with their first kMaxShown values (strings
// cut at 32 bytes), numbers followed by "mean M". Named elements print as
// a JSON object, others as a list: one short line per batch, whatever its
// size (a batch of 256 paths is not 256 paths).
inline constexpr int64_t kMaxListed = 4;
inline constexpr int64_t kMaxShown = 3;

std::string ElementSummary(const Element& element);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_SUMMARY_H_
