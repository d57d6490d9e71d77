#include "text/tokenizer_hf_json_reader.h"

#include "base/error.h"

namespace md {
namespace {

using Json = nlohmann::json;

// nlohmann SAX handler. Containers are tracked as pointers into the tree being built; only the
// innermost one is ever appended to, so the pointers stay valid.
class SectionReader : public nlohmann::json_sax<Json> {
 public:
  SectionReader(HfJsonSections& out, const std::string& origin) : out_(out), origin_(origin) {}

  bool null() override { return value(Json()); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override { return vocab_id(v) || value(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    return vocab_id(static_cast<std::int64_t>(v)) || value(Json(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (mode_ == Mode::kVocab) fail("{}: vocabulary entry '{}' has no valid id", origin_, key_);
    return value(Json(v));
  }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) return merge_string(v);
    if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(v));
      return true;
    }
    if (mode_ == Mode::kVocab) fail("{}: vocabulary entry '{}' has no valid id", origin_, key_);
    return value(Json(std::move(v)));
  }
  bool binary(binary_t&) override { return value(Json()); }

  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kTree) fail("{}: unexpected object inside model.{}", origin_, section());
    if (at_model_section("vocab")) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      return true;
    }
    return open(Json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kTree;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kTree) fail("{}: unexpected array inside model.{}", origin_, section());
    if (at_model_section("merges")) {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      return true;
    }
    return open(Json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) bad_merge();
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kTree;
      return true;
    }
    return close();
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    fail("{}: not valid JSON: {}", origin_, e.what());
  }

 private:
  enum class Mode { kTree, kVocab, kMerges, kMergePair };

  const char* section() const { return mode_ == Mode::kVocab ? "vocab" : "merges"; }

  // True when the object/array about to open is root.model.<name>.
  bool at_model_section(const char* name) const {
    return stack_.size() == 2 && stack_keys_[1] == "model" && key_ == name &&
           stack_[1]->is_object();
  }

  bool vocab_id(std::int64_t id) {
    if (mode_ != Mode::kVocab) return false;
    if (id < 0 || id > INT32_MAX) fail("{}: vocabulary entry '{}' has no valid id", origin_, key_);
    out_.vocab.emplace_back(std::move(key_), id);
    return true;
  }

  bool merge_string(const std::string& s) {
    const std::size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) bad_merge(s);
    out_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    return true;
  }

  [[noreturn]] void bad_merge(const std::string& text = "") {
    fail("{}: merge #{} {} is neither \"a b\" nor [\"a\", \"b\"]", origin_, out_.merges.size(),
         text);
  }

  // Places a scalar or a new container in the innermost container (or as the root).
  Json* place(Json v) {
    if (stack_.empty()) {
      out_.root = std::move(v);
      return &out_.root;
    }
    Json& parent = *stack_.back();
    if (parent.is_object()) {
      Json& slot = parent[key_];
      slot = std::move(v);
      return &slot;
    }
    parent.push_back(std::move(v));
    return &parent.back();
  }
  bool value(Json v) {
    if (mode_ != Mode::kTree) fail("{}: unexpected value inside model.{}", origin_, section());
    place(std::move(v));
    return true;
  }
  bool open(Json container) {
    const std::string key = stack_.empty() || !stack_.back()->is_object() ? "" : key_;
    stack_.push_back(place(std::move(container)));
    stack_keys_.push_back(key);
    return true;
  }
  bool close() {
    stack_.pop_back();
    stack_keys_.pop_back();
    return true;
  }

  HfJsonSections& out_;
  const std::string& origin_;
  Mode mode_ = Mode::kTree;
  std::vector<Json*> stack_;
  std::vector<std::string> stack_keys_;  // the key under which each open container sits
  std::string key_;
  std::vector<std::string> pair_;
};

}  // namespace

HfJsonSections read_hf_tokenizer_json(std::string_view json_text, const std::string& origin) {
  HfJsonSections out;
  out.vocab.reserve(1 << 17);
  out.merges.reserve(1 << 17);
  SectionReader reader(out, origin);
  if (!Json::sax_parse(json_text.begin(), json_text.end(), &reader)) {
    fail("{}: not valid JSON", origin);
  }
  return out;
}

}  // namespace md
