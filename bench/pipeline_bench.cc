// pipeline_bench: elements per second through the engine against a plain
// C++ loop doing the same work in the same run, for two pipelines:
//
//   range -> map(add 1) -> batch(256)
//   tfrecord -> parse_example -> batch(256)
//
// Prints one line per case with both rates and the engine's overhead,
// (loop rate / engine rate - 1). Usage:
//   pipeline_bench [--elements N] [--records N] [--repeats R]
// Each figure is the best of R runs, which filters out scheduler noise.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "client/dataset_internal.h"
#include "pipeline/record_io.h"
#include "sluice/dataset.h"
#include "sluice/element.h"
#include "sluice/proto/example.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best (lowest) seconds of `repeats` runs of `body`, which returns the
// number of elements it processed (checked against `expected`).
double BestSeconds(int repeats, int64_t expected, const std::function<int64_t()>& body) {
  double best = 1e100;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    const int64_t n = body();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (n != expected) {
      std::fprintf(stderr, "pipeline_bench: expected %lld elements, got %lld\n",
                   static_cast<long long>(expected), static_cast<long long>(n));
      std::exit(1);
    }
    best = std::min(best, seconds);
  }
  return best;
}

void Report(const char* name, int64_t elements, double engine_seconds, double loop_seconds) {
  const double engine_rate = elements / engine_seconds;
  const double loop_rate = elements / loop_seconds;
  std::printf("%-40s engine %12.0f elem/s   loop %12.0f elem/s   overhead %6.1f%%\n", name, engine_rate,
              loop_rate, (loop_rate / engine_rate - 1.0) * 100.0);
}

int64_t DrainBatches(const sluice::Dataset& dataset) {
  auto built = sluice::internal::BuildPipeline(dataset);
  if (!built.ok()) {
    std::fprintf(stderr, "pipeline_bench: %s\n", std::string(built.status().message()).c_str());
    std::exit(1);
  }
  auto iterator = *(*built)->MakeIterator(sluice::IteratorContext{});
  int64_t rows = 0;
  while (true) {
    sluice::Element batch;
    bool end = false;
    if (!iterator->GetNext(&batch, &end).ok()) std::exit(1);
    if (end) return rows;
    rows += batch.components[0].dim(0);
  }
}

void RangeMapBatch(int64_t elements, int repeats) {
  const double engine = BestSeconds(repeats, elements, [&] {
    return DrainBatches(sluice::Dataset::Range(elements).Map("add", {{"value", 1}}).Batch(256));
  });
  // The same work by hand: a fresh 256-row tensor per batch, filled with i+1.
  const double loop = BestSeconds(repeats, elements, [&] {
    int64_t rows = 0;
    for (int64_t start = 0; start < elements; start += 256) {
      const int64_t n = std::min<int64_t>(256, elements - start);
      sluice::Tensor batch(sluice::DType::kInt64, {n});
      int64_t* out = batch.mutable_data<int64_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = start + i + 1;
      asm volatile("" : : "r"(out) : "memory");  // keep the stores
      rows += batch.dim(0);
    }
    return rows;
  });
  Report("range -> map(add) -> batch(256)", elements, engine, loop);
}

std::string WriteExamples(int64_t records) {
  const std::string path = (std::filesystem::temp_directory_path() / "sluice_bench.tfrecord").string();
  auto writer = *sluice::TFRecordWriter::Create(path);
  sluice::proto::example::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  for (int64_t i = 0; i < records; ++i) {
    features["id"].mutable_int64_list()->clear_value();
    features["id"].mutable_int64_list()->add_value(i);
    auto* values = features["x"].mutable_float_list();
    values->clear_value();
    for (int k = 0; k < 16; ++k) values->add_value(static_cast<float>(i + k));
    if (!writer->Write(example.SerializeAsString()).ok()) std::exit(1);
  }
  if (!writer->Close().ok()) std::exit(1);
  return path;
}

void TFRecordParseBatch(int64_t records, int repeats) {
  const std::string path = WriteExamples(records);
  const sluice::FunctionArgMap features = {
      {"features", std::map<std::string, sluice::FunctionArg>{
                       {"id", std::map<std::string, sluice::FunctionArg>{{"dtype", "int64"}}},
                       {"x", std::map<std::string, sluice::FunctionArg>{
                                 {"dtype", "float32"}, {"shape", std::vector<sluice::FunctionArg>{16}}}}}}};
  const double engine = BestSeconds(repeats, records, [&] {
    return DrainBatches(sluice::Dataset::TFRecord({path}).Map("parse_example", features).Batch(256));
  });
  // By hand: read records, parse each Example, copy into 256-row tensors.
  const double loop = BestSeconds(repeats, records, [&] {
    auto stream = *sluice::InputStream::Open(path, sluice::Compression::kNone);
    sluice::TFRecordReader reader(std::move(stream));
    std::string record;
    sluice::proto::example::Example parsed;
    int64_t rows = 0;
    bool more = true;
    while (more) {
      sluice::Tensor ids(sluice::DType::kInt64, {256});
      sluice::Tensor xs(sluice::DType::kFloat32, {256, 16});
      int64_t n = 0;
      while (n < 256 && (more = *reader.ReadRecord(&record))) {
        parsed.ParseFromString(record);
        const auto& map = parsed.features().feature();
        ids.mutable_data<int64_t>()[n] = map.at("id").int64_list().value(0);
        std::memcpy(xs.mutable_data<float>() + n * 16, map.at("x").float_list().value().data(),
                    16 * sizeof(float));
        ++n;
      }
      rows += n;
    }
    return rows;
  });
  std::filesystem::remove(path);
  Report("tfrecord -> parse_example -> batch(256)", records, engine, loop);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t elements = 10'000'000;
  int64_t records = 500'000;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--elements")
      elements = value;
    else if (flag == "--records")
      records = value;
    else if (flag == "--repeats")
      repeats = static_cast<int>(value);
    else {
      std::fprintf(stderr, "usage: pipeline_bench [--elements N] [--records N] [--repeats R]\n");
      return 2;
    }
  }
  RangeMapBatch(elements, repeats);
  TFRecordParseBatch(records, repeats);
  return 0;
}
