#include "dispatcher/client_activity.h"

#include <iterator>

namespace sluice::dispatcher {

void ClientActivity::NoteHeard(int64_t client, Clock::time_point now) { last_heard_[client] = now; }

void ClientActivity::NoteConsumerIndex(int64_t client, int64_t consumer_index) {
  consumer_index_[client] = consumer_index;
}

void ClientActivity::NoteToldTasks(int64_t client) { told_tasks_.insert(client); }

void ClientActivity::NoteToldEnd(int64_t client) { told_tasks_.erase(client); }

std::optional<ClientActivity::Clock::time_point> ClientActivity::LastHeard(int64_t client) const {
  auto it = last_heard_.find(client);
  if (it == last_heard_.end()) return std::nullopt;
  return it->second;
}

std::vector<int64_t> ClientActivity::Silent(Clock::time_point now, Clock::duration timeout) const {
  std::vector<int64_t> silent;
  for (const auto& [client, last] : last_heard_) {
    if (now - last > timeout) silent.push_back(client);
  }
  return silent;
}

void ClientActivity::Release(int64_t client, std::optional<int64_t> iteration_id, int64_t hold) {
  last_heard_.erase(client);
  const bool took_tasks = told_tasks_.erase(client) > 0;
  if (!iteration_id.has_value()) return;
  auto index = consumer_index_.find(client);
  released_[client] = {*iteration_id, index == consumer_index_.end() ? -1 : index->second, took_tasks, hold};
  if (released_.size() > max_released_) released_.erase(released_.begin());
}

const ClientActivity::Released* ClientActivity::FindReleased(int64_t client) const {
  auto it = released_.find(client);
  return it == released_.end() ? nullptr : &it->second;
}

void ClientActivity::TakeBack(int64_t client) {
  auto it = released_.find(client);
  if (it == released_.end()) return;
  if (it->second.took_tasks) told_tasks_.insert(client);
  released_.erase(it);
}

void ClientActivity::ForgetReleasedOf(int64_t iteration_id) {
  for (auto it = released_.begin(); it != released_.end();) {
    it = it->second.iteration_id == iteration_id ? released_.erase(it) : std::next(it);
  }
}

void ClientActivity::Forget(int64_t client) {
  last_heard_.erase(client);
  released_.erase(client);
  told_tasks_.erase(client);
  consumer_index_.erase(client);
}

}  // namespace sluice::dispatcher
