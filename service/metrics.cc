#include "service/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {
namespace {

[[noreturn]] void Die(const std::string& message) {
  // stderr is unbuffered, so the reason is out before the abort.
  std::fprintf(stderr, "sluice: metrics: %s\n", message.c_str());
  std::abort();
}

bool IsValidName(const std::string& name, bool colon_allowed) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (colon_allowed && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Shortest text that reads back as the same double, in the forms Prometheus
// parses: whole numbers as integers ("1000000", not "1e+06"), others as
// printf's %g would ("0.0005", "1e-05", "1e+21"), "+Inf", "NaN".
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  std::to_chars_result result;
  if (value == std::trunc(value) && std::fabs(value) < 0x1p53) {
    result = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<int64_t>(value));
  } else {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::general);
  }
  return std::string(buffer, result.ptr);
}

void AppendEscaped(const std::string& text, bool escape_quotes, std::string* out) {
  for (const char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && escape_quotes) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

void AppendHeader(const internal::FamilySpec& spec, std::string* out) {
  static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};  // by MetricType
  absl::StrAppend(out, "# HELP ", spec.name, " ");
  AppendEscaped(spec.help, /*escape_quotes=*/false, out);
  absl::StrAppend(out, "\n# TYPE ", spec.name, " ", kTypeNames[static_cast<int>(spec.type)], "\n");
}

// One sample line: name{labels,le="..."} value. `le` is empty but on
// histogram buckets.
void AppendSample(const std::string& name, const std::vector<std::string>& label_names,
                  const std::vector<std::string>& label_values, const std::string& le,
                  const std::string& value, std::string* out) {
  out->append(name);
  if (!label_names.empty() || !le.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < label_names.size(); ++i) {
      absl::StrAppend(out, i > 0 ? "," : "", label_names[i], "=\"");
      AppendEscaped(label_values[i], /*escape_quotes=*/true, out);
      out->push_back('"');
    }
    if (!le.empty()) absl::StrAppend(out, label_names.empty() ? "" : ",", "le=\"", le, "\"");
    out->push_back('}');
  }
  absl::StrAppend(out, " ", value, "\n");
}

// Where the `tenant` label is among `spec`'s labels, or -1.
int TenantLabelIndex(const internal::FamilySpec& spec) {
  for (size_t i = 0; i < spec.label_names.size(); ++i) {
    if (spec.label_names[i] == "tenant") return static_cast<int>(i);
  }
  return -1;
}

// Whether a sample with these label values is shown (see FamilyBase::Render).
bool Shown(int tenant_index, const std::vector<std::string>& values, const std::string* only_tenant) {
  return only_tenant == nullptr || (tenant_index >= 0 && values[tenant_index] == *only_tenant);
}

// A counter or a gauge.
template <typename Child>
void AppendChild(const internal::FamilySpec& spec, const std::vector<std::string>& values, const Child& child,
                 std::string* out) {
  AppendSample(spec.name, spec.label_names, values, "", FormatValue(child.Value()), out);
}

void AppendChild(const internal::FamilySpec& spec, const std::vector<std::string>& values,
                 const Histogram& child, std::string* out) {
  const Histogram::Snapshot snapshot = child.Read();
  const std::string bucket = spec.name + "_bucket";
  for (size_t i = 0; i < snapshot.cumulative.size(); ++i) {
    const std::string le = i < spec.bounds.size() ? FormatValue(spec.bounds[i]) : "+Inf";
    AppendSample(bucket, spec.label_names, values, le, absl::StrCat(snapshot.cumulative[i]), out);
  }
  AppendSample(spec.name + "_sum", spec.label_names, values, "", FormatValue(snapshot.sum), out);
  AppendSample(spec.name + "_count", spec.label_names, values, "", absl::StrCat(snapshot.count), out);
}

}  // namespace

