// Streams a tokenizer.json: the two large arrays (model.vocab, model.merges) go straight into
// vectors, everything else into a small JSON tree, so loading needs no 300k-node DOM.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace md {

struct HfJsonSections {
  nlohmann::json root;      // the whole document without model.vocab and model.merges
  bool has_vocab = false;   // model.vocab was an object
  bool has_merges = false;  // model.merges was an array
  std::vector<std::pair<std::string, std::int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
};

// Throws md::Error naming `origin` for invalid JSON, non-integer vocabulary ids and merges that
// are neither "a b" nor ["a", "b"].
HfJsonSections read_hf_tokenizer_json(std::string_view json_text, const std::string& origin);

}  // namespace md
