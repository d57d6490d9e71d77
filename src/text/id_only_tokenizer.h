// A tokenizer for a model that has none (the synthetic benchmark shapes): token ids carry no
// text, so generation runs exactly as with a real vocabulary while producing empty strings.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "text/tokenizer.h"

namespace md {

class IdOnlyTokenizer : public Tokenizer {
 public:
  explicit IdOnlyTokenizer(std::int32_t vocab_size) : vocab_size_(vocab_size) {}

  std::vector<std::int32_t> encode(std::string_view, bool = true) const override {
    fail("this model has no tokenizer: give token ids, not text");
  }
  bool append_token_bytes(std::int32_t id, std::string&) const override {
    return id >= 0 && id < vocab_size_;
  }
  std::optional<std::int32_t> token_id(std::string_view) const override { return std::nullopt; }
  bool is_special(std::int32_t) const override { return false; }
  std::int32_t vocab_size() const override { return vocab_size_; }
  std::string piece(std::int32_t) const override { return ""; }

 private:
  std::int32_t vocab_size_;
};

}  // namespace md