absl::Status ValidateMetric(MetricType type, const std::string& name,
                            const std::vector<std::string>& label_names, const std::vector<double>& bounds) {
  const auto invalid = [&name](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("metric '", name, "': ", why));
  };
  if (!IsValidName(name, /*colon_allowed=*/true)) {
    return invalid("not a valid metric name (expected [a-zA-Z_:][a-zA-Z0-9_:]*)");
  }
  const auto ends_with = [&name](const std::string& suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (type == MetricType::kCounter && !ends_with("_total"))
    return invalid("a counter's name must end in _total");
  if (type == MetricType::kHistogram) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (ends_with(suffix)) return invalid(absl::StrCat("a histogram's name must not end in ", suffix));
    }
  }
  std::set<std::string> seen;
  for (const std::string& label : label_names) {
    if (!IsValidName(label, /*colon_allowed=*/false) || label.rfind("__", 0) == 0) {
      return invalid(absl::StrCat("'", label,
                                  "' is not a valid label name (expected [a-zA-Z_][a-zA-Z0-9_]*, ",
                                  "not starting with __)"));
    }
    if (type == MetricType::kHistogram && label == "le") return invalid("'le' is reserved on a histogram");
    if (!seen.insert(label).second) return invalid(absl::StrCat("label '", label, "' appears twice"));
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    const bool last_inf = i + 1 == bounds.size() && bounds[i] == INFINITY;
    if (!std::isfinite(bounds[i]) && !last_inf) return invalid("bucket bounds must be finite");
    if (i > 0 && !(bounds[i] > bounds[i - 1])) return invalid("bucket bounds must be strictly increasing");
  }
  return absl::OkStatus();
}

