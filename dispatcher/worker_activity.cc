#include "dispatcher/worker_activity.h"

namespace sluice::dispatcher {

void WorkerActivity::NoteHeartbeat(const std::string& address, Clock::time_point now, int64_t unix_ms,
                                   int64_t elements_sent, int64_t bytes_sent) {
  last_heard_[address] = now;
  Sent& sent = sent_[address];
  const int64_t elapsed_ms = unix_ms - sent.unix_ms;
  if (sent.unix_ms > 0 && elapsed_ms > 0 && elements_sent >= sent.elements && bytes_sent >= sent.bytes) {
    sent.rate.elements_per_second = static_cast<double>(elements_sent - sent.elements) * 1000.0 / elapsed_ms;
    sent.rate.bytes_per_second = static_cast<double>(bytes_sent - sent.bytes) * 1000.0 / elapsed_ms;
  }
  sent.unix_ms = unix_ms;
  sent.elements = elements_sent;
  sent.bytes = bytes_sent;
}

void WorkerActivity::NoteHeard(const std::string& address, Clock::time_point now) {
  last_heard_[address] = now;
}

void WorkerActivity::Forget(const std::string& address) {
  last_heard_.erase(address);
  sent_.erase(address);
}

std::optional<WorkerActivity::Clock::time_point> WorkerActivity::LastHeard(const std::string& address) const {
  auto it = last_heard_.find(address);
  if (it == last_heard_.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> WorkerActivity::LastHeartbeatUnixMs(const std::string& address) const {
  auto it = sent_.find(address);
  if (it == sent_.end()) return std::nullopt;
  return it->second.unix_ms;
}

WorkerActivity::Rate WorkerActivity::RateOf(const std::string& address) const {
  auto it = sent_.find(address);
  return it == sent_.end() ? Rate{} : it->second.rate;
}

}  // namespace sluice::dispatcher
