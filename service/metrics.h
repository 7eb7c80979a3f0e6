// Prometheus metrics for the daemons: a registry of counters, gauges and
// histograms, rendered in the text exposition format 0.0.4 and served at
// /metrics by service/http_server.h.
//
// A metric is registered once, at daemon start, as a family whose children
// are told apart by their label values. Look a child up once and keep the
// reference: the hot path then touches only an atomic (counters, gauges) or
// the child's own small mutex (histograms, so that a scrape never sees a
// count that disagrees with its buckets).
//
//   CounterFamily& rpcs = ProcessMetrics().AddCounter(
//       "sluice_dispatcher_rpcs_total", "RPCs answered, by method and code.", {"method", "code"});
//   rpcs.WithLabels({"GetSplits", "OK"}).Increment();
//
//   HistogramFamily& latency = ProcessMetrics().AddHistogram(
//       "sluice_dispatcher_rpc_duration_seconds", "RPC latency.", {"method"}, DefaultLatencyBuckets());
//   { ScopedLatencyTimer timer(latency.WithLabels({"GetSplits"})); ... }
//
// State that already lives elsewhere (workers by state, jobs) is exported
// by a callback run at scrape time rather than mirrored into gauges:
//
//   metrics_callback_ = ProcessMetrics().AddGaugeCallback(
//       "sluice_dispatcher_workers", "Workers, by state.", {"state"}, [this] { return WorkerCounts(); });
//
// Metric names are constants, so a bad registration is a programmer error
// and aborts with a message naming the metric: a name or label name that is
// not a valid Prometheus name, a counter not ending in `_total`, or a name
// already registered with another type, help, labels or buckets. The first
// run of the tests finds it. Registering the very same metric again returns
// the existing family, so that several daemons in one process (the
// integration tests' clusters) share it.
#ifndef SLUICE_SERVICE_METRICS_H_
#define SLUICE_SERVICE_METRICS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace sluice {

enum class MetricType { kCounter, kGauge, kHistogram };

// OK, or InvalidArgument naming the metric and what is wrong with it: names
// must match [a-zA-Z_:][a-zA-Z0-9_:]* and label names [a-zA-Z_][a-zA-Z0-9_]*
// (not starting with "__", which Prometheus reserves, distinct, and not "le"
// on a histogram); counters end in "_total"; histogram bounds are finite and
// strictly increasing (a trailing +Inf is allowed and implied anyway).
absl::Status ValidateMetric(MetricType type, const std::string& name,
                            const std::vector<std::string>& label_names,
                            const std::vector<double>& bounds = {});

// Bucket upper bounds for RPC latencies in seconds, 0.5 ms to 10 s.
const std::vector<double>& DefaultLatencyBuckets();

