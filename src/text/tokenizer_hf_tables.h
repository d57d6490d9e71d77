// The steps that turn a byte-level BPE vocabulary into HfBpeData's tables, shared by the
// tokenizer.json reader and the GGUF metadata builder so there is one BPE model, not two.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "text/tokenizer_hf.h"

namespace md {

// (vocabulary string, id) pairs -> pieces, raw bytes, piece_to_id and byte_ids. Sizes the
// tables to the largest id + 1; the strings are moved out of `vocab`.
void hf_load_vocab(std::vector<std::pair<std::string, std::int64_t>>& vocab, HfBpeData& data);

// Ranked merges (left, right), rank = position. Throws md::Error naming `origin`, the merge and
// its rank when a side or the merged token is not in the vocabulary.
void hf_load_merges(const std::vector<std::pair<std::string, std::string>>& merges,
                    const std::string& origin, HfBpeData& data);

// Added tokens: they take their ids (growing the tables if needed), win piece lookups, and are
// kept NFC-normalized for matching when the normalizer is NFC.
void hf_add_added_tokens(std::vector<AddedToken> tokens, HfBpeData& data);

}  // namespace md
