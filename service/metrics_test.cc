#include "service/metrics.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace sluice {
namespace {

TEST_CASE("metrics: counters and gauges render sorted, with labels and escaping", "[metrics]") {
  MetricsRegistry registry;
  CounterFamily& rpcs = registry.AddCounter("sluice_rpcs_total", "RPCs answered.", {"method", "code"});
  rpcs.WithLabels({"GetSplits", "OK"}).Increment();
  rpcs.WithLabels({"GetSplits", "OK"}).Increment(2);
  rpcs.WithLabels({"GetElement", "UNAVAILABLE"}).Increment(0.5);
  rpcs.WithLabels({"GetElement", "UNAVAILABLE"}).Increment(-4);  // ignored: counters only go up
  registry.AddCounter("sluice_unused_total", "A labelled family with no children is left out.", {"x"});
  registry.AddCounter("sluice_started_total", "An unlabelled one is there from the start.");
  Gauge& queue =
      registry.AddGauge("sluice_queue_length", "Help with \\ a backslash\nand a \"newline\".").Get();
  queue.Set(3);
  queue.Decrement();
  queue.Increment(0.25);
  GaugeFamily& escaped = registry.AddGauge("sluice_escaped", "Escaping.", {"value"});
  escaped.WithLabels({"a\\b\"c\nd"}).Set(-1.5);
  escaped.WithLabels({""}).Set(1e21);
  escaped.WithLabels({"inf"}).Set(INFINITY);
  escaped.WithLabels({"nan"}).Set(NAN);
  escaped.WithLabels({"small"}).Set(0.0005);
  escaped.WithLabels({"big"}).Set(123456789);
  escaped.WithLabels({"million"}).Set(1e6);
  escaped.WithLabels({"tiny"}).Set(1e-05);
  escaped.WithLabels({"x"}).Set(1234.5);
  escaped.WithLabels({"y"}).Set(0.1 + 0.2);  // shortest text that reads back the same

  CHECK(registry.Render() ==
        "# HELP sluice_escaped Escaping.\n"
        "# TYPE sluice_escaped gauge\n"
        "sluice_escaped{value=\"\"} 1e+21\n"
        "sluice_escaped{value=\"a\\\\b\\\"c\\nd\"} -1.5\n"
        "sluice_escaped{value=\"big\"} 123456789\n"
        "sluice_escaped{value=\"inf\"} +Inf\n"
        "sluice_escaped{value=\"million\"} 1000000\n"
        "sluice_escaped{value=\"nan\"} NaN\n"
        "sluice_escaped{value=\"small\"} 0.0005\n"
        "sluice_escaped{value=\"tiny\"} 1e-05\n"
        "sluice_escaped{value=\"x\"} 1234.5\n"
        "sluice_escaped{value=\"y\"} 0.30000000000000004\n"
        "# HELP sluice_queue_length Help with \\\\ a backslash\\nand a \"newline\".\n"
        "# TYPE sluice_queue_length gauge\n"
        "sluice_queue_length 2.25\n"
        "# HELP sluice_rpcs_total RPCs answered.\n"
        "# TYPE sluice_rpcs_total counter\n"
        "sluice_rpcs_total{method=\"GetElement\",code=\"UNAVAILABLE\"} 0.5\n"
        "sluice_rpcs_total{method=\"GetSplits\",code=\"OK\"} 3\n"
        "# HELP sluice_started_total An unlabelled one is there from the start.\n"
        "# TYPE sluice_started_total counter\n"
        "sluice_started_total 0\n");
}

TEST_CASE("metrics: histogram buckets are cumulative, with +Inf, _sum and _count", "[metrics]") {
  MetricsRegistry registry;
  // A trailing +Inf bound is the implied one, not a second +Inf bucket.
  HistogramFamily& latency =
      registry.AddHistogram("sluice_latency_seconds", "Latency.", {"method"}, {0.125, 0.5, 1, INFINITY});
  Histogram& get = latency.WithLabels({"Get"});
  for (const double seconds : {0.0625, 0.125, 0.25, 2.0}) get.Observe(seconds);  // 0.125 is in le="0.125"
  latency.WithLabels({"Put"}).Observe(NAN);

  const Histogram::Snapshot snapshot = get.Read();
  CHECK(snapshot.cumulative == std::vector<uint64_t>{2, 3, 3, 4});
  CHECK(snapshot.count == 4);
  CHECK(snapshot.sum == 2.4375);
  CHECK(registry.Render() ==
        "# HELP sluice_latency_seconds Latency.\n"
        "# TYPE sluice_latency_seconds histogram\n"
        "sluice_latency_seconds_bucket{method=\"Get\",le=\"0.125\"} 2\n"
        "sluice_latency_seconds_bucket{method=\"Get\",le=\"0.5\"} 3\n"
        "sluice_latency_seconds_bucket{method=\"Get\",le=\"1\"} 3\n"
        "sluice_latency_seconds_bucket{method=\"Get\",le=\"+Inf\"} 4\n"
        "sluice_latency_seconds_sum{method=\"Get\"} 2.4375\n"
        "sluice_latency_seconds_count{method=\"Get\"} 4\n"
        "sluice_latency_seconds_bucket{method=\"Put\",le=\"0.125\"} 0\n"
        "sluice_latency_seconds_bucket{method=\"Put\",le=\"0.5\"} 0\n"
        "sluice_latency_seconds_bucket{method=\"Put\",le=\"1\"} 0\n"
        "sluice_latency_seconds_bucket{method=\"Put\",le=\"+Inf\"} 1\n"
        "sluice_latency_seconds_sum{method=\"Put\"} NaN\n"
        "sluice_latency_seconds_count{method=\"Put\"} 1\n");
}

TEST_CASE("metrics: an unlabelled histogram with the default latency buckets", "[metrics]") {
  MetricsRegistry registry;
  Histogram& latency = registry.AddHistogram("rpc_seconds", "RPC latency.", {}).Get();
  latency.Observe(0.00390625);
  latency.Observe(20);
  CHECK(registry.Render() ==
        "# HELP rpc_seconds RPC latency.\n"
        "# TYPE rpc_seconds histogram\n"
        "rpc_seconds_bucket{le=\"0.0005\"} 0\n"
        "rpc_seconds_bucket{le=\"0.001\"} 0\n"
        "rpc_seconds_bucket{le=\"0.0025\"} 0\n"
        "rpc_seconds_bucket{le=\"0.005\"} 1\n"
        "rpc_seconds_bucket{le=\"0.01\"} 1\n"
        "rpc_seconds_bucket{le=\"0.025\"} 1\n"
        "rpc_seconds_bucket{le=\"0.05\"} 1\n"
        "rpc_seconds_bucket{le=\"0.1\"} 1\n"
        "rpc_seconds_bucket{le=\"0.25\"} 1\n"
        "rpc_seconds_bucket{le=\"0.5\"} 1\n"
        "rpc_seconds_bucket{le=\"1\"} 1\n"
        "rpc_seconds_bucket{le=\"2.5\"} 1\n"
        "rpc_seconds_bucket{le=\"5\"} 1\n"
        "rpc_seconds_bucket{le=\"10\"} 1\n"
        "rpc_seconds_bucket{le=\"+Inf\"} 2\n"
        "rpc_seconds_sum 20.00390625\n"
        "rpc_seconds_count 2\n");
}

TEST_CASE("metrics: ScopedLatencyTimer observes the seconds of its scope", "[metrics]") {
  MetricsRegistry registry;
  Histogram& latency = registry.AddHistogram("scope_seconds", "Scope.", {}, {0.005, 1}).Get();
  {
    ScopedLatencyTimer timer(latency);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Histogram::Snapshot snapshot = latency.Read();
  CHECK(snapshot.cumulative == std::vector<uint64_t>{0, 1, 1});
  CHECK(snapshot.sum >= 0.010);
}

TEST_CASE("metrics: concurrent updates add up exactly", "[metrics]") {
  MetricsRegistry registry;
  CounterFamily& counter = registry.AddCounter("sluice_events_total", "Events.", {"kind"});
  Gauge& gauge = registry.AddGauge("sluice_in_flight", "In flight.").Get();
  HistogramFamily& histogram = registry.AddHistogram("sluice_sizes", "Sizes.", {"kind"}, {1, 2});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50000;
  std::atomic<int> scrapes = 0;  // Catch2's CHECK is not for other threads
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Each thread looks children up itself, racing to create them.
        counter.WithLabels({"all"}).Increment();
        counter.WithLabels({"thread" + std::to_string(t % 2)}).Increment(2);
        gauge.Increment();
        gauge.Decrement();
        histogram.WithLabels({"all"}).Observe(i % 3);
        if (i % 1000 == 0) scrapes += registry.Render().empty() ? 0 : 1;  // scrapes race with updates
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(counter.WithLabels({"all"}).Value() == kThreads * kPerThread);
  CHECK(counter.WithLabels({"thread0"}).Value() == kThreads / 2 * kPerThread * 2);
  CHECK(counter.WithLabels({"thread1"}).Value() == kThreads / 2 * kPerThread * 2);
  CHECK(gauge.Value() == 0);
  CHECK(scrapes == kThreads * kPerThread / 1000);
  const Histogram::Snapshot snapshot = histogram.WithLabels({"all"}).Read();
  CHECK(snapshot.count == uint64_t{kThreads} * kPerThread);
  CHECK(snapshot.cumulative.back() == snapshot.count);
}

TEST_CASE("metrics: callback gauges are computed at scrape time and can go", "[metrics]") {
  MetricsRegistry registry;
  int idle = 2;
  MetricCallbackHandle first = registry.AddGaugeCallback(
      "sluice_workers", "Workers, by state.", {"state"}, [&idle]() -> MetricSamples {
        return {{{"idle"}, static_cast<double>(idle)}, {{"busy"}, 1}, {{"too", "many"}, 5}};
      });
  // A second daemon in the process: its samples add to the first's.
  MetricCallbackHandle second =
      registry.AddGaugeCallback("sluice_workers", "Workers, by state.", {"state"}, [] {
        return MetricSamples{{{"busy"}, 3}};
      });
  MetricCallbackHandle cpu = registry.AddCounterCallback("sluice_cpu_seconds_total", "CPU.", {}, [] {
    return MetricSamples{{{}, 1.5}};
  });
  idle = 4;
  CHECK(registry.Render() ==
        "# HELP sluice_cpu_seconds_total CPU.\n"
        "# TYPE sluice_cpu_seconds_total counter\n"
        "sluice_cpu_seconds_total 1.5\n"
        "# HELP sluice_workers Workers, by state.\n"
        "# TYPE sluice_workers gauge\n"
        "sluice_workers{state=\"busy\"} 4\n"
        "sluice_workers{state=\"idle\"} 4\n");
  MetricCallbackHandle moved = std::move(second);
  second.Reset();  // moved from: does nothing
  moved.Reset();
  first = MetricCallbackHandle();
  cpu.Reset();
  CHECK(registry.Render().empty());
}

TEST_CASE("metrics: registering the same metric again gives the same family", "[metrics]") {
  MetricsRegistry registry;
  CounterFamily& first = registry.AddCounter("sluice_a_total", "A.", {"x"});
  CHECK(&registry.AddCounter("sluice_a_total", "A.", {"x"}) == &first);
  HistogramFamily& histogram = registry.AddHistogram("sluice_h", "H.", {}, {1, 2});
  CHECK(&registry.AddHistogram("sluice_h", "H.", {}, {1, 2, INFINITY}) == &histogram);
}

TEST_CASE("metrics: invalid names, labels and buckets are refused", "[metrics]") {
  const auto message = [](MetricType type, const std::string& name, const std::vector<std::string>& labels,
                          const std::vector<double>& bounds = {}) {
    const absl::Status status = ValidateMetric(type, name, labels, bounds);
    CHECK((status.ok() || status.code() == absl::StatusCode::kInvalidArgument));
    return std::string(status.message());
  };
  const std::string bad_name = "not a valid metric name (expected [a-zA-Z_:][a-zA-Z0-9_:]*)";
  CHECK(message(MetricType::kGauge, "", {}) == "metric '': " + bad_name);
  CHECK(message(MetricType::kGauge, "1abc", {}) == "metric '1abc': " + bad_name);
  CHECK(message(MetricType::kGauge, "a-b", {}) == "metric 'a-b': " + bad_name);
  CHECK(message(MetricType::kGauge, "sluice:a_b9", {}).empty());
  CHECK(message(MetricType::kCounter, "sluice_rpcs", {}) ==
        "metric 'sluice_rpcs': a counter's name must end in _total");
  CHECK(message(MetricType::kCounter, "_total", {}) ==
        "metric '_total': a counter's name must end in _total");
  CHECK(message(MetricType::kHistogram, "sluice_x_count", {}) ==
        "metric 'sluice_x_count': a histogram's name must not end in _count");
  CHECK(
      message(MetricType::kGauge, "g", {"ok_9", "a:b"}) ==
      "metric 'g': 'a:b' is not a valid label name (expected [a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
  CHECK(
      message(MetricType::kGauge, "g", {"__name__"}) ==
      "metric 'g': '__name__' is not a valid label name (expected [a-zA-Z_][a-zA-Z0-9_]*, not starting with "
      "__)");
  CHECK(message(MetricType::kGauge, "g", {"a", "a"}) == "metric 'g': label 'a' appears twice");
  CHECK(message(MetricType::kHistogram, "h", {"le"}) == "metric 'h': 'le' is reserved on a histogram");
  CHECK(message(MetricType::kGauge, "g", {"le"}).empty());
  CHECK(message(MetricType::kHistogram, "h", {}, {1, 1}) ==
        "metric 'h': bucket bounds must be strictly increasing");
  CHECK(message(MetricType::kHistogram, "h", {}, {2, 1}) ==
        "metric 'h': bucket bounds must be strictly increasing");
  CHECK(message(MetricType::kHistogram, "h", {}, {NAN}) == "metric 'h': bucket bounds must be finite");
  CHECK(message(MetricType::kHistogram, "h", {}, {INFINITY, 1}) ==
        "metric 'h': bucket bounds must be finite");
  CHECK(message(MetricType::kHistogram, "h", {}, {-1, 0, INFINITY}).empty());
  CHECK(message(MetricType::kHistogram, "h", {}, DefaultLatencyBuckets()).empty());
}

TEST_CASE("metrics: the process registry has the standard process metrics", "[metrics]") {
  const std::string text = ProcessMetrics().Render();
  for (const std::string name : {"process_cpu_seconds_total counter", "process_max_fds gauge",
                                 "process_open_fds gauge", "process_resident_memory_bytes gauge",
                                 "process_start_time_seconds gauge", "process_virtual_memory_bytes gauge"}) {
    INFO(name);
    CHECK(text.find("# TYPE " + name + "\n") != std::string::npos);
  }
  const auto value = [&text](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(text.substr(at + name.size() + 2));
  };
  CHECK(value("process_open_fds") >= 3);
  CHECK(value("process_resident_memory_bytes") > 1e6);
  CHECK(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
  const double now = static_cast<double>(std::time(nullptr));
  CHECK(value("process_start_time_seconds") > now - 3600);
  CHECK(value("process_start_time_seconds") <= now + 1);
  CHECK(&ProcessMetrics() == &ProcessMetrics());
}

TEST_CASE("metrics: a tenant's rendering shows only the samples labelled with its name", "[metrics]") {
  MetricsRegistry registry;
  registry.AddCounter("sluice_bytes_total", "Bytes.").Get().Increment(7);
  GaugeFamily& jobs = registry.AddGauge("sluice_tenant_jobs", "Jobs.", {"tenant"});
  jobs.WithLabels({"vision"}).Set(2);
  jobs.WithLabels({"speech"}).Set(5);
  registry.AddHistogram("sluice_tenant_latency_seconds", "Latency.", {"tenant"}, {1})
      .WithLabels({"speech"})
      .Observe(0.5);
  MetricCallbackHandle iterations =
      registry.AddGaugeCallback("sluice_tenant_iterations", "Iterations.", {"state", "tenant"}, [] {
        return MetricSamples{{{"active", "vision"}, 1}, {{"active", ""}, 3}, {{"failed", "speech"}, 4}};
      });
  CHECK(registry.RenderForTenant("vision") ==
        "# HELP sluice_tenant_iterations Iterations.\n"
        "# TYPE sluice_tenant_iterations gauge\n"
        "sluice_tenant_iterations{state=\"active\",tenant=\"vision\"} 1\n"
        "# HELP sluice_tenant_jobs Jobs.\n"
        "# TYPE sluice_tenant_jobs gauge\n"
        "sluice_tenant_jobs{tenant=\"vision\"} 2\n");
  // The single client token's tenant is "".
  CHECK(registry.RenderForTenant("") ==
        "# HELP sluice_tenant_iterations Iterations.\n"
        "# TYPE sluice_tenant_iterations gauge\n"
        "sluice_tenant_iterations{state=\"active\",tenant=\"\"} 3\n");
  CHECK(registry.RenderForTenant("nobody").empty());
  // The cluster's rendering still has everything.
  const std::string all = registry.Render();
  CHECK(all.find("sluice_bytes_total 7\n") != std::string::npos);
  CHECK(all.find("sluice_tenant_jobs{tenant=\"speech\"} 5\n") != std::string::npos);
  CHECK(all.find("sluice_tenant_latency_seconds_count{tenant=\"speech\"} 1\n") != std::string::npos);
}

}  // namespace
}  // namespace sluice
