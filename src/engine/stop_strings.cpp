#include "engine/stop_strings.h"

#include <algorithm>

#include "base/error.h"

namespace md::engine {
namespace {

bool is_continuation(char byte) {
  return (static_cast<unsigned char>(byte) & 0xC0) == 0x80;
}

// Length a UTF-8 sequence announces in its lead byte; 1 for ASCII and for invalid lead bytes.
std::size_t announced_length(char lead) {
  const auto b = static_cast<unsigned char>(lead);
  if (b >= 0xF0 && b < 0xF8) return 4;
  if (b >= 0xE0) return b < 0xF0 ? 3 : 1;
  if (b >= 0xC0) return 2;
  return 1;
}

// Moves an emit boundary back so that no UTF-8 character is split: not inside a character, and
// not after an incomplete final one. Looks at most 3 bytes back, so invalid UTF-8 (which is passed
// through as it is) can never hold back more than that.
std::size_t utf8_safe_cut(std::string_view text, std::size_t cut) {
  std::size_t start = cut;
  // The character that contains byte `cut - 1` begins at the first non-continuation byte before.
  while (start > 0 && cut - start < 4 && is_continuation(text[start - 1])) --start;
  if (start == 0 || cut - start >= 4) return cut;  // no lead byte nearby: not valid UTF-8
  const std::size_t lead = start - 1;
  return lead + announced_length(text[lead]) > cut ? lead : cut;
}

}  // namespace

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  if (stops.size() > kMaxStrings) {
    md::fail("at most {} stop strings are allowed, got {}", kMaxStrings, stops.size());
  }
  for (std::size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) md::fail("stop string {} is empty", i);
    if (stops[i].size() > kMaxBytes) {
      md::fail("stop string {} is {} bytes; at most {} are allowed", i, stops[i].size(), kMaxBytes);
    }
  }
  for (auto& s : stops) patterns_.push_back(compile(std::move(s)));
}

StopStringMatcher::Pattern StopStringMatcher::compile(std::string text) {
  Pattern p{std::move(text), {}, 0};
  p.fallback.assign(p.text.size() + 1, 0);
  for (std::size_t i = 1, k = 0; i < p.text.size(); ++i) {
    while (k > 0 && p.text[i] != p.text[k]) k = p.fallback[k];
    if (p.text[i] == p.text[k]) ++k;
    p.fallback[i + 1] = k;
  }
  return p;
}

std::size_t StopStringMatcher::advance(Pattern& p, char byte) {
  if (p.state == p.text.size()) p.state = p.fallback[p.state];
  while (p.state > 0 && p.text[p.state] != byte) p.state = p.fallback[p.state];
  if (p.text[p.state] == byte) ++p.state;
  return p.state;
}

StopStringOutput StopStringMatcher::push(std::string_view piece) {
  if (stopped()) return {"", true};
  const std::size_t old_size = held_.size();
  held_.append(piece);
  for (std::size_t i = old_size; i < held_.size(); ++i) {
    // The longest stop string completing at this byte starts earliest: cut before it.
    std::size_t longest = 0;
    for (std::size_t s = 0; s < patterns_.size(); ++s) {
      const std::size_t len = patterns_[s].text.size();
      if (advance(patterns_[s], held_[i]) == len && len > longest) {
        longest = len;
        matched_ = static_cast<int>(s);
      }
    }
    if (longest > 0) {
      // The held text always covers the partial match, so the cut is inside held_.
      std::string emit = held_.substr(0, i + 1 - longest);
      held_.clear();
      return {std::move(emit), true};
    }
  }
  std::size_t hold = 0;
  for (const Pattern& p : patterns_) hold = std::max(hold, p.state);
  const std::size_t cut = utf8_safe_cut(held_, held_.size() - hold);
  std::string emit = held_.substr(0, cut);
  held_.erase(0, cut);
  return {std::move(emit), false};
}

std::string StopStringMatcher::finish() {
  std::string rest = std::move(held_);
  held_.clear();
  return rest;
}

}  // namespace md::engine
