#include "text/pretokenizer.h"

#include "text/pretokenizer_pattern.h"

namespace md {

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec)
    : add_prefix_space_(spec.add_prefix_space) {
  for (const auto& s : spec.splits) {
    const std::string pattern = s.literal ? s.pattern : translate_pattern_to_pcre2(s.pattern);
    splits_.push_back(std::make_unique<PretokenizerRegex>(pattern, s.literal));
  }
  if (spec.byte_level_regex) {
    byte_level_regex_ =
        std::make_unique<PretokenizerRegex>(translate_pattern_to_pcre2(kGpt2Pattern));
  }
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& storage) const {
  // Common case (Qwen): one Split step and a ByteLevel step that only maps bytes.
  if (splits_.size() == 1 && !byte_level_regex_ && !add_prefix_space_) {
    splits_[0]->split_isolated(text, pieces);
    return;
  }
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (const auto& step : splits_) {
    next.clear();
    for (std::string_view piece : current) step->split_isolated(piece, next);
    current.swap(next);
  }
  // The ByteLevel step sees each piece the Split steps produced: HF prepends the space to every
  // one that does not start with a space, then applies the GPT-2 regex to it.
  if (add_prefix_space_) {
    for (std::string_view& piece : current) {
      if (!piece.empty() && piece.front() == ' ') continue;
      std::string& prefixed = storage.emplace_back(1, ' ');
      prefixed.append(piece);
      piece = prefixed;
    }
  }
  if (!byte_level_regex_) {
    pieces.insert(pieces.end(), current.begin(), current.end());
    return;
  }
  for (std::string_view piece : current) byte_level_regex_->split_isolated(piece, pieces);
}

}  // namespace md
