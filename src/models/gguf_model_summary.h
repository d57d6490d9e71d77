// What `megadecode info` says about a GGUF file (qwen35 or llama): the family's summary from the
// file's metadata, with the weights counted from the tensors the file actually holds (their
// block formats, stored bytes and per-token reads) instead of assumed from the config.
#pragma once

#include "io/gguf_file.h"
#include "models/model_summary.h"

namespace md {

// Throws md::Error naming the file for an architecture megadecode does not run, or metadata or
// tensors its family refuses.
ModelSummary summarize_gguf_model(const GgufFile& file, const SummaryOptions& options = {});

}  // namespace md
