"""An independent judge of GBNF grammars at the token level, for test_structured_output.py:
llguidance (PyPI `llguidance`, Rust, no torch) given the same GBNF text as megadecode, converted
by llguidance's own GBNF -> Lark converter (llguidance.gbnf_to_lark) with the changes below, and a
token-level matcher built from the model's tokenizer.json.

Changes to the converter's output, each one a place where llguidance would otherwise judge a
different language than the GBNF text says (found on this fixture's tokenizer):
  * lexemes: the converter makes every rule built only of terminals, and every literal, one
    lexeme, and llguidance's lexer is greedy without backtracking: `root ::= "-" ( [1-9] [0-9]{2}
    | "1000" )` then refuses "-100" (the lexeme "1000" swallows "10"), `root ::= w "x"` with
    `w ::= [a-z]+` refuses everything. Here every lexeme is one character (literals are split,
    no rule becomes a terminal), so llguidance's Earley parser decides alone: plain context-free.
  * forcing: where the grammar forces the next bytes, llguidance by default allows only the first
    token of their canonical tokenization (after "y" in `"yes" | "no"`: "es" but not "e"), a
    tokenization policy, not the language. The grammar carries its "no_forcing" option.
  * escapes: the converter writes "\\x41" and "\\u00e9" into Lark string literals, which
    llguidance's Lark lexer rejects, and strips the leading zeros of \\u / \\U escapes ("\\ue9"),
    which its regex parser rejects. Here every escape is decoded.
  * `.`: GBNF's any-character matches "\\n" too; the converter's /./ does not (Rust regex
    default), so it becomes /(?s:.)/.
  * a repetition of a repetition (`( [0-9]{1,4} )?` once the converter has dropped the group)
    is printed as `/[0-9]/{1,4}?`, an error in Lark; it gets its parentheses back.
  * '&' and '~' in a class are escaped (Rust's regex reads them doubled as set operators), and
    rules are renamed r0, r1, ... so that the converter's own renaming (lower case, '-' -> '_')
    cannot make two names collide.
Everything else (the GBNF parsing, repetition, the Lark it prints) is the converter's.

What is compared, token by token (Judge.allowed):
  * ordinary tokens: allowed when their bytes keep the text a prefix of a sentence of the grammar.
    Bytes, not characters: a token holding part of a UTF-8 character is allowed when some
    allowed character starts with those bytes; encoded surrogates (ED A0..BF ..), code points
    above U+10FFFF, overlong forms and the bytes C0, C1, F5..FF never are.
  * special added tokens ("special": true in tokenizer.json): never, except the model's EOS ids
    (generation_config.json ∪ config.json eos_token_id), all of which are allowed exactly when
    the text so far is a complete sentence.
  * added tokens with "special": false (Qwen's <think>, </think>, <tool_call>, ...): never
    either, as llguidance itself treats every added token. Oracle(added_as_text=True) judges
    them instead as the text they stand for (their content's bytes). Never is the safer rule for
    the server: a JSON string holding </think> or <tool_call> would otherwise reach the
    reasoning and tool-call parsers.
A prefix is fed to llguidance one byte-token at a time (its bytes, whatever tokens produced them),
so the judgement does not depend on how the prefix was tokenized.
"""
import json
from pathlib import Path

import llguidance
from llguidance import gbnf_to_lark as _g2l


def _decode_escape(text, i):
    """The code point of the GBNF escape at text[i] == '\\' and the index after it."""
    if i + 1 >= len(text):
        raise _g2l.GbnfToLarkError(_g2l.Position(text, i), "Incomplete escape sequence")
    c = text[i + 1]
    simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
    if c in simple:
        return simple[c], i + 2
    width = {"x": 2, "u": 4, "U": 8}.get(c)
    digits = text[i + 2:i + 2 + (width or 0)]
    if width is None or len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
        raise _g2l.GbnfToLarkError(_g2l.Position(text, i), f"Invalid escape sequence \\{c}{digits}")
    return chr(int(digits, 16)), i + 2 + width


