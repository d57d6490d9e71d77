// The Responses API's memory (docs/openai-api.md §14): the last N responses created with
// store=true, each with the conversation that produced it, so that a request naming it as
// previous_response_id continues that conversation, and GET / DELETE /v1/responses/{id} find it.
// Held in memory only (a restart forgets them); the oldest is dropped beyond the capacity.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace md::server {

struct StoredResponse {
  nlohmann::ordered_json response;  // the response object as GET returns it
  // The chat messages (docs/openai-api.md §2.4 form) of the request's input after its
  // predecessors', and the response's own output as assistant and tool-call messages; without
  // the request's instructions, which a continuation does not inherit.
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
};

class ResponseStore {
 public:
  // capacity 0: nothing is kept (previous_response_id then never resolves).
  explicit ResponseStore(std::size_t capacity) : capacity_(capacity) {}

  void put(const std::string& id, StoredResponse stored);
  std::optional<StoredResponse> get(const std::string& id) const;
  bool erase(const std::string& id);
  std::size_t size() const;
  std::size_t capacity() const { return capacity_; }

 private:
  using Order = std::list<std::string>;  // oldest first
  struct Entry {
    StoredResponse stored;
    Order::iterator position;
  };

  const std::size_t capacity_;
  mutable std::mutex mutex_;
  Order order_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace md::server
