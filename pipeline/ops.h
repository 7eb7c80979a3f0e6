// Factories for every op's dataset. Each validates its arguments and
// returns InvalidArgument naming the argument when one is out of range.
// The builder (builder.h) calls these; nothing else should need to.
#ifndef SLUICE_PIPELINE_OPS_H_
#define SLUICE_PIPELINE_OPS_H_

#include <memory>
#include <vector>

#include "pipeline/dataset.h"
#include "pipeline/function.h"
#include "sluice/proto/dataset.pb.h"

namespace sluice {

// Sources.
absl::StatusOr<DatasetPtr> MakeRangeDataset(const proto::RangeOp& op);
absl::StatusOr<DatasetPtr> MakeFromTensorsDataset(const proto::FromTensorsOp& op);
// Without tensors of its own and inside a flat_map or interleave, the rows
// of `input`, the element being mapped (a window's).
absl::StatusOr<DatasetPtr> MakeFromTensorSlicesDataset(const proto::FromTensorSlicesOp& op,
                                                       const Element* input = nullptr);
absl::StatusOr<DatasetPtr> MakeListFilesDataset(const proto::ListFilesOp& op);
absl::StatusOr<DatasetPtr> MakeImageFolderDataset(const proto::ImageFolderOp& op);
absl::StatusOr<DatasetPtr> MakeWebDatasetDataset(const proto::WebDatasetOp& op);
// The class folders of an image_folder root, sorted: label i names the
// i-th.
absl::StatusOr<std::vector<std::string>> ImageFolderClasses(const std::string& root);
absl::StatusOr<DatasetPtr> MakeZipDataset(std::vector<DatasetPtr> inputs);
// sample_from_datasets and choose_from_datasets (dataset_mixing.cc): each
// element from one of `inputs`, picked by seeded weighted draws or by the
// int64 scalars of `choice`.
absl::StatusOr<DatasetPtr> MakeSampleFromDatasetsDataset(std::vector<DatasetPtr> inputs,
                                                         const proto::SampleFromDatasetsOp& op);
absl::StatusOr<DatasetPtr> MakeChooseFromDatasetsDataset(std::vector<DatasetPtr> inputs, DatasetPtr choice,
                                                         const proto::ChooseFromDatasetsOp& op);

// The files of a file source: listed in its op, or (when the op lists
// none) the string component of `input`, the element an interleave maps.
enum class RecordFormat { kTextLine, kTFRecord, kFixedLength, kJsonLines };
struct FileSourceConfig {
  RecordFormat format = RecordFormat::kTextLine;
  std::vector<std::string> files;
  std::string compression_type;
  int64_t record_bytes = 0;  // fixed length only
  int64_t header_bytes = 0;
  int64_t footer_bytes = 0;
  std::vector<std::string> fields;       // json_lines only
  std::vector<std::string> field_types;  // json_lines only: one per field, or none
};
absl::StatusOr<DatasetPtr> MakeFileSourceDataset(FileSourceConfig config);

// Transforms.
// InvalidArgument naming `op` unless num_parallel_calls is -1 (one per
// core) or >= 0; shared by map, batch and interleave.
absl::Status CheckParallelCalls(int64_t num_parallel_calls, const char* op);
absl::StatusOr<DatasetPtr> MakeMapDataset(DatasetPtr input, const proto::MapOp& op);
// Consecutive maps with the same num_parallel_calls and deterministic, as
// one map that calls each function in turn on the same thread (tf.data's
// map fusion): one hand-off and one thread pool instead of one per map.
absl::StatusOr<DatasetPtr> MakeFusedMapDataset(DatasetPtr input, const std::vector<proto::MapOp>& ops);
// A map of a function made by an op itself (tokenize's), with map's
// threads, order and checkpoints; `spec` is its OutputSpec of the input's.
absl::StatusOr<DatasetPtr> MakeFunctionMapDataset(DatasetPtr input,
                                                  std::shared_ptr<const ElementFunction> function,
                                                  ElementSpec spec, std::string name,
                                                  int64_t num_parallel_calls);
absl::StatusOr<DatasetPtr> MakeFilterDataset(DatasetPtr input, const proto::FilterOp& op);
// The elements before the first the predicate refuses (transform_ops.cc).
absl::StatusOr<DatasetPtr> MakeTakeWhileDataset(DatasetPtr input, const proto::TakeWhileOp& op);
absl::StatusOr<DatasetPtr> MakeBatchDataset(DatasetPtr input, const proto::BatchOp& op);
absl::StatusOr<DatasetPtr> MakePaddedBatchDataset(DatasetPtr input, const proto::PaddedBatchOp& op);
absl::StatusOr<DatasetPtr> MakeUnbatchDataset(DatasetPtr input);
absl::StatusOr<DatasetPtr> MakeRebatchDataset(DatasetPtr input, const proto::RebatchOp& op);
absl::StatusOr<DatasetPtr> MakeShuffleDataset(DatasetPtr input, const proto::ShuffleOp& op);
absl::StatusOr<DatasetPtr> MakeRepeatDataset(DatasetPtr input, const proto::RepeatOp& op);
absl::StatusOr<DatasetPtr> MakeTakeDataset(DatasetPtr input, const proto::TakeOp& op);
absl::StatusOr<DatasetPtr> MakeIgnoreErrorsDataset(DatasetPtr input, const proto::IgnoreErrorsOp& op);
absl::StatusOr<DatasetPtr> MakeSkipDataset(DatasetPtr input, const proto::SkipOp& op);
absl::StatusOr<DatasetPtr> MakeShardDataset(DatasetPtr input, const proto::ShardOp& op);
absl::StatusOr<DatasetPtr> MakeEnumerateDataset(DatasetPtr input, const proto::EnumerateOp& op);
absl::StatusOr<DatasetPtr> MakePrefetchDataset(DatasetPtr input, const proto::PrefetchOp& op);
// Text for language models (tokenize.cc, pack_sequences.cc).
absl::StatusOr<DatasetPtr> MakeTokenizeDataset(DatasetPtr input, const proto::TokenizeOp& op);
absl::StatusOr<DatasetPtr> MakePackSequencesDataset(DatasetPtr input, const proto::PackSequencesOp& op);
// The input's elements, then `other`'s; InvalidArgument naming both specs
// unless they are compatible.
absl::StatusOr<DatasetPtr> MakeConcatenateDataset(DatasetPtr input, DatasetPtr other);
// The most specific spec that elements of `a` and of `b` both fit (tf.data's
// most_specific_common_supertype: shapes that differ become unknown), or
// InvalidArgument naming `op` and both specs when the components differ in
// number, names or dtype.
absl::StatusOr<ElementSpec> CommonElementSpec(const ElementSpec& a, const ElementSpec& b, const char* op);
// Drops the elements seen before; the input must have one scalar int32,
// int64 or string component.
absl::StatusOr<DatasetPtr> MakeUniqueDataset(DatasetPtr input);
// Carries a state through the elements with an element function of
// (state, element) -> (new state, output) (scan_op.cc).
absl::StatusOr<DatasetPtr> MakeScanDataset(DatasetPtr input, const proto::ScanOp& op);
// Windows of `size` elements every `shift`, every `stride`-th, each one
// element with its components stacked (window_op.cc).
absl::StatusOr<DatasetPtr> MakeWindowDataset(DatasetPtr input, const proto::WindowOp& op);
// The first complete pass kept in memory or in files, later passes read
// from it (cache_op.cc). `input_fingerprint` is the steps' before it: the
// files are read only by the steps that wrote them.
absl::StatusOr<DatasetPtr> MakeCacheDataset(DatasetPtr input, const proto::CacheOp& op,
                                            std::string input_fingerprint);
// Windows of elements grouped by key_fn's key, stacked as window's
// (group_by_window_op.cc).
absl::StatusOr<DatasetPtr> MakeGroupByWindowDataset(DatasetPtr input, const proto::GroupByWindowOp& op);
// Padded batches of elements of similar length
// (bucket_by_sequence_length_op.cc).
absl::StatusOr<DatasetPtr> MakeBucketBySequenceLengthDataset(DatasetPtr input,
                                                             const proto::BucketBySequenceLengthOp& op);

// An iterator that runs `input` on its own thread, up to `capacity`
// elements ahead (prefetch, and parallel interleave's cycle elements).
std::unique_ptr<IteratorBase> MakeBackgroundIterator(std::unique_ptr<IteratorBase> input, int64_t capacity,
                                                     bool start_at_first_read = false);

// Interleave builds `make_sub_dataset(element)` for each input element.
using SubDatasetFactory = std::function<absl::StatusOr<DatasetPtr>(const Element& input)>;
absl::StatusOr<DatasetPtr> MakeInterleaveDataset(DatasetPtr input, const proto::InterleaveOp& op,
                                                 SubDatasetFactory make_sub_dataset, ElementSpec sub_spec);
// flat_map: an interleave with cycle_length 1, under its own name.
absl::StatusOr<DatasetPtr> MakeFlatMapDataset(DatasetPtr input, SubDatasetFactory make_sub_dataset,
                                              ElementSpec sub_spec);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_OPS_H_