class _Parser(_g2l.GrammarParser):
    """llguidance's GBNF parser with escapes decoded (see the module comment)."""

    def _parse_char(self, pos):
        if pos.current() == "\\":
            ch, end = _decode_escape(pos.text, pos.pos)
            # An escaped character as a regex escape: never equal to the raw ']' that the class
            # parser stops at. (Only classes use this: literals have their own parser below.)
            return "\\u{%x}" % ord(ch), _g2l.Position(pos.text, end)
        if pos.current() in "&~":
            return "\\u{%x}" % ord(pos.current()), pos.advance()
        return super()._parse_char(pos)

    def _parse_literal(self, pos):
        if pos.current() != '"':
            raise _g2l.GbnfToLarkError(pos, "Expected '\"'")
        text, i, out = pos.text, pos.pos + 1, []
        while True:
            if i >= len(text):
                raise _g2l.GbnfToLarkError(_g2l.Position(text, i), "Unexpected end of input")
            if text[i] == "\\":
                ch, i = _decode_escape(text, i)
                out.append(ch)
            elif text[i] == '"':
                i += 1
                break
            else:
                out.append(text[i])
                i += 1
        # One lexeme per character (see _no_lexemes).
        chars = [_g2l.LiteralNode(json.dumps(ch, ensure_ascii=False)[1:-1]) for ch in out]
        node = _g2l.SequenceNode(chars) if chars else _g2l.LiteralNode("")
        return node, _g2l.Position(text, i)


def _fix_any_char(node):
    for i, child in enumerate(node.children()):
        if isinstance(child, _g2l.RegexNode) and child.rx == ".":
            fixed = _g2l.RegexNode("(?s:.)")
            if isinstance(node, _g2l.SequenceNode):
                node.nodes[i] = fixed
            elif isinstance(node, _g2l.AlternativeNode):
                node.alternatives[i] = fixed
            elif isinstance(node, _g2l.RepetitionNode):
                node.node = fixed
            elif isinstance(node, _g2l.RuleNode):
                node.alternatives = fixed
        else:
            _fix_any_char(child)


def _fix_nested_repetition(node):
    for child in node.children():
        _fix_nested_repetition(child)
    if isinstance(node, _g2l.RepetitionNode) and isinstance(node.node, _g2l.RepetitionNode):
        node.node = _g2l.SequenceNode([node.node])  # printed in parentheses


def _rename_rules(rules):
    """Rules renamed r0, r1, ... (root stays root; the old name becomes a comment): the converter
    lowercases names, turns '-' into '_' and upper-cases lexemes, so distinct GBNF names such as
    "a-b" / "a_b" or "x" / "X" would collide, and Lark names cannot start with a digit."""
    def walk(node, names):
        if isinstance(node, _g2l.RuleRefNode):
            if node.name not in names:
                raise _g2l.GbnfToLarkError(_g2l.Position("", 0), f"Rule '{node.name}' not found")
            node.name = names[node.name]
        for child in node.children():
            walk(child, names)
    names = {name: name if name == "root" else f"r{i}" for i, name in enumerate(rules)}
    renamed = {}
    for name, rule in rules.items():
        walk(rule, names)
        rule.comment = f"{rule.comment}// {name}\n" if name != "root" else rule.comment
        rule.name = names[name]
        renamed[rule.name] = rule
    return renamed


def _no_lexemes(rules):
    """Undoes the converter's lexemes: a rule made only of terminals stays a grammar rule."""
    for rule in rules.values():
        if rule.rule_is_terminal:
            rule.rule_is_terminal = False
            rule.name = rule.name.lower()


def gbnf_to_lark(gbnf):
    """llguidance's gbnf_to_lark() with the fixes above."""
    rules = _rename_rules(_Parser().parse(gbnf))
    for rule in rules.values():
        _fix_any_char(rule)
    _g2l.resolve(rules)
    _no_lexemes(rules)
    for rule in rules.values():
        _fix_nested_repetition(rule)
    out, prev_nl = "%llguidance {\"no_forcing\": true}\n\n", True
    for rule in sorted(rules.values(), key=lambda r: r.order):
        s = str(rule)
        if not prev_nl and "\n" in s:
            out += "\n"
        out += s + "\n"
        prev_nl = "\n" in s
        if prev_nl:
            out += "\n"
    return out


