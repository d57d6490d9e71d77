// The Responses API's memory (docs/openai-api.md §14.4): the last responses created with
// store=true, each with the conversation that produced it, so that a request naming it as
// previous_response_id continues that conversation, and GET / DELETE /v1/responses/{id} find it.
// Held in memory only (a restart forgets them), bounded by a count and by bytes: the oldest go
// first, and one larger than the whole byte budget is not kept.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
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
  // capacity 0 or max_bytes 0: nothing is kept (previous_response_id then never resolves).
  ResponseStore(std::size_t capacity, std::size_t max_bytes)
      : capacity_(capacity), max_bytes_(max_bytes) {}

  void put(const std::string& id, StoredResponse stored);
  // Shared, never copied: a lookup holds the entry even if it is evicted meanwhile.
  std::shared_ptr<const StoredResponse> get(const std::string& id) const;
  bool erase(const std::string& id);
  std::size_t size() const;
  std::size_t bytes() const;

 private:
  using Order = std::list<std::string>;  // oldest first
  struct Entry {
    std::shared_ptr<const StoredResponse> stored;
    std::size_t bytes;
    Order::iterator position;
  };
  void drop(std::unordered_map<std::string, Entry>::iterator it);

  const std::size_t capacity_;
  const std::size_t max_bytes_;
  mutable std::mutex mutex_;
  Order order_;
  std::unordered_map<std::string, Entry> entries_;
  std::size_t bytes_ = 0;
};

}  // namespace md::server
