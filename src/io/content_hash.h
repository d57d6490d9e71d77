// XXH3-64 (libxxhash) of bytes, for a weight pack's per-slice content hashes and a checkpoint's
// fingerprint: fast enough (tens of GB/s) to check every byte a rank maps at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace md {

std::uint64_t content_hash(std::span<const std::uint8_t> bytes);

// The hash of bytes given in pieces (the same as content_hash of them laid end to end).
class ContentHasher {
 public:
  ContentHasher();
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;

  void add(std::span<const std::uint8_t> bytes);
  void add(const void* data, std::size_t bytes) {
    add({static_cast<const std::uint8_t*>(data), bytes});
  }
  std::uint64_t value() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace md