def model_eos_ids(model_dir):
    """eos_token_id of generation_config.json ∪ config.json (and its text_config)."""
    ids = set()
    for name in ("generation_config.json", "config.json"):
        path = Path(model_dir) / name
        if not path.exists():
            continue
        config = json.loads(path.read_text())
        for obj in (config, config.get("text_config") or {}):
            value = obj.get("eos_token_id")
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list):
                ids.update(v for v in value if isinstance(v, int))
    return ids


class Oracle:
    """llguidance over one model's tokenizer; judge(gbnf) gives a Judge for one grammar."""

    def __init__(self, model_dir, added_as_text=False):
        text = (Path(model_dir) / "tokenizer.json").read_text()
        self.eos_ids = model_eos_ids(model_dir)
        self.tok = llguidance.LLTokenizer(text, eos_token=min(self.eos_ids))
        self.vocab_size = self.tok.vocab_size
        added = {t["id"]: t for t in json.loads(text).get("added_tokens", [])}
        as_text = {i for i, t in added.items() if added_as_text and not t.get("special")}
        self.special_ids = set(added) - as_text
        self.text_added = {i: added[i]["content"].encode() for i in as_text}
        self.token_bytes = {}
        for i in range(self.vocab_size):
            if i in self.special_ids:
                continue
            data = self.text_added.get(i, self.tok.decode_bytes([i]))
            # llguidance reads the byte 0xFF as its special-token marker, so a token of that
            # byte (never part of UTF-8) decodes to nothing there: left out, it is never
            # allowed and a prefix holding it is invalid, as on any UTF-8 grammar.
            if data:
                self.token_bytes[i] = data
        # One single-byte token per byte value (0xFF, never in UTF-8, may have none: llguidance
        # uses that byte to mark special tokens).
        self.byte_token = {}
        for i, b in self.token_bytes.items():
            if len(b) == 1 and i not in self.text_added:
                self.byte_token.setdefault(b[0], i)

    def text_bytes(self, tokens):
        """The bytes of a token sequence, or None if it holds a special token."""
        out = bytearray()
        for t in tokens:
            if t not in self.token_bytes:
                return None
            out += self.token_bytes[t]
        return bytes(out)

    def judge(self, gbnf):
        return Judge(self, gbnf)


class Judge:
    """llguidance's verdicts for one GBNF grammar."""

    def __init__(self, oracle, gbnf):
        self.oracle = oracle
        self.lark = gbnf_to_lark(gbnf)
        grammar = llguidance.LLMatcher.grammar_from_lark(self.lark)
        self.matcher = llguidance.LLMatcher(oracle.tok, grammar, log_level=0)
        if self.matcher.is_error():
            raise ValueError(f"llguidance rejects the grammar: {self.matcher.get_error()}\n{self.lark}")

    def _feed(self, matcher, data):
        for b in data:
            t = self.oracle.byte_token.get(b)
            if t is None or not matcher.consume_token(t):
                return False
        return True

    def consume_text(self, data):
        """A fresh matcher after `data` (bytes), or None when `data` leaves the grammar. (A copy
        of the initial one each time: a matcher that refused a token stays in its error state.)"""
        m = self.matcher.deep_copy()
        return m if self._feed(m, data) else None

    def accepts(self, data):
        """(viable prefix, complete sentence) for `data` (bytes)."""
        m = self.consume_text(data)
        return (False, False) if m is None else (True, m.is_accepting())

    def allowed(self, prefix):
        """(sorted allowed next token ids, accepting) after the token ids `prefix`, or None when
        the prefix itself leaves the grammar (or holds a special token)."""
        o = self.oracle
        data = o.text_bytes(prefix)
        if data is None:
            return None
        m = self.consume_text(data)
        if m is None:
            return None
        accepting = m.is_accepting()
        mask = m.compute_bitmask()
        allowed = {i for i in range(o.vocab_size)
                   if (mask[i >> 3] >> (i & 7)) & 1 and i not in o.special_ids and i not in o.text_added}
        for i, content in o.text_added.items():
            if self._feed(m.deep_copy(), content):
                allowed.add(i)
        if accepting:
            allowed |= o.eos_ids
        return sorted(allowed), accepting
