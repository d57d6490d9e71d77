// The tokenizer and chat template of a GGUF model file: reads llama.cpp's tokenizer.* metadata
// into text/'s plain GgufTokenizerData (md_text does not depend on md_io) and builds them there.
#pragma once

#include <memory>
#include <optional>

#include "io/gguf_file.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "text/tokenizer_gguf.h"

namespace md {

// Throws md::Error naming the file and key for metadata of the wrong kind (e.g. a token that is
// not a string); missing optional keys are left empty.
GgufTokenizerData read_gguf_tokenizer_data(const GgufFile& file);

// See build_gguf_tokenizer for what is supported.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file);

// nullopt when the file has no tokenizer.chat_template.
std::optional<ChatTemplate> load_gguf_chat_template(const GgufFile& file);

}  // namespace md
