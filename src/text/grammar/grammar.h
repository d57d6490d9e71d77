// A context-free grammar over Unicode code points, flattened for the matcher: every rule is a list
// of alternatives, every alternative a run of elements (a character class or a rule reference)
// ended by kEnd. Repetitions and groups are already lowered to helper rules. Built by the GBNF
// parser (gbnf_parser.h), which the JSON-schema compiler feeds with the text it writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace md::grammar {

struct CodePointRange {
  char32_t lo = 0, hi = 0;  // inclusive
};

// A set of code points as sorted, disjoint, non-adjacent ranges.
struct CharClass {
  std::vector<CodePointRange> ranges;
  bool contains(char32_t c) const;
  // True when some code point in [lo, hi] belongs to the class.
  bool intersects(char32_t lo, char32_t hi) const;
};

enum class ElementKind : uint8_t { kChars, kRule, kEnd };

struct Element {
  ElementKind kind = ElementKind::kEnd;
  uint32_t index = 0;  // kChars: into Grammar::classes; kRule: a rule id
};

struct Grammar {
  std::vector<CharClass> classes;
  std::vector<Element> elements;                    // every alternative, each ended by kEnd
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: where its alternatives start
  std::vector<std::string> names;                   // per rule, for messages
  uint32_t root = 0;
};

// Builds a Grammar rule by rule and checks it when done.
class GrammarBuilder {
 public:
  // The id of rule `name`, created (still undefined) on first mention.
  uint32_t rule(std::string_view name);
  // A fresh helper rule named after `base` (groups, repetitions).
  uint32_t helper(std::string_view base);
  // The class index for `ranges` (any order, may overlap), complemented over all code points
  // when `negated`.
  uint32_t char_class(std::vector<CodePointRange> ranges, bool negated);
  // Appends one alternative (a sequence of kChars / kRule elements; empty = epsilon) to `rule`.
  void add_alternative(uint32_t rule, const std::vector<Element>& sequence);
  bool defined(uint32_t rule) const { return defined_[rule]; }
  std::size_t element_count() const { return grammar_.elements.size(); }

  // Checks that every mentioned rule is defined, that `root_name` exists and that no rule is
  // left-recursive (the matcher would not terminate); md::Error names the offending rule.
  Grammar finish(std::string_view root_name);

 private:
  Grammar grammar_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, uint32_t> rule_ids_;
  std::unordered_map<std::string, uint32_t> class_ids_;
  uint32_t helpers_ = 0;
};

// Limits that keep a request's grammar from exhausting memory or time.
inline constexpr std::size_t kMaxGrammarElements = 1u << 21;

}  // namespace md::grammar
