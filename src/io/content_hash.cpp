#include "io/content_hash.h"

#include <xxhash.h>

#include "base/error.h"

namespace md {

std::uint64_t content_hash(std::span<const std::uint8_t> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

struct ContentHasher::State {
  XXH3_state_t* xxh = XXH3_createState();
  ~State() { XXH3_freeState(xxh); }
};

ContentHasher::ContentHasher() : state_(std::make_unique<State>()) {
  if (state_->xxh == nullptr || XXH3_64bits_reset(state_->xxh) != XXH_OK) {
    throw Error("cannot start a content hash (out of memory)");
  }
}

ContentHasher::~ContentHasher() = default;

void ContentHasher::add(std::span<const std::uint8_t> bytes) {
  if (!bytes.empty()) XXH3_64bits_update(state_->xxh, bytes.data(), bytes.size());
}

std::uint64_t ContentHasher::value() const {
  return XXH3_64bits_digest(state_->xxh);
}

}  // namespace md
