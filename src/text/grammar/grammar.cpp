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

// A worklist over the rules that use each rule (a chain of N rules takes N steps, not N passes).
std::vector<bool> nullable_rules(const Grammar& g) {
  const std::size_t rules = g.alternatives.size();
  std::vector<bool> nullable(rules, false);
  std::vector<uint32_t> pending;  // per alternative: rule elements not yet nullable
  std::vector<uint32_t> owner;    // per alternative: its rule
  std::vector<std::vector<uint32_t>> users(rules);  // per rule: alternatives mentioning it
  std::vector<uint32_t> ready;
  for (std::size_t rule = 0; rule < rules; ++rule) {
    for (uint32_t start : g.alternatives[rule]) {
      auto alt = static_cast<uint32_t>(pending.size());
      uint32_t count = 0;
      bool chars = false;
      for (uint32_t pos = start; g.elements[pos].kind != ElementKind::kEnd; ++pos) {
        if (g.elements[pos].kind == ElementKind::kChars) {
          chars = true;
        } else {
          ++count;
          users[g.elements[pos].index].push_back(alt);
        }
      }
      pending.push_back(chars ? UINT32_MAX : count);  // a character is never empty
      owner.push_back(static_cast<uint32_t>(rule));
      if (count == 0 && !chars && !nullable[rule]) {
        nullable[rule] = true;
        ready.push_back(static_cast<uint32_t>(rule));
      }
    }
  }
  while (!ready.empty()) {
    uint32_t rule = ready.back();
    ready.pop_back();
    for (uint32_t alt : users[rule]) {  // once per mention: duplicates count down twice
      if (pending[alt] == UINT32_MAX || --pending[alt] != 0 || nullable[owner[alt]]) continue;
      nullable[owner[alt]] = true;
      ready.push_back(owner[alt]);
    }
  }
  return nullable;
}

// A rule may begin with another (after nullable elements). A cycle of such edges loops forever in
// the matcher's closure unless every edge of it is a tail call (which reuses the caller's frame,
// so the closure meets the same frame again and stops): refused is any cycle with a non-tail
// edge — an edge inside one strongly connected component (Tarjan, iterative: grammars from
// schemas nest deeply).
void check_left_recursion(const Grammar& g) {
  const std::size_t rules = g.alternatives.size();
  std::vector<bool> nullable = nullable_rules(g);
  struct Edge {
    uint32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> leftmost(rules);
  for (std::size_t rule = 0; rule < rules; ++rule) {
    for (uint32_t pos : g.alternatives[rule]) {
      for (; g.elements[pos].kind == ElementKind::kRule; ++pos) {
        bool tail = g.elements[pos + 1].kind == ElementKind::kEnd;
        leftmost[rule].push_back({g.elements[pos].index, tail});
        if (!nullable[g.elements[pos].index]) break;
      }
    }
  }
  constexpr uint32_t kUnvisited = UINT32_MAX;
  std::vector<uint32_t> index(rules, kUnvisited), low(rules, 0), component(rules, kUnvisited);
  std::vector<uint32_t> stack;
  std::vector<bool> on_stack(rules, false);
  uint32_t counter = 0, components = 0;
  for (std::size_t root = 0; root < rules; ++root) {
    if (index[root] != kUnvisited) continue;
    std::vector<std::pair<uint32_t, std::size_t>> calls{{static_cast<uint32_t>(root), 0}};
    index[root] = low[root] = counter++;
    stack.push_back(static_cast<uint32_t>(root));
    on_stack[root] = true;
    while (!calls.empty()) {
      auto [v, next] = calls.back();
      if (next < leftmost[v].size()) {
        ++calls.back().second;
        uint32_t w = leftmost[v][next].to;
        if (index[w] == kUnvisited) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = true;
          calls.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      calls.pop_back();
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
      if (low[v] == index[v]) {
        for (uint32_t w = UINT32_MAX; w != v;) {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          component[w] = components;
        }
        ++components;
      }
    }
  }
  for (std::size_t rule = 0; rule < rules; ++rule) {
    for (const Edge& e : leftmost[rule]) {
      if (!e.tail && component[e.to] == component[rule]) {
        fail(
            "grammar rule '{}' is left-recursive (it can begin with itself); rewrite it with "
            "repetition, e.g. list ::= item (\",\" item)*",
            g.names[e.to]);
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
