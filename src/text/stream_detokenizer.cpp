#include "text/stream_detokenizer.h"

#include <algorithm>

#include "base/utf8.h"

namespace md {

std::string StreamDetokenizer::push(std::int32_t id) {
  if (skip_special_ && tokenizer_->is_special(id) &&
      std::find(kept_special_.begin(), kept_special_.end(), id) == kept_special_.end()) {
    return {};
  }
  if (!tokenizer_->append_token_bytes(id, pending_)) return {};
  // Same classification as utf8::repair, applied to the bytes seen so far; only a valid prefix
  // of a character that the end cuts short is kept for later.
  std::string out;
  std::size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::Step step = utf8::classify(pending_, pos);
    if (step.kind == utf8::Step::kIncomplete) break;
    if (step.kind == utf8::Step::kValid) {
      out.append(pending_, pos, step.length);
    } else {
      out.append(utf8::kReplacement);
    }
    pos += step.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamDetokenizer::finish() {
  std::string out = pending_.empty() ? std::string() : std::string(utf8::kReplacement);
  pending_.clear();
  return out;
}

}  // namespace md
