#include "text/grammar/grammar_automaton.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace md::grammar {
namespace {

// The code points a UTF-8 sequence of `length` bytes may encode (shorter forms are overlong).
CodePointRange encodable(int length) {
  switch (length) {
    case 2:
      return {0x80, 0x7FF};
    case 3:
      return {0x800, 0xFFFF};
    default:
      return {0x10000, 0x10FFFF};
  }
}

}  // namespace

GrammarAutomaton::GrammarAutomaton(Grammar grammar) : grammar_(std::move(grammar)) {
  states_.emplace_back();  // kDead: no stacks, not accepting; every byte leads back to it
  next_.assign(256, kDead);
  StateData start;
  std::vector<uint32_t> roots;
  for (uint32_t alt : grammar_.alternatives[grammar_.root]) roots.push_back(node(alt, kRoot));
  ++closure_mark_;
  for (uint32_t id : roots) close(id, start.nodes, start.accepting);
  start_ = intern(std::move(start));
}

uint32_t GrammarAutomaton::node(uint32_t pos, uint32_t ret) {
  uint64_t key = (static_cast<uint64_t>(pos) << 32) | ret;
  if (auto it = node_ids_.find(key); it != node_ids_.end()) return it->second;
  // Checked before anything is inserted: a refused grammar leaves consistent tables.
  if (nodes_.size() >= kMaxAutomatonNodes) {
    fail("the grammar's parse stacks grew past {} frames (a highly ambiguous grammar)",
         kMaxAutomatonNodes);
  }
  auto id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(Node{pos, ret});
  closure_seen_.push_back(0);
  node_ids_.emplace(key, id);
  return id;
}

void GrammarAutomaton::close(uint32_t first, std::vector<uint32_t>& out, bool& accepting) {
  std::vector<uint32_t>& work = work_;  // reused: closures run for every new transition
  work.assign(1, first);
  while (!work.empty()) {
    uint32_t id = work.back();
    work.pop_back();
    if (closure_seen_[id] == closure_mark_) continue;
    closure_seen_[id] = closure_mark_;
    const Node n = nodes_[id];
    const Element e = grammar_.elements[n.pos];
    switch (e.kind) {
      case ElementKind::kChars:
        // A frame at an empty class can never move: it is not a live parse.
        if (!grammar_.classes[e.index].ranges.empty()) out.push_back(id);
        break;
      case ElementKind::kRule: {
        // A call in tail position returns straight to our caller: no frame of its own.
        bool tail = grammar_.elements[n.pos + 1].kind == ElementKind::kEnd;
        uint32_t ret = tail ? n.ret : id;
        for (uint32_t alt : grammar_.alternatives[e.index]) work.push_back(node(alt, ret));
        break;
      }
      case ElementKind::kEnd:
        if (n.ret == kRoot) {
          accepting = true;
        } else {
          const Node caller = nodes_[n.ret];
          work.push_back(node(caller.pos + 1, caller.ret));
        }
        break;
    }
  }
}

GrammarAutomaton::State GrammarAutomaton::intern(StateData data) {
  std::sort(data.nodes.begin(), data.nodes.end());
  data.nodes.erase(std::unique(data.nodes.begin(), data.nodes.end()), data.nodes.end());
  if (data.nodes.empty() && !data.accepting && data.pending_length == 0) return kDead;
  // Looked up by hash without building a key: most interning finds an existing state.
  uint64_t hash = 0x9e3779b97f4a7c15ULL ^ (uint64_t{data.accepting} << 1) ^
                  (uint64_t{data.pending_length} << 8) ^ (uint64_t{data.pending_needed} << 16) ^
                  (uint64_t{data.pending_value} << 24);
  for (uint32_t id : data.nodes) hash = (hash ^ id) * 0x100000001b3ULL;
  std::vector<State>& bucket = state_ids_[hash];
  for (State candidate : bucket) {
    const StateData& s = states_[candidate];
    if (s.nodes == data.nodes && s.accepting == data.accepting &&
        s.pending_length == data.pending_length && s.pending_needed == data.pending_needed &&
        s.pending_value == data.pending_value) {
      return candidate;
    }
  }
  if (states_.size() >= kMaxAutomatonStates) {
    fail("the grammar reached more than {} distinct parse states", kMaxAutomatonStates);
  }
  auto id = static_cast<State>(states_.size());
  bucket.push_back(id);
  state_frames_ += data.nodes.size();
  states_.push_back(std::move(data));
  next_.resize(states_.size() * 256, kUnknown);
  return id;
}

