// `--summary`: one short line per element instead of its full JSON, for
// elements too big to print (a batch of images is millions of numbers).
#ifndef SLUICE_CLI_SUMMARY_H_
#define SLUICE_CLI_SUMMARY_H_

#include <string>

#include "sluice/element.h"

namespace sluice::cli {

// Components of at most kMaxListed values print in full, as JSON; bigger
// numeric ones as "dtype[shape] mean M", bigger string ones as
// "string[shape]", and long strings as "<N bytes>". Named elements print
// as a JSON object, others as a list.
inline constexpr int64_t kMaxListed = 64;  // a batch's labels

std::string ElementSummary(const Element& element);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_SUMMARY_H_
