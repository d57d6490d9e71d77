// The engine's tokenizer interface (text <-> token ids) and the loaders that pick the right
// implementation for a model directory: HF tokenizer.json byte-level BPE, or tiktoken.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace md {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text -> ids. Never adds BOS/EOS or template tokens (HF add_special_tokens=False).
  // With parse_special, added/special tokens written in the text (e.g. "<|im_start|>") become
  // their ids before pre-tokenization (HF split_special_tokens=false). Without it, special
  // tokens are tokenized as plain text (non-special added tokens such as "<think>" in Qwen are
  // still matched, as in HF's encode_special_tokens=True).
  // Invalid UTF-8 never fails: each maximal invalid subsequence is first replaced by U+FFFD, as
  // bytes.decode('utf-8', 'replace') would do.
  virtual std::vector<std::int32_t> encode(std::string_view text,
                                           bool parse_special = true) const = 0;

  // Ids -> text: the tokens' bytes concatenated, then invalid UTF-8 replaced by U+FFFD. Ids
  // without a token (e.g. padding rows of an embedding larger than the vocabulary) decode to
  // nothing, as in HF. skip_special drops special tokens.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;

  // Appends the raw bytes of token `id` (possibly a partial UTF-8 character) and returns true,
  // or returns false when `id` has no token.
  virtual bool append_token_bytes(std::int32_t id, std::string& out) const = 0;
  // The raw bytes of one token ("" for an id without a token), e.g. for streaming output.
  std::string token_bytes(std::int32_t id) const;

  // The id of a token given in its vocabulary form (what piece() returns, e.g. "Ġthe" for
  // byte-level vocabularies, or "<|im_end|>"), if any.
  virtual std::optional<std::int32_t> token_id(std::string_view token_text) const = 0;
  virtual bool is_special(std::int32_t id) const = 0;
  // Added tokens, special or not (Qwen's <think>, <tool_call>): markers the templates and parsers
  // give meaning to, which constrained output must never produce as text.
  virtual bool is_added(std::int32_t id) const { return is_special(id); }
  // One past the largest token id.
  virtual std::int32_t vocab_size() const = 0;
  // Display form of a token: its vocabulary string ("" for an id without a token).
  virtual std::string piece(std::int32_t id) const = 0;
};

// Loads the tokenizer of a model directory: tokenizer.json (HF) if present, else tiktoken.model
// (plus tokenizer_config.json for special-token names when present). Throws md::Error naming the
// directory and the files looked for when neither exists.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir);

// Loads an HF tokenizer.json (byte-level BPE only); throws md::Error naming the file and the
// unsupported component for anything else.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& tokenizer_json_path);
// Same from the JSON text; `origin` names it in error messages.
std::unique_ptr<Tokenizer> load_hf_tokenizer_from_json(std::string_view json_text,
                                                       const std::string& origin);

struct TiktokenFiles {
  std::string model_path;   // tiktoken.model: "base64(token bytes) rank" per line
  std::string config_path;  // tokenizer_config.json with added_tokens_decoder; "" for none
  // Pre-tokenizer pattern (tiktoken pat_str syntax). Empty: the "pat_str" key of the config if
  // any, else the one in tokenization_kimi.py beside the model, else Kimi's built-in pattern.
  std::string pattern;
  int num_reserved_special_tokens = 256;
  // The model's vocabulary (config.json's vocab_size), 0 when unknown. The reserved specials fill
  // the ids after the ranks up to it: a real Kimi checkpoint has exactly 256 there, a scaled-down
  // one fewer, and ids the model cannot produce or read are no tokens.
  std::int64_t vocab_limit = 0;
};
std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const TiktokenFiles& files);

}  // namespace md
