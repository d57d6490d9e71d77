#include "text/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"
#include "base/utf8.h"

namespace md {
namespace {

pcre2_code* as_code(void* code) {
  return static_cast<pcre2_code*>(code);
}

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

// Long runs (whitespace, digits) can need deep backtracking; the JIT stack grows up to this.
constexpr std::size_t kJitStackStart = 32 * 1024;
constexpr std::size_t kJitStackMax = 4 * 1024 * 1024;

}  // namespace

struct PretokenizerRegex::Scratch {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  explicit Scratch(const pcre2_code* code) {
    match_data = pcre2_match_data_create_from_pattern(code, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
    if (!match_data || !context || !jit_stack) fail("out of memory creating regex match data");
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~Scratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

PretokenizerRegex::PretokenizerRegex(const std::string& pattern, bool literal) : pattern_(pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error_code, &error_offset, nullptr);
  if (!code) {
    fail("pre-tokenizer regex does not compile at offset {}: {} (pattern: {})", error_offset,
         pcre2_message(error_code), pattern);
  }
  code_ = code;
  // Without JIT (unsupported CPU) the interpreter gives the same results, only slower.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

PretokenizerRegex::~PretokenizerRegex() {
  pool_.clear();
  pcre2_code_free(as_code(code_));
}

std::unique_ptr<PretokenizerRegex::Scratch> PretokenizerRegex::acquire() const {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      auto scratch = std::move(pool_.back());
      pool_.pop_back();
      return scratch;
    }
  }
  return std::make_unique<Scratch>(as_code(code_));
}

void PretokenizerRegex::release(std::unique_ptr<Scratch> scratch) const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.push_back(std::move(scratch));
}

void PretokenizerRegex::split_isolated(std::string_view text,
                                       std::vector<std::string_view>& pieces) const {
  auto scratch = acquire();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t search_from = 0;
  std::size_t piece_start = 0;  // end of the last piece emitted
  while (search_from <= text.size()) {
    const int rc = jit_ ? pcre2_jit_match(as_code(code_), subject, text.size(), search_from, 0,
                                          scratch->match_data, scratch->context)
                        : pcre2_match(as_code(code_), subject, text.size(), search_from,
                                      PCRE2_NO_UTF_CHECK, scratch->match_data, scratch->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      release(std::move(scratch));
      fail("pre-tokenizer regex failed at byte {}: {}", search_from, pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch->match_data);
    const std::size_t begin = ovector[0];
    const std::size_t end = ovector[1];
    if (begin > piece_start) pieces.push_back(text.substr(piece_start, begin - piece_start));
    if (end > begin) {
      pieces.push_back(text.substr(begin, end - begin));
      piece_start = end;
      search_from = end;
    } else {
      // An empty match yields no piece; step over one character so the search advances.
      piece_start = begin;
      if (begin >= text.size()) break;
      search_from = begin + utf8::sequence_length(static_cast<unsigned char>(text[begin]));
    }
  }
  if (piece_start < text.size()) pieces.push_back(text.substr(piece_start));
  release(std::move(scratch));
}

}  // namespace md
