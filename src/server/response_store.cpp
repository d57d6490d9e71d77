#include "server/response_store.h"

namespace md::server {

namespace {

// What an entry counts against the budget: its JSON text, about what the parsed form takes.
std::size_t footprint(const StoredResponse& stored) {
  return stored.response.dump().size() + stored.conversation.dump().size();
}

}  // namespace

void ResponseStore::drop(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  order_.erase(it->second.position);
  entries_.erase(it);
}

void ResponseStore::put(const std::string& id, StoredResponse stored) {
  const std::size_t size = footprint(stored);
  if (capacity_ == 0 || size > max_bytes_) return;
  auto shared = std::make_shared<const StoredResponse>(std::move(stored));
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(id); it != entries_.end()) drop(it);
  while (!order_.empty() && (entries_.size() >= capacity_ || bytes_ + size > max_bytes_)) {
    drop(entries_.find(order_.front()));
  }
  order_.push_back(id);
  entries_.emplace(id, Entry{std::move(shared), size, std::prev(order_.end())});
  bytes_ += size;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.stored;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  drop(it);
  return true;
}

std::size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace md::server
