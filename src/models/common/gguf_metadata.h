// Metadata of a GGUF file read the way every family's GGUF config needs it: positive integers,
// the vocabulary size, the stop tokens. Errors name the file and the key.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "io/gguf_file.h"

namespace md {

// The integer at `key`, which must be present and positive.
int64_t gguf_positive(const GgufFile& file, std::string_view key);

// The length of tokenizer.ggml.tokens, or 0 when the file has none.
int64_t gguf_token_count(const GgufFile& file);

// The ids generation stops on: tokenizer.ggml.eos_token_id and eot_token_id, then every token
// spelled as one of `stop_texts` (llama.cpp counts such tokens as end of generation too), each
// once, in that order. Throws md::Error for an id outside the vocabulary.
std::vector<int64_t> gguf_stop_ids(const GgufFile& file, int64_t vocab,
                                   const std::vector<std::string_view>& stop_texts = {});

}  // namespace md
