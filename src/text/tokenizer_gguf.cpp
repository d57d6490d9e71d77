#include "text/tokenizer_gguf.h"

#include <filesystem>

#include "base/error.h"
#include "text/byte_level.h"
#include "text/tokenizer_hf.h"
#include "text/tokenizer_hf_tables.h"

namespace md {
namespace {

constexpr const char* kSupportedPre = "smollm, gpt2, default, qwen2, qwen35";

// The split regexes of Qwen2/3's tokenizer.json (llama.cpp's "qwen2") and of Qwen3.5's ("qwen35":
// combining marks \p{M} stay with their letters and out of the punctuation runs).
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

PreTokenizerSpec pretokenizer_for(const GgufTokenizerData& data) {
  PreTokenizerSpec spec;
  if (data.pre == "qwen2" || data.pre == "qwen35") {
    // Split(regex) then ByteLevel(use_regex=false), as Qwen's tokenizer.json has it.
    spec.splits.push_back({data.pre == "qwen2" ? kQwen2Pattern : kQwen35Pattern, false});
    return spec;
  }
  spec.byte_level_regex = true;  // the other variants end with GPT-2's regex
  if (data.pre == "smollm") {
    // Rust's char::is_numeric (HF Digits) is exactly the general categories Nd, Nl, No = \p{N}.
    spec.splits.push_back({R"(\p{N})", false});
  } else if (data.pre != "gpt2" && data.pre != "default" && !data.pre.empty()) {
    fail("{}: unsupported pre-tokenizer tokenizer.ggml.pre = '{}' (supported: {})", data.origin,
         data.pre, kSupportedPre);
  }
  return spec;
}

void check_model(const GgufTokenizerData& data) {
  if (data.model == "gpt2") return;
  if (data.model == "llama") {
    fail(
        "{}: SentencePiece tokenizers (tokenizer.ggml.model = 'llama') are not supported yet; "
        "only byte-level BPE ('gpt2') is",
        data.origin);
  }
  fail("{}: unsupported tokenizer.ggml.model '{}' (supported: gpt2)", data.origin,
       data.model.empty() ? "<missing>" : data.model);
}

std::vector<std::pair<std::string, std::string>> split_merges(const GgufTokenizerData& data) {
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(data.merges.size());
  for (std::size_t rank = 0; rank < data.merges.size(); ++rank) {
    const std::string& m = data.merges[rank];
    // Byte-level tokens never contain ' ' (it is spelled 'Ġ'), so the first space separates.
    const std::size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size()) {
      fail("{}: merge #{} '{}' is not of the form 'left right'", data.origin, rank, m);
    }
    merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  return merges;
}

std::vector<AddedToken> added_tokens(const GgufTokenizerData& data) {
  std::vector<AddedToken> out;
  for (std::size_t id = 0; id < data.token_types.size(); ++id) {
    const auto type = static_cast<GgufTokenType>(data.token_types[id]);
    if (type != GgufTokenType::kControl && type != GgufTokenType::kUserDefined) continue;
    const std::string& text = data.tokens[id];
    // transformers skips control tokens spelled outside the byte alphabet (llama.cpp mislabels).
    if (type == GgufTokenType::kControl && !byte_level::decode(text)) continue;
    AddedToken token;
    token.content = text;
    token.id = static_cast<std::int32_t>(id);
    token.special = type == GgufTokenType::kControl;
    token.normalized = false;  // as transformers adds them
    out.push_back(std::move(token));
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> build_gguf_tokenizer(GgufTokenizerData data) {
  check_model(data);
  if (data.tokens.empty()) fail("{}: no tokenizer.ggml.tokens array", data.origin);
  if (data.merges.empty()) {
    fail("{}: no tokenizer.ggml.merges array (a gpt2 tokenizer needs its merges)", data.origin);
  }
  if (!data.token_types.empty() && data.token_types.size() != data.tokens.size()) {
    fail("{}: tokenizer.ggml.token_type has {} entries for {} tokens", data.origin,
         data.token_types.size(), data.tokens.size());
  }
  HfBpeData bpe;
  bpe.pretokenizer = pretokenizer_for(data);
  const std::vector<AddedToken> added = added_tokens(data);
  std::vector<std::pair<std::string, std::int64_t>> vocab;
  vocab.reserve(data.tokens.size());
  for (std::size_t id = 0; id < data.tokens.size(); ++id) {
    vocab.emplace_back(std::move(data.tokens[id]), static_cast<std::int64_t>(id));
  }
  hf_load_vocab(vocab, bpe);
  hf_load_merges(split_merges(data), data.origin, bpe);
  hf_add_added_tokens(added, bpe);
  return std::make_unique<HfBpeTokenizer>(std::move(bpe));
}

std::optional<ChatTemplate> build_gguf_chat_template(const GgufTokenizerData& data) {
  if (data.chat_template.empty()) return std::nullopt;
  // Named by file, not path: the name appears in rendering errors, which reach API clients.
  ChatTemplate tmpl(data.chat_template, std::filesystem::path(data.origin).filename().string() +
                                            ":tokenizer.chat_template");
  const auto token = [&](const std::optional<std::int32_t>& id) -> std::optional<std::string> {
    if (!id || *id < 0 || static_cast<std::size_t>(*id) >= data.tokens.size()) return std::nullopt;
    return data.tokens[static_cast<std::size_t>(*id)];
  };
  tmpl.set_special_tokens(token(data.bos), token(data.eos));
  return tmpl;
}

}  // namespace md
