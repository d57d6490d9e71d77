#include "server/response_store.h"

namespace md::server {

void ResponseStore::put(const std::string& id, StoredResponse stored) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    order_.erase(it->second.position);
    entries_.erase(it);
  }
  while (entries_.size() >= capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(id);
  entries_.emplace(id, Entry{std::move(stored), std::prev(order_.end())});
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.stored;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  order_.erase(it->second.position);
  entries_.erase(it);
  return true;
}

std::size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace md::server