// A value that only goes up (requests served, bytes sent).
class Counter {
 public:
  // Negative and NaN amounts are ignored: a counter that went down would
  // read as a restart of the process to Prometheus' rate().
  void Increment(double amount = 1);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (queue length, bytes cached).
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount = 1) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Decrement(double amount = 1) { Increment(-amount); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into buckets by upper bound (inclusive), plus their
// sum and count.
class Histogram {
 public:
  // `bounds` belongs to the family and outlives the child.
  explicit Histogram(const std::vector<double>* bounds);

  // NaN counts only in the +Inf bucket (and makes the sum NaN).
  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double>& bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, not cumulative; last is +Inf
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace internal {

struct FamilySpec {
  MetricType type;
  std::string name;
  std::string help;
  std::vector<std::string> label_names;
  std::vector<double> bounds;  // histograms only
  bool callback = false;       // values come from callbacks, not children

  bool operator==(const FamilySpec&) const = default;
};

class FamilyBase {
 public:
  explicit FamilyBase(FamilySpec spec) : spec_(std::move(spec)) {}
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const FamilySpec& spec() const { return spec_; }
  // Appends HELP, TYPE and the samples, sorted by label values; nothing
  // when there are no samples yet. With `only_tenant`, only the samples
  // whose `tenant` label is that value (none, in a family without one).
  virtual void Render(std::string* out, const std::string* only_tenant) const = 0;

 protected:
  [[noreturn]] void WrongLabelCount(size_t given) const;

 private:
  const FamilySpec spec_;
};

class CallbackFamily;

}  // namespace internal

// The children of one metric, by label values. Children live as long as the
// family, so references to them may be kept.
template <typename Child>
class Family final : public internal::FamilyBase {
 public:
  explicit Family(internal::FamilySpec spec);

  // The child for these label values (one per label name, in order),
  // created at first use. A wrong number of values aborts.
  Child& WithLabels(const std::vector<std::string>& label_values) ABSL_LOCKS_EXCLUDED(mu_);
  // The only child of a metric without labels, without a lookup; aborts on
  // a labelled metric.
  Child& Get() const {
    if (unlabelled_ == nullptr) WrongLabelCount(0);
    return *unlabelled_;
  }

  void Render(std::string* out, const std::string* only_tenant) const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::unique_ptr<Child> NewChild() const;

  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Child>> children_ ABSL_GUARDED_BY(mu_);
  Child* unlabelled_ = nullptr;  // constant after construction
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;
using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// What a callback returns: label values (one per label name) and value.
// Samples with the same label values, from one callback or several, are
// added up; samples with the wrong number of label values are dropped.
using MetricSamples = std::vector<std::pair<std::vector<std::string>, double>>;
using MetricCallback = std::function<MetricSamples()>;

// Keeps a callback registered; destroying or resetting it unregisters the
// callback, waiting for a scrape that is running it. Declare it as the last
// member of the object whose state the callback reads, so that it goes
// first; and do not destroy it while holding a lock the callback takes. The
// registry must outlive it.
class MetricCallbackHandle {
 public:
  MetricCallbackHandle() = default;
  ~MetricCallbackHandle() { Reset(); }
  MetricCallbackHandle(MetricCallbackHandle&& other) noexcept;
  MetricCallbackHandle& operator=(MetricCallbackHandle&& other) noexcept;

  void Reset();

 private:
  friend class MetricsRegistry;
  MetricCallbackHandle(internal::CallbackFamily* family, uint64_t id) : family_(family), id_(id) {}

  internal::CallbackFamily* family_ = nullptr;
  uint64_t id_ = 0;
};

// Thread-safe. Families are never removed, so the references returned stay
// valid for the life of the registry.
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            const std::vector<std::string>& label_names = {});
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        const std::vector<std::string>& label_names = {});
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                const std::vector<std::string>& label_names,
                                const std::vector<double>& bounds = DefaultLatencyBuckets());

  // A gauge or counter whose samples `callback` computes at each Render().
  // The callback runs on the scraping thread and must not call into the
  // registry. Several callbacks may share one name; their samples add up.
  [[nodiscard]] MetricCallbackHandle AddGaugeCallback(const std::string& name, const std::string& help,
                                                      const std::vector<std::string>& label_names,
                                                      MetricCallback callback);
  [[nodiscard]] MetricCallbackHandle AddCounterCallback(const std::string& name, const std::string& help,
                                                        const std::vector<std::string>& label_names,
                                                        MetricCallback callback);

  // Every metric with samples, sorted by name, in text format 0.0.4.
  std::string Render() const ABSL_LOCKS_EXCLUDED(mu_);
  // What one tenant may see: only the samples labelled tenant="`tenant`".
  // Metrics without a `tenant` label are about the whole cluster and are
  // left out.
  std::string RenderForTenant(const std::string& tenant) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  internal::FamilyBase& GetOrAdd(internal::FamilySpec spec) ABSL_LOCKS_EXCLUDED(mu_);
  MetricCallbackHandle AddCallback(internal::FamilySpec spec, MetricCallback callback);
  std::string RenderFamilies(const std::string* only_tenant) const ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<internal::FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
};

// The registry /metrics serves, created at first use with the standard
// process metrics: process_start_time_seconds, process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds and process_max_fds. Never destroyed, so that a callback
// handle held by a static object can still unregister at exit.
MetricsRegistry& ProcessMetrics();

// Observes the seconds from construction to destruction into a histogram.
class ScopedLatencyTimer {
 public:
  explicit ScopedLatencyTimer(Histogram& histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}
  ~ScopedLatencyTimer() { histogram_.Observe(ElapsedSeconds()); }
  ScopedLatencyTimer(const ScopedLatencyTimer&) = delete;
  ScopedLatencyTimer& operator=(const ScopedLatencyTimer&) = delete;

  double ElapsedSeconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  Histogram& histogram_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace sluice

#endif  // SLUICE_SERVICE_METRICS_H_
