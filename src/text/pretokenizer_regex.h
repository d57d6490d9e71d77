// A compiled PCRE2 pre-tokenizer regex (UTF + UCP, JIT) that splits text into pieces with HF's
// "Isolated" behaviour. Safe to use from several threads at once.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace md {

class PretokenizerRegex {
 public:
  // Compiles a PCRE2 pattern (already translated, see pretokenizer_pattern.h); throws md::Error
  // with PCRE2's message and offset when it does not compile. `literal` matches the text as is.
  explicit PretokenizerRegex(const std::string& pattern, bool literal = false);
  ~PretokenizerRegex();
  PretokenizerRegex(const PretokenizerRegex&) = delete;
  PretokenizerRegex& operator=(const PretokenizerRegex&) = delete;

  // Appends to `pieces` every match and every non-empty stretch between matches, in order
  // (HF Split behaviour "Isolated", invert=false). `text` must be valid UTF-8.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Scratch;  // match data + JIT stack, reused across calls
  std::unique_ptr<Scratch> acquire() const;
  void release(std::unique_ptr<Scratch> scratch) const;

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so that users need no PCRE2 headers
  bool jit_ = false;
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Scratch>> pool_;
};

}  // namespace md