const std::vector<double>& DefaultLatencyBuckets() {
  static const std::vector<double>* const buckets =
      new std::vector<double>{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *buckets;
}

void Counter::Increment(double amount) {
  if (!(amount >= 0)) return;
  value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(const std::vector<double>* bounds) : bounds_(*bounds), counts_(bounds->size() + 1, 0) {}

void Histogram::Observe(double value) {
  // The bucket is found before taking the lock, to keep it short.
  const size_t bucket = std::isnan(value)
                            ? bounds_.size()
                            : std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[bucket];
  sum_ += value;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.cumulative.reserve(bounds_.size() + 1);
  absl::MutexLock lock(&mu_);
  for (const uint64_t n : counts_) {
    snapshot.count += n;
    snapshot.cumulative.push_back(snapshot.count);
  }
  snapshot.sum = sum_;
  return snapshot;
}

namespace internal {

void FamilyBase::WrongLabelCount(size_t given) const {
  Die(absl::StrCat("metric '", spec_.name, "' has labels {", absl::StrJoin(spec_.label_names, ", "),
                   "}: given ", given, " label values"));
}

// Samples come from callbacks; see MetricsRegistry::AddGaugeCallback.
class CallbackFamily final : public FamilyBase {
 public:
  explicit CallbackFamily(FamilySpec spec) : FamilyBase(std::move(spec)) {}

  uint64_t Add(MetricCallback callback) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    callbacks_.emplace(next_id_, std::move(callback));
    return next_id_++;
  }
  void Remove(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    callbacks_.erase(id);
  }

  void Render(std::string* out, const std::string* only_tenant) const override ABSL_LOCKS_EXCLUDED(mu_) {
    const int tenant_index = TenantLabelIndex(spec());
    if (only_tenant != nullptr && tenant_index < 0) return;
    std::map<std::vector<std::string>, double> samples;
    {
      // Held while the callbacks run, so that Remove() waits for a running
      // one and its owner can then go.
      absl::MutexLock lock(&mu_);
      for (const auto& [id, callback] : callbacks_) {
        for (auto& [values, value] : callback()) {
          if (values.size() == spec().label_names.size() && Shown(tenant_index, values, only_tenant)) {
            samples[std::move(values)] += value;
          }
        }
      }
    }
    if (samples.empty()) return;
    AppendHeader(spec(), out);
    for (const auto& [values, value] : samples) {
      AppendSample(spec().name, spec().label_names, values, "", FormatValue(value), out);
    }
  }

 private:
  mutable absl::Mutex mu_;
  std::map<uint64_t, MetricCallback> callbacks_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace internal

template <typename Child>
Family<Child>::Family(internal::FamilySpec spec) : FamilyBase(std::move(spec)) {
  if (!this->spec().label_names.empty()) return;
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Child>& child = children_[{}];
  child = NewChild();
  unlabelled_ = child.get();
}

template <typename Child>
std::unique_ptr<Child> Family<Child>::NewChild() const {
  if constexpr (std::is_same_v<Child, Histogram>) {
    return std::make_unique<Histogram>(&spec().bounds);
  } else {
    return std::make_unique<Child>();
  }
}

template <typename Child>
Child& Family<Child>::WithLabels(const std::vector<std::string>& label_values) {
  if (label_values.size() != spec().label_names.size()) WrongLabelCount(label_values.size());
  {
    absl::ReaderMutexLock lock(&mu_);
    const auto it = children_.find(label_values);
    if (it != children_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Child>& child = children_[label_values];
  if (child == nullptr) child = NewChild();
  return *child;
}

template <typename Child>
void Family<Child>::Render(std::string* out, const std::string* only_tenant) const {
  const int tenant_index = TenantLabelIndex(spec());
  if (only_tenant != nullptr && tenant_index < 0) return;
  absl::ReaderMutexLock lock(&mu_);
  bool header = false;
  for (const auto& [values, child] : children_) {
    if (!Shown(tenant_index, values, only_tenant)) continue;
    if (!std::exchange(header, true)) AppendHeader(spec(), out);
    AppendChild(spec(), values, *child, out);
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

MetricCallbackHandle::MetricCallbackHandle(MetricCallbackHandle&& other) noexcept
    : family_(std::exchange(other.family_, nullptr)), id_(other.id_) {}

MetricCallbackHandle& MetricCallbackHandle::operator=(MetricCallbackHandle&& other) noexcept {
  Reset();  // on self-assignment, leaves both empty, as a moved-from handle is
  std::swap(family_, other.family_);
  std::swap(id_, other.id_);
  return *this;
}

void MetricCallbackHandle::Reset() {
  if (family_ != nullptr) std::exchange(family_, nullptr)->Remove(id_);
}

MetricsRegistry::~MetricsRegistry() = default;

internal::FamilyBase& MetricsRegistry::GetOrAdd(internal::FamilySpec spec) {
  const absl::Status valid = ValidateMetric(spec.type, spec.name, spec.label_names, spec.bounds);
  if (!valid.ok()) Die(std::string(valid.message()));
  // +Inf is always the last bucket; a bound given for it is not a second one.
  if (!spec.bounds.empty() && std::isinf(spec.bounds.back())) spec.bounds.pop_back();
  absl::MutexLock lock(&mu_);
  std::unique_ptr<internal::FamilyBase>& family = families_[spec.name];
  if (family != nullptr) {
    if (family->spec() == spec) return *family;
    Die(absl::StrCat("metric '", spec.name,
                     "' registered twice with different type, help, labels or buckets"));
  }
  if (spec.callback) {
    family = std::make_unique<internal::CallbackFamily>(spec);
  } else if (spec.type == MetricType::kCounter) {
    family = std::make_unique<CounterFamily>(spec);
  } else if (spec.type == MetricType::kGauge) {
    family = std::make_unique<GaugeFamily>(spec);
  } else {
    family = std::make_unique<HistogramFamily>(spec);
  }
  return *family;
}

CounterFamily& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                           const std::vector<std::string>& label_names) {
  return static_cast<CounterFamily&>(GetOrAdd({MetricType::kCounter, name, help, label_names, {}}));
}

GaugeFamily& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& label_names) {
  return static_cast<GaugeFamily&>(GetOrAdd({MetricType::kGauge, name, help, label_names, {}}));
}

HistogramFamily& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                               const std::vector<std::string>& label_names,
                                               const std::vector<double>& bounds) {
  return static_cast<HistogramFamily&>(GetOrAdd({MetricType::kHistogram, name, help, label_names, bounds}));
}

MetricCallbackHandle MetricsRegistry::AddCallback(internal::FamilySpec spec, MetricCallback callback) {
  auto& family = static_cast<internal::CallbackFamily&>(GetOrAdd(std::move(spec)));
  return MetricCallbackHandle(&family, family.Add(std::move(callback)));
}

MetricCallbackHandle MetricsRegistry::AddGaugeCallback(const std::string& name, const std::string& help,
                                                       const std::vector<std::string>& label_names,
                                                       MetricCallback callback) {
  return AddCallback({MetricType::kGauge, name, help, label_names, {}, /*callback=*/true},
                     std::move(callback));
}

MetricCallbackHandle MetricsRegistry::AddCounterCallback(const std::string& name, const std::string& help,
                                                         const std::vector<std::string>& label_names,
                                                         MetricCallback callback) {
  return AddCallback({MetricType::kCounter, name, help, label_names, {}, /*callback=*/true},
                     std::move(callback));
}

std::string MetricsRegistry::Render() const { return RenderFamilies(nullptr); }

std::string MetricsRegistry::RenderForTenant(const std::string& tenant) const {
  return RenderFamilies(&tenant);
}

std::string MetricsRegistry::RenderFamilies(const std::string* only_tenant) const {
  // Families are never removed, so they can be rendered outside the lock,
  // and a slow callback does not hold up registration.
  std::vector<const internal::FamilyBase*> families;
  {
    absl::MutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  std::string out;
  for (const internal::FamilyBase* family : families) family->Render(&out, only_tenant);
  return out;
}

namespace {

// From /proc: boot time plus the process's start in clock ticks after it;
// the time of the first call where /proc cannot be read.
double ProcessStartTimeSeconds() {
  std::ifstream stat_file("/proc/self/stat"), boot_file("/proc/stat");
  std::string stat, line;
  std::getline(stat_file, stat);
  double boot_time = 0;
  while (std::getline(boot_file, line)) {
    if (line.rfind("btime ", 0) == 0) boot_time = std::atof(line.c_str() + 6);
  }
  // The command, field 2, may hold spaces; starttime is field 22, the 20th
  // after the ')' that ends the command.
  const size_t paren = stat.rfind(')');
  std::istringstream fields(paren == std::string::npos ? "" : stat.substr(paren + 1));
  std::string field;
  int read = 0;
  while (read < 20 && fields >> field) ++read;
  const double ticks = read == 20 ? std::atof(field.c_str()) : 0;
  if (boot_time > 0 && ticks > 0) return boot_time + ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  return static_cast<double>(std::time(nullptr));
}

MetricSamples Unlabelled(double value) { return {{{}, value}}; }

std::vector<MetricCallbackHandle> AddProcessMetrics(MetricsRegistry& registry) {
  std::vector<MetricCallbackHandle> handles;
  const double start_time = ProcessStartTimeSeconds();
  handles.push_back(registry.AddGaugeCallback("process_start_time_seconds",
                                              "Start time of the process since unix epoch in seconds.", {},
                                              [start_time] { return Unlabelled(start_time); }));
  handles.push_back(registry.AddCounterCallback(
      "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", {}, [] {
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
        return Unlabelled(seconds(usage.ru_utime) + seconds(usage.ru_stime));
      }));
  // statm: sizes in pages, the whole address space first, then resident.
  const auto statm = [](int field) {
    std::ifstream file("/proc/self/statm");
    double pages[2] = {0, 0};
    file >> pages[0] >> pages[1];
    return Unlabelled(pages[field] * static_cast<double>(sysconf(_SC_PAGESIZE)));
  };
  handles.push_back(registry.AddGaugeCallback("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                              {}, [statm] { return statm(0); }));
  handles.push_back(registry.AddGaugeCallback(
      "process_resident_memory_bytes", "Resident memory size in bytes.", {}, [statm] { return statm(1); }));
  handles.push_back(registry.AddGaugeCallback("process_open_fds", "Number of open file descriptors.", {}, [] {
    std::error_code error;
    double count = 0;
    for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
         it.increment(error)) {
      ++count;
    }
    return error ? MetricSamples{} : Unlabelled(count);
  }));
  handles.push_back(
      registry.AddGaugeCallback("process_max_fds", "Maximum number of open file descriptors.", {}, [] {
        rlimit limit{};
        if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return MetricSamples{};
        return Unlabelled(limit.rlim_cur == RLIM_INFINITY ? INFINITY : static_cast<double>(limit.rlim_cur));
      }));
  return handles;
}

}  // namespace

MetricsRegistry& ProcessMetrics() {
  // Never destroyed, so that handles in static objects may outlive the rest.
  static MetricsRegistry* const registry = new MetricsRegistry();
  static const std::vector<MetricCallbackHandle> process_metrics = AddProcessMetrics(*registry);
  return *registry;
}

}  // namespace sluice
