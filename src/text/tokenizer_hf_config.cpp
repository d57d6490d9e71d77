// Reading and validating tokenizer.json into HfBpeData (see tokenizer_hf.h).
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/byte_level.h"
#include "text/tokenizer_hf.h"
#include "text/tokenizer_hf_json_reader.h"
#include "text/tokenizer_hf_tables.h"
#include "text/unicode_normalizer.h"

namespace md {
namespace {

using Json = nlohmann::json;

std::string type_of(const Json& j) {
  if (!j.is_object()) return "<not an object>";
  const auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "<missing type>";
}

bool bool_field(const Json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

void parse_normalizer(const Json& j, const std::string& origin, HfBpeData& data) {
  if (j.is_null()) return;
  const std::string type = type_of(j);
  if (type == "NFC") {
    data.nfc = true;
  } else if (type == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
    for (const Json& step : j["normalizers"]) parse_normalizer(step, origin, data);
  } else {
    fail("{}: unsupported normalizer '{}' (supported: NFC, a Sequence of NFC, or none)", origin,
         type);
  }
}

void parse_split(const Json& step, const std::string& origin, PreTokenizerSpec& spec) {
  const std::string behavior = step.value("behavior", std::string("<missing>"));
  if (behavior != "Isolated") {
    fail("{}: unsupported Split pre-tokenizer behavior '{}' (only Isolated)", origin, behavior);
  }
  if (bool_field(step, "invert", false))
    fail("{}: unsupported Split pre-tokenizer invert=true", origin);
  const Json& pattern = step.contains("pattern") ? step["pattern"] : Json();
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    spec.splits.push_back({pattern["Regex"].get<std::string>(), false});
  } else if (pattern.contains("String") && pattern["String"].is_string()) {
    spec.splits.push_back({pattern["String"].get<std::string>(), true});
  } else {
    fail("{}: Split pre-tokenizer without a Regex or String pattern", origin);
  }
}

void parse_pretokenizer(const Json& j, const std::string& origin, HfBpeData& data) {
  if (j.is_null()) {
    fail("{}: no pre_tokenizer; only byte-level BPE (a ByteLevel pre-tokenizer) is supported",
         origin);
  }
  std::vector<Json> steps;
  if (type_of(j) == "Sequence" && j.contains("pretokenizers") && j["pretokenizers"].is_array()) {
    steps = j["pretokenizers"].get<std::vector<Json>>();
  } else {
    steps.push_back(j);
  }
  bool byte_level = false;
  for (const Json& step : steps) {
    const std::string type = type_of(step);
    if (byte_level)
      fail("{}: pre_tokenizer step '{}' after ByteLevel is not supported", origin, type);
    if (type == "Split") {
      parse_split(step, origin, data.pretokenizer);
    } else if (type == "ByteLevel") {
      byte_level = true;
      data.pretokenizer.add_prefix_space = bool_field(step, "add_prefix_space", false);
      data.pretokenizer.byte_level_regex = bool_field(step, "use_regex", true);
    } else {
      fail(
          "{}: unsupported pre_tokenizer '{}' (supported: Split with behavior Isolated, then "
          "ByteLevel)",
          origin, type);
    }
  }
  if (!byte_level) {
    fail("{}: the pre_tokenizer has no ByteLevel step; only byte-level BPE is supported", origin);
  }
}

void check_decoder(const Json& j, const std::string& origin) {
  if (type_of(j) != "ByteLevel") {
    fail("{}: unsupported decoder '{}' (only ByteLevel)", origin,
         j.is_null() ? "null" : type_of(j));
  }
}

void check_model_options(const Json& model, const HfJsonSections& sections,
                         const std::string& origin) {
  const std::string type = model.contains("type") ? type_of(model) : "BPE";
  if (type != "BPE") fail("{}: unsupported model type '{}' (only BPE)", origin, type);
  if (model.contains("dropout") && model["dropout"].is_number() &&
      model["dropout"].get<double>() > 0) {
    fail("{}: BPE dropout is not supported", origin);
  }
  if (bool_field(model, "byte_fallback", false)) {
    fail("{}: BPE byte_fallback=true is not supported (byte-level BPE needs none)", origin);
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      fail("{}: BPE {} is not supported", origin, key);
    }
  }
  if (!sections.has_vocab) fail("{}: the BPE model has no \"vocab\" object", origin);
  if (!sections.has_merges) fail("{}: the BPE model has no \"merges\" array", origin);
}

std::vector<AddedToken> parse_added_tokens(const Json& j, const std::string& origin) {
  std::vector<AddedToken> tokens;
  if (j.is_null()) return tokens;
  if (!j.is_array()) fail("{}: \"added_tokens\" is not an array", origin);
  for (const Json& t : j) {
    if (!t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string()) {
      fail("{}: an added token lacks an integer \"id\" or a string \"content\"", origin);
    }
    AddedToken token;
    token.id = t["id"].get<std::int32_t>();
    token.content = t["content"].get<std::string>();
    token.special = bool_field(t, "special", false);
    token.lstrip = bool_field(t, "lstrip", false);
    token.rstrip = bool_field(t, "rstrip", false);
    token.normalized = bool_field(t, "normalized", !token.special);
    if (bool_field(t, "single_word", false)) {
      fail("{}: added token '{}' has single_word=true, which is not supported", origin,
           token.content);
    }
    if (token.id < 0) fail("{}: added token '{}' has a negative id", origin, token.content);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace

HfBpeData parse_hf_tokenizer_json(std::string_view json_text, const std::string& origin) {
  HfJsonSections sections = read_hf_tokenizer_json(json_text, origin);
  const Json& root = sections.root;
  if (!root.is_object()) fail("{}: not a tokenizer.json (top level is not an object)", origin);
  if (!root.contains("model") || root["model"].is_null()) fail("{}: no \"model\" section", origin);
  const Json& model = root["model"];
  check_model_options(model, sections, origin);

  HfBpeData data;
  parse_normalizer(root.value("normalizer", Json()), origin, data);
  parse_pretokenizer(root.value("pre_tokenizer", Json()), origin, data);
  check_decoder(root.value("decoder", Json()), origin);
  data.ignore_merges = bool_field(model, "ignore_merges", false);
  hf_load_vocab(sections.vocab, data);
  hf_load_merges(sections.merges, origin, data);
  if (data.ignore_merges) {
    for (std::size_t id = 0; id < data.bytes.size(); ++id) {
      if (data.has_token[id])
        data.bytes_to_id.emplace(data.bytes[id], static_cast<std::int32_t>(id));
    }
  }
  hf_add_added_tokens(parse_added_tokens(root.value("added_tokens", Json()), origin), data);
  return data;
}

}  // namespace md
