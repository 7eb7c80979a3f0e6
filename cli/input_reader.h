// Where `sluice run`, `read` and `bench` get their input: a pipeline file,
// with the command's flags applied to its `distribute` step, read one
// element at a time, or with --replicas one step (a value per replica) at
// a time through sluice::DistributeDataset.
#ifndef SLUICE_CLI_INPUT_READER_H_
#define SLUICE_CLI_INPUT_READER_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/commands.h"
#include "pipeline/dataset.h"
#include "sluice/dataset.h"

namespace sluice::cli {

absl::Status LoadPlugins(const std::vector<std::string>& plugins);

// One step as `sluice bench` counts it.
struct StepSize {
  // The first dimension of the first component (1 for a scalar), summed
  // over replicas.
  int64_t rows = 0;
  // Tensor::ByteSize, or DeviceTensor::byte_size with replicas, summed
  // over components.
  int64_t bytes = 0;
  // Packed text (pack_sequences' int32 `segment_ids` component): the
  // positions holding a token and those holding padding; -1 and 0 for
  // other elements.
  int64_t tokens = -1;
  int64_t padding = 0;
};

class InputReader {
 public:
  // Loads the pipeline and builds it, which registers it with the service
  // when it has a `distribute` step (or --service adds one). Without
  // either, `service_required` makes that an error; otherwise the pipeline
  // runs in this process. Errors here are the user's to fix, except an
  // unreachable service (IsUnreachable).
  static absl::StatusOr<std::unique_ptr<InputReader>> Open(const ReadOptions& options, bool service_required);
  // Reads a dataset built already (`sluice run`). `fingerprint`: its
  // definition's, which saved states carry.
  static std::unique_ptr<InputReader> ForDataset(DatasetPtr dataset, std::string fingerprint = "");

  virtual ~InputReader() = default;

  // Makes the iterator: for a service job, a new iteration. Errors are
  // failures to run.
  virtual absl::Status Start() = 0;
  // Moves to the next step (with replicas, once every value is on its
  // device); false at the end of the input.
  virtual absl::StatusOr<bool> Next() = 0;
  // The current step as one line of JSON, without the newline.
  virtual absl::StatusOr<std::string> CurrentJson() const = 0;
  // The current step in short (cli/summary.h); the JSON where a reader has
  // no shorter form.
  virtual absl::StatusOr<std::string> CurrentSummary() const { return CurrentJson(); }
  virtual StepSize CurrentSize() const = 0;

  // Where the reader stands, as Iterator::Save's bytes (issue 20); and a
  // state for Start() to resume from, as consumer `as` (a job checkpoint).
  virtual absl::StatusOr<std::string> SaveState() = 0;
  virtual absl::Status SetRestoreState(std::string state, const RestoreOptions& as) = 0;

  // Start() with its error made the command's exit code: the service's
  // refusal of the definition (InvalidArgument, FailedPrecondition: a mode
  // and option that do not go together, a pipeline that cannot be split)
  // is the user's to fix (2) and names the distribute step's file:line;
  // anything else is a failure to run (1).
  int StartOrFail(std::ostream& err);

 private:
  // "FILE:LINE:COL: step N (distribute)", when there is such a step.
  std::string distribute_location_;
};

}  // namespace sluice::cli

#endif  // SLUICE_CLI_INPUT_READER_H_
