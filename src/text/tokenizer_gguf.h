// A tokenizer and chat template described by GGUF metadata (llama.cpp's tokenizer.* keys), given
// as plain data so that md_text needs nothing from md_io; models/common/gguf_tokenizer reads a
// GgufFile into it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace md {

// llama.cpp's token types (tokenizer.ggml.token_type); only control and user-defined matter here.
enum class GgufTokenType : std::int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // a special token: matched whole in text, skipped by decode(skip_special)
  kUserDefined = 4,  // an added, non-special token (e.g. "<think>"): matched whole in text
  kUnused = 5,
  kByte = 6,
};

struct GgufTokenizerData {
  std::string origin;               // the file, for error messages
  std::string model;                // tokenizer.ggml.model: "gpt2" (byte-level BPE) is supported
  std::string pre;                  // tokenizer.ggml.pre; "" when absent
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens, id order
  std::vector<std::string> merges;  // tokenizer.ggml.merges, "left right", rank order
  std::vector<std::int32_t> token_types;           // tokenizer.ggml.token_type; empty when absent
  std::optional<std::int32_t> bos, eos, unk, pad;  // tokenizer.ggml.*_token_id
  bool add_bos = false;                            // tokenizer.ggml.add_bos_token
  std::string chat_template;                       // tokenizer.chat_template; "" when absent
};

// Builds the byte-level BPE tokenizer (the same HfBpeTokenizer as for tokenizer.json): control
// tokens become special added tokens, user-defined ones non-special added tokens, as
// transformers' GGUF conversion does. Pre-tokenizers by tokenizer.ggml.pre:
//   "smollm"                  each \p{N} split off, then GPT-2's regex (SmolLM2's tokenizer.json:
//                             Digits(individual_digits) + ByteLevel(use_regex))
//   "gpt2", "default" or ""   GPT-2's regex (transformers' GPT2Tokenizer)
//   "qwen2"                   Qwen2/3's split regex (their tokenizer.json), no GPT-2 regex
//   "qwen35"                  Qwen3.5's: the same with combining marks (\p{M}) kept with letters
// Throws md::Error naming data.origin for another model or pre-tokenizer, missing tokens or
// merges, a token_type array of the wrong length, or a merge naming an unknown token.
std::unique_ptr<Tokenizer> build_gguf_tokenizer(GgufTokenizerData data);

// The chat template, with bos/eos token strings taken from the ids; nullopt when there is none.
std::optional<ChatTemplate> build_gguf_chat_template(const GgufTokenizerData& data);

}  // namespace md
