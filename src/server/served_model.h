// What the server serves: the loaded model with its tokenizer, chat template, sampling defaults
// and context, and the names it answers to. Owned by the caller (the serve command).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "models/drafters/speculative_drafter.h"
#include "models/language_model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace md::server {

struct ServedModel {
  LanguageModel* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  // null: no chat template (completions only)
  engine::SamplingParams sampling_defaults;
  int64_t context = 0;             // max_model_len
  std::string fingerprint_source;  // weights, dtype, executor, ... (system_fingerprint)
  std::string executor;
  // Speculative decoding (null: off): every row drafts with its own drafter->new_sequence().
  const SpeculativeDrafter* drafter = nullptr;
  int64_t block_size = 0;          // rows per round; 0: the drafter's
  float confidence_threshold = 0;  // --spec-confidence-threshold (0: off)
  std::string speculative_method;  // "dflash2", "dspark" (/props)
  std::string drafter_source;      // the drafter's directory (system_fingerprint)
};

}  // namespace md::server