GrammarAutomaton::State GrammarAutomaton::advance(const StateData& from, char32_t code_point) {
  StateData next;
  ++closure_mark_;
  for (uint32_t id : from.nodes) {  // `from` is never an element of states_, which may grow
    const Node n = nodes_[id];
    const CharClass& cls = grammar_.classes[grammar_.elements[n.pos].index];
    if (cls.contains(code_point)) close(node(n.pos + 1, n.ret), next.nodes, next.accepting);
  }
  return intern(std::move(next));
}

bool GrammarAutomaton::any_class_intersects(const StateData& state, char32_t lo,
                                            char32_t hi) const {
  for (uint32_t id : state.nodes) {
    const CharClass& cls = grammar_.classes[grammar_.elements[nodes_[id].pos].index];
    // Surrogates are not characters: test the parts of [lo, hi] around them.
    if (lo < 0xD800 && cls.intersects(lo, std::min<char32_t>(hi, 0xD7FF))) return true;
    if (hi > 0xDFFF && cls.intersects(std::max<char32_t>(lo, 0xE000), hi)) return true;
  }
  return false;
}

GrammarAutomaton::State GrammarAutomaton::learn_step(State state, uint8_t byte) {
  State result = compute_step(state, byte);
  next_[static_cast<std::size_t>(state) * 256 + byte] = result;  // next_ may have grown meanwhile
  return result;
}

GrammarAutomaton::State GrammarAutomaton::step(State state, std::string_view bytes) {
  for (char c : bytes) state = step(state, static_cast<uint8_t>(c));
  return state;
}

GrammarAutomaton::State GrammarAutomaton::compute_step(State state, uint8_t byte) {
  // Copy what we need: interning may reallocate states_.
  StateData from;
  from.nodes = states_[state].nodes;
  from.pending_length = states_[state].pending_length;
  from.pending_needed = states_[state].pending_needed;
  from.pending_value = states_[state].pending_value;

  if (from.pending_length == 0) {
    if (byte < 0x80) return advance(from, byte);
    if (byte >= 0xC2 && byte <= 0xDF) {
      from.pending_needed = 2, from.pending_value = byte & 0x1F;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      from.pending_needed = 3, from.pending_value = byte & 0x0F;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      from.pending_needed = 4, from.pending_value = byte & 0x07;
    } else {
      return kDead;  // a continuation byte or a byte UTF-8 never uses
    }
    from.pending_length = 1;
  } else {
    if ((byte & 0xC0) != 0x80) return kDead;
    from.pending_value = (from.pending_value << 6) | (byte & 0x3F);
    ++from.pending_length;
  }
  int missing = from.pending_needed - from.pending_length;
  char32_t lo = from.pending_value << (6 * missing);
  char32_t hi = lo | ((char32_t{1} << (6 * missing)) - 1);
  CodePointRange valid = encodable(from.pending_needed);
  lo = std::max(lo, valid.lo);
  hi = std::min(hi, valid.hi);
  if (lo > hi || !any_class_intersects(from, lo, hi)) return kDead;
  if (missing == 0) {
    from.pending_length = from.pending_needed = 0;
    char32_t code_point = from.pending_value;
    from.pending_value = 0;
    return advance(from, code_point);
  }
  from.accepting = false;  // mid-character is never a whole sentence
  return intern(std::move(from));
}

}  // namespace md::grammar
