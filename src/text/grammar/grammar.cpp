#include "text/grammar/grammar.h"

#include <algorithm>
#include <functional>

#include "base/error.h"

namespace md::grammar {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

std::vector<CodePointRange> normalize(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CodePointRange> complement(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  char32_t next = 0;
  for (const CodePointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

std::vector<bool> nullable_rules(const Grammar& g) {
  std::vector<bool> nullable(g.alternatives.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t rule = 0; rule < g.alternatives.size(); ++rule) {
      if (nullable[rule]) continue;
      for (uint32_t start : g.alternatives[rule]) {
        uint32_t pos = start;
        while (g.elements[pos].kind == ElementKind::kRule && nullable[g.elements[pos].index]) ++pos;
        if (g.elements[pos].kind == ElementKind::kEnd) {
          nullable[rule] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Rules a rule can start with (after nullable prefixes): a cycle here is left recursion.
void check_left_recursion(const Grammar& g) {
  std::vector<bool> nullable = nullable_rules(g);
  std::vector<std::vector<uint32_t>> leftmost(g.alternatives.size());
  for (std::size_t rule = 0; rule < g.alternatives.size(); ++rule) {
    for (uint32_t pos : g.alternatives[rule]) {
      for (; g.elements[pos].kind == ElementKind::kRule; ++pos) {
        leftmost[rule].push_back(g.elements[pos].index);
        if (!nullable[g.elements[pos].index]) break;
      }
    }
  }
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> mark(g.alternatives.size(), kNew);
  // Iterative depth-first search: grammars from schemas can be deep.
  for (std::size_t start = 0; start < g.alternatives.size(); ++start) {
    if (mark[start] != kNew) continue;
    std::vector<std::pair<uint32_t, std::size_t>> stack{{static_cast<uint32_t>(start), 0}};
    mark[start] = kOpen;
    while (!stack.empty()) {
      auto& [rule, next] = stack.back();
      if (next == leftmost[rule].size()) {
        mark[rule] = kDone;
        stack.pop_back();
        continue;
      }
      uint32_t child = leftmost[rule][next++];
      if (mark[child] == kOpen) {
        fail(
            "grammar rule '{}' is left-recursive (it can begin with itself); rewrite it with "
            "repetition, e.g. list ::= item (\",\" item)*",
            g.names[child]);
      }
      if (mark[child] == kNew) {
        mark[child] = kOpen;
        stack.push_back({child, 0});
      }
    }
  }
}

}  // namespace

bool CharClass::contains(char32_t c) const {
  return intersects(c, c);
}

bool CharClass::intersects(char32_t lo, char32_t hi) const {
  // First range whose end reaches lo; it intersects when it starts by hi.
  auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                             [](const CodePointRange& r, char32_t value) { return r.hi < value; });
  return it != ranges.end() && it->lo <= hi;
}

uint32_t GrammarBuilder::rule(std::string_view name) {
  auto [it, inserted] =
      rule_ids_.emplace(std::string(name), static_cast<uint32_t>(grammar_.names.size()));
  if (!inserted) return it->second;
  grammar_.names.emplace_back(name);
  grammar_.alternatives.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(grammar_.names.size() - 1);
}

uint32_t GrammarBuilder::helper(std::string_view base) {
  // Helper names cannot collide with grammar rules: '#' is not a rule-name character.
  grammar_.names.push_back(std::string(base) + "#" + std::to_string(helpers_++));
  grammar_.alternatives.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(grammar_.names.size() - 1);
}

uint32_t GrammarBuilder::char_class(std::vector<CodePointRange> ranges, bool negated) {
  std::vector<CodePointRange> set = normalize(std::move(ranges));
  if (negated) set = complement(set);
  std::string key;
  for (const CodePointRange& r : set)
    key += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
  auto [it, inserted] =
      class_ids_.emplace(std::move(key), static_cast<uint32_t>(grammar_.classes.size()));
  if (inserted) grammar_.classes.push_back(CharClass{std::move(set)});
  return it->second;
}

void GrammarBuilder::add_alternative(uint32_t rule, const std::vector<Element>& sequence) {
  if (grammar_.elements.size() + sequence.size() + 1 > kMaxGrammarElements) {
    fail("the grammar is too large (more than {} elements)", kMaxGrammarElements);
  }
  defined_[rule] = true;
  grammar_.alternatives[rule].push_back(static_cast<uint32_t>(grammar_.elements.size()));
  grammar_.elements.insert(grammar_.elements.end(), sequence.begin(), sequence.end());
  grammar_.elements.push_back(Element{ElementKind::kEnd, 0});
}

Grammar GrammarBuilder::finish(std::string_view root_name) {
  auto root = rule_ids_.find(std::string(root_name));
  if (root == rule_ids_.end()) {
    fail("the grammar has no '{}' rule (where generation starts)", root_name);
  }
  grammar_.root = root->second;
  for (std::size_t i = 0; i < grammar_.names.size(); ++i) {
    if (!defined_[i]) fail("grammar rule '{}' is used but never defined", grammar_.names[i]);
  }
  check_left_recursion(grammar_);
  return std::move(grammar_);
}

}  // namespace md::grammar
