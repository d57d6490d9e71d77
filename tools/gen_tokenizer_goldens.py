#!/usr/bin/env python3
"""Reference token ids for megadecode's tokenizer tests, computed by the Python packages
`tokenizers` (Hugging Face) and `tiktoken` themselves, so the C++ code is compared against
implementations no one here wrote.

Writes into --out/tokenizer/:
  corpus_encode.jsonl    one line per test string: raw bytes (hex), category, Qwen3 ids with
                         special tokens parsed and not parsed (HF encode_special_tokens)
  corpus_decode.jsonl    random id sequences and their decode() with/without skip_special_tokens
  variant_<name>/tokenizer.json + encode.jsonl
                         the Qwen3 vocabulary with other pre-tokenizer / added-token settings
  tiktoken/tiktoken.model, tiktoken/tokenizer_config.json, tiktoken/encode.jsonl, decode.jsonl
                         a tiktoken Encoding built from the Qwen3 ranks with Kimi's pat_str

Deterministic (seeded), offline, a few seconds. Usage:
  gen_tokenizer_goldens.py --tokenizer-dir tests/data/qwen3-tokenizer --out build/goldens
"""

import argparse
import base64
import copy
import json
import os
import random
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from byte_level import bytes_to_unicode  # noqa: E402

SEED = 20260101

KIMI_PAT_STR = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
            "</tool_call>", "<|vision_start|>", "<|image_pad|>", "<|fim_prefix|>",
            "<tool_response>", "</tool_response>"]

WORDS = ("the of and to in is that it was for on are as with his they at be this from have or by "
         "one had not but what all were when we there can an your which their said if do will each "
         "about how up out them then she many some so these would other into has more her two like "
         "him see time could no make than first been its who now people my made over did down only "
         "way find use may water long little very after words called just where most know "
         "tokenizer megakernel inference throughput latency quantization transformer attention "
         "Hello World OpenAI HTTP JSON NVIDIA GPU CPU McDonald O'Neil naïve café résumé coöperate "
         "Zürich façade jalapeño déjà vu").split()

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL",
                "'lL", "'D", "'Re", "'ſ", "'K", "\u2019s", "\u2019ll", "'x", "''s", "'", "'sa"]


def rand_word(rng):
    w = rng.choice(WORDS)
    r = rng.random()
    if r < 0.1:
        return w.upper()
    if r < 0.25:
        return w.capitalize()
    return w


def prose(rng):
    sentences = []
    for _ in range(rng.randint(1, 5)):
        words = [rand_word(rng) for _ in range(rng.randint(3, 18))]
        if rng.random() < 0.3:
            i = rng.randrange(len(words))
            words[i] += rng.choice(CONTRACTIONS)
        s = " ".join(words)
        s = s[0].upper() + s[1:]
        sentences.append(s + rng.choice([".", "!", "?", "...", ",", ":", ";", " --", ""]))
    sep = rng.choice([" ", "  ", "\n", "\n\n", " \n"])
    return sep.join(sentences)


def ident(rng):
    parts = [rng.choice(["data", "buf", "x", "idx", "token", "kv", "cache", "self", "ptr", "n",
                         "max_len", "MAX", "theta", "get", "Value"]) for _ in range(rng.randint(1, 3))]
    return rng.choice(["_", ""]).join(parts)


def python_code(rng):
    ind = rng.choice(["    ", "  ", "\t"])
    lines = [f"def {ident(rng)}({ident(rng)}, {ident(rng)}={rng.randint(0, 999)}):"]
    for _ in range(rng.randint(1, 8)):
        depth = rng.randint(1, 3)
        stmt = rng.choice([
            f"{ident(rng)} = {ident(rng)}[{rng.randint(0, 64)}:{rng.randint(-9, 9)}]",
            f"if {ident(rng)} >= {rng.random():.4f} and not {ident(rng)}:",
            f"return {{'{ident(rng)}': {rng.randint(-10**6, 10**6)}, \"k\": None}}",
            f"for i, v in enumerate({ident(rng)}):  # {rand_word(rng)} {rand_word(rng)}",
            f"print(f\"{{{ident(rng)}!r}} -> {{len({ident(rng)})}}\")",
            f"{ident(rng)} += 0x{rng.randint(0, 2**32):08X}",
            "pass", "",
        ])
        lines.append(ind * depth + stmt)
    return "\n".join(lines) + rng.choice(["", "\n", "\n\n"])


def cpp_code(rng):
    lines = ["#include <vector>", "", f"template <typename T> int {ident(rng)}(const T& {ident(rng)}) {{"]
    for _ in range(rng.randint(1, 8)):
        stmt = rng.choice([
            f"std::vector<float> {ident(rng)}({rng.randint(1, 4096)}, {rng.random():.3f}f);",
            f"for (int i = 0; i < {rng.randint(1, 100)}; ++i) {{ {ident(rng)}[i] *= 2; }}",
            f"if ({ident(rng)} != nullptr && {ident(rng)}->size() > {rng.randint(0, 9)}u) return -1;",
            f"// {prose(rng)[:60]}",
            f"auto {ident(rng)} = std::make_unique<{ident(rng)}>();",
        ])
        lines.append("  " * rng.randint(1, 3) + stmt)
    lines.append("}")
    return "\n".join(lines)


def json_code(rng):
    def value(d):
        r = rng.random()
        if d > 2 or r < 0.3:
            return rng.choice([rng.randint(-99999, 99999), rng.random() * 1000, True, None,
                               rand_word(rng), "", "a\\nb"])
        if r < 0.6:
            return [value(d + 1) for _ in range(rng.randint(0, 4))]
        return {ident(rng): value(d + 1) for _ in range(rng.randint(0, 4))}
    return json.dumps(value(0), indent=rng.choice([None, 2, 4, "\t"]), ensure_ascii=rng.random() < 0.3)


def code(rng):
    return rng.choice([python_code, cpp_code, json_code])(rng)


HIRAGANA = [chr(c) for c in range(0x3041, 0x3097)]
KATAKANA = [chr(c) for c in range(0x30A1, 0x30FB)] + ["ー"]
CJK_PUNCT = list("、。「」『』（）！？・〜々〇：；，")


def cjk(rng):
    out = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.35:
            out.append("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(1, 8))))
        elif r < 0.5:
            out.append("".join(rng.choice(HIRAGANA) for _ in range(rng.randint(1, 6))))
        elif r < 0.6:
            out.append("".join(rng.choice(KATAKANA) for _ in range(rng.randint(1, 6))))
        elif r < 0.72:
            out.append("".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(rng.randint(1, 5))))
        elif r < 0.85:
            out.append(rng.choice(CJK_PUNCT))
        elif r < 0.93:
            out.append(rng.choice([" ", "\n", rand_word(rng), str(rng.randint(0, 2025)), "　"]))
        else:
            out.append(chr(rng.randint(0x20000, 0x2A6DF)))  # CJK extension B (plane 2)
    return "".join(out)


SKIN = ["\U0001F3FB", "\U0001F3FC", "\U0001F3FD", "\U0001F3FE", "\U0001F3FF"]
BASE_EMOJI = ["\U0001F44D", "\U0001F44B", "\U0001F9D1", "\U0001F469", "\U0001F468", "\U0001F476",
              "\U0001F600", "\U0001F602", "\U0001F525", "\u2764\ufe0f", "\u2728", "\U0001F680",
              "\U0001F916", "\u263a", "\u2615"]
ZWJ = ["\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466", "\U0001F3F3\ufe0f\u200d\U0001F308",
       "\U0001F469\U0001F3FD\u200d\U0001F4BB", "\U0001F9D1\u200d\U0001F91D\u200d\U0001F9D1",
       "\U0001F441\ufe0f\u200d\U0001F5E8\ufe0f", "\U0001F408\u200d\u2B1B", "\u2764\ufe0f\u200d\U0001F525"]


def flag(rng):
    return "".join(chr(0x1F1E6 + rng.randrange(26)) for _ in range(2))


def emoji(rng):
    out = []
    for _ in range(rng.randint(1, 10)):
        r = rng.random()
        if r < 0.25:
            out.append(rng.choice(BASE_EMOJI))
        elif r < 0.45:
            out.append(rng.choice(BASE_EMOJI[:6]) + rng.choice(SKIN))
        elif r < 0.6:
            out.append(rng.choice(ZWJ))
        elif r < 0.72:
            out.append(flag(rng))
        elif r < 0.78:
            out.append(rng.choice("0123456789#*") + "\ufe0f\u20e3")
        elif r < 0.82:
            out.append("\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F")
        else:
            out.append(rng.choice([" ", rand_word(rng), "!", "\n", " :)"]))
    return "".join(out)


COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u0323", "\u0328", "\u0338", "\u20d7",
                                                      "\u3099", "\u309a", "\u093c", "\u0e48"]
BASES = list("aeiouAEIOUcnsyzgkCNSYZ") + ["\u03b1", "\u03c9", "\u0433", "\u304b", "\u30cf", "\u0915"]


def combining(rng):
    out = []
    for _ in range(rng.randint(1, 10)):
        r = rng.random()
        if r < 0.45:
            out.append(rng.choice(BASES) + "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 3))))
        elif r < 0.6:  # decomposed Hangul jamo L V (T), which NFC composes
            s = chr(0x1100 + rng.randrange(19)) + chr(0x1161 + rng.randrange(21))
            if rng.random() < 0.5:
                s += chr(0x11A8 + rng.randrange(27))
            out.append(s)
        elif r < 0.7:  # already composed text, NFD'd
            w = rng.choice(["café", "naïve", "Ångström", "Tiếng Việt", "über", "São Paulo", "Đà Nẵng"])
            out.append(unicodedata.normalize(rng.choice(["NFD", "NFC"]), w))
        elif r < 0.78:  # singletons and compatibility characters
            out.append(rng.choice(["\u2126", "\u212b", "\u212a", "\ufb01", "\u2460", "\u00bd",
                                   "\u0344", "\u0f73", "\u1e9b\u0323", "\u0958", "\uf900"]))
        elif r < 0.85:
            out.append(rng.choice(COMBINING))  # a mark without a base
        else:
            out.append(rng.choice([" ", rand_word(rng), "-", "\n"]))
    return "".join(out)


WS = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\u000b",
      "\u000c", "\u2003", "\u200b", "\u1680", "\u202f"]


def whitespace(rng):
    out = []
    for _ in range(rng.randint(1, 10)):
        r = rng.random()
        if r < 0.4:
            out.append("".join(rng.choice(WS[:6]) for _ in range(rng.randint(1, 12))))
        elif r < 0.55:
            out.append(rng.choice([" ", "\t", "\n"]) * rng.randint(10, 200))
        elif r < 0.7:
            out.append(rng.choice(WS))
        else:
            out.append(rng.choice([rand_word(rng), "x", "!", "123", "(", "中文"]))
    return "".join(out)


def numbers(rng):
    out = []
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.3:
            out.append(str(rng.randint(0, 10 ** rng.randint(1, 40))))
        elif r < 0.45:
            out.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}")
        elif r < 0.55:
            out.append(f"{rng.random():e}")
        elif r < 0.65:
            out.append(rand_word(rng) + str(rng.randint(0, 999)) + rand_word(rng))
        elif r < 0.8:
            out.append("".join(rng.choice(["٣", "４", "²", "Ⅻ", "½", "१", "๓", "𝟗", "⑤", "〇"])
                               for _ in range(rng.randint(1, 5))))
        else:
            out.append(rng.choice([" ", ", ", "-", ".", "/", ":", "\n", "$", "%", "e+"]))
    return "".join(out)


def contractions(rng):
    out = []
    for _ in range(rng.randint(1, 8)):
        w = rand_word(rng)
        out.append(w + rng.choice(CONTRACTIONS) + rng.choice(["", " ", "  ", ".", "\n", "x"]))
    return rng.choice([" ", ""]).join(out)


def with_specials(rng):
    out = []
    for _ in range(rng.randint(1, 10)):
        r = rng.random()
        if r < 0.4:
            out.append(rng.choice(SPECIALS))
        elif r < 0.5:
            s = rng.choice(SPECIALS)
            out.append(s[: rng.randint(1, len(s) - 1)])  # a prefix that must not match
        elif r < 0.6:
            out.append(rng.choice(["\n", " ", "  ", "\n\n", "<", "|", "<|", "|>", ">"]))
        else:
            out.append(rng.choice([prose, cjk, emoji, contractions])(rng)[:40])
    return "".join(out)


def assigned(cp):
    if 0xD800 <= cp <= 0xDFFF:
        return False
    return unicodedata.category(chr(cp)) != "Cn"


def random_unicode(rng):
    out = []
    planes = [(0x20, 0xFFFF), (0x10000, 0x1FFFF), (0x20000, 0x2FFFF), (0x30000, 0x3134F),
              (0xE0000, 0xE01EF), (0xF0000, 0xF00FF), (0x100000, 0x1000FF), (0x80, 0x7FF)]
    for _ in range(rng.randint(1, 20)):
        lo, hi = rng.choice(planes)
        cp = rng.randint(lo, hi)
        while not assigned(cp):
            cp = rng.randint(lo, hi)
        out.append(chr(cp))
        if rng.random() < 0.15:
            out.append(rng.choice([" ", "a", "\n", "1"]))
    return "".join(out)


def invalid_bytes(rng):
    """Random byte strings that are not valid UTF-8."""
    r = rng.random()
    if r < 0.3:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    else:
        base = bytearray(rng.choice([prose, cjk, emoji, code])(rng)[:80].encode("utf-8"))
        for _ in range(rng.randint(1, 4)):
            bad = rng.choice([b"\x80", b"\xbf", b"\xc0\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80",
                              b"\xf0\x9f", b"\xf0\x9f\x98", b"\xf5\x80\x80\x80", b"\xff", b"\xfe",
                              b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xc2", b"\xe1\x80\xe1\x80"])
            pos = rng.randint(0, len(base))
            base[pos:pos] = bad
        if rng.random() < 0.3:
            base = base[: rng.randint(0, len(base))]  # may cut a character in half
        data = bytes(base)
    try:
        data.decode("utf-8")
        data += b"\xff"
    except UnicodeDecodeError:
        pass
    return data


def long_document(rng):
    parts = [rng.choice([prose, code, cjk, emoji, whitespace, numbers, with_specials])(rng)
             for _ in range(rng.randint(5, 40))]
    return rng.choice(["\n", "\n\n", " ", ""]).join(parts)


CATEGORIES = [
    ("prose", prose, 1500), ("code", code, 1500), ("cjk", cjk, 1000), ("emoji", emoji, 800),
    ("combining", combining, 800), ("whitespace", whitespace, 800), ("numbers", numbers, 600),
    ("contractions", contractions, 600), ("specials", with_specials, 1000),
    ("random_unicode", random_unicode, 1000), ("invalid_utf8", invalid_bytes, 800),
    ("long", long_document, 200),
]


def build_corpus():
    rng = random.Random(SEED)
    corpus = []  # (category, raw bytes)
    fixed = ["", " ", "a", "\n", "  \n ", "Hello world", "<|im_start|>", "<|im_start|>user\nhi<|im_end|>",
             "<think>\n\n</think>\n\n", "x" * 5000, " " * 3000, "1" * 100, "é" * 50,
             "a\u0301" * 30, "\u0e01\u0e34\u0e4a", "\U0001F469\u200d\u2764\ufe0f\u200d\U0001F48b\u200d\U0001F468"]
    corpus += [("fixed", s.encode("utf-8")) for s in fixed]
    corpus += [("bytes", bytes([b])) for b in range(256)]
    for name, make, count in CATEGORIES:
        for _ in range(count):
            value = make(rng)
            corpus.append((name, value if isinstance(value, bytes) else value.encode("utf-8")))
    return corpus


def as_text(raw):
    return raw.decode("utf-8", "replace")


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=True) + "\n")


def hf_encode_rows(tokenizer, corpus):
    texts = [as_text(raw) for _, raw in corpus]
    tokenizer.encode_special_tokens = False
    parsed = tokenizer.encode_batch(texts, add_special_tokens=False)
    tokenizer.encode_special_tokens = True
    plain = tokenizer.encode_batch(texts, add_special_tokens=False)
    tokenizer.encode_special_tokens = False
    return [{"cat": cat, "hex": raw.hex(), "ids": p.ids, "ids_plain": q.ids}
            for (cat, raw), p, q in zip(corpus, parsed, plain)]


def random_id_sequences(rng, corpus_ids, vocab_size, special_ids, count):
    seqs = []
    for i in range(count):
        r = rng.random()
        if r < 0.4:
            seq = [rng.randrange(vocab_size) for _ in range(rng.randint(1, 30))]
        elif r < 0.8:  # a slice of a real encoding, often cutting a character in half
            ids = rng.choice(corpus_ids)
            if not ids:
                continue
            a = rng.randrange(len(ids))
            seq = ids[a: a + rng.randint(1, 40)]
        else:
            seq = [rng.choice(special_ids) if rng.random() < 0.3 else rng.randrange(vocab_size)
                   for _ in range(rng.randint(1, 20))]
        if i % 50 == 0:
            seq = seq + [vocab_size + 5]  # an id without a token: decodes to nothing
        seqs.append(seq)
    return seqs


def qwen_goldens(tokenizer_path, corpus, out_dir):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_path)
    rows = hf_encode_rows(tok, corpus)
    write_jsonl(os.path.join(out_dir, "corpus_encode.jsonl"), rows)

    rng = random.Random(SEED + 1)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    special_ids = [tok.token_to_id(s) for s in SPECIALS]
    seqs = random_id_sequences(rng, [r["ids"] for r in rows], vocab_size, special_ids, 2000)
    decode_rows = [{"ids": s,
                    "text_hex": tok.decode(s, skip_special_tokens=False).encode("utf-8").hex(),
                    "skip_hex": tok.decode(s, skip_special_tokens=True).encode("utf-8").hex()}
                   for s in seqs]
    write_jsonl(os.path.join(out_dir, "corpus_decode.jsonl"), decode_rows)
    return rows


def variant_goldens(tokenizer_path, corpus, out_dir):
    """Other tokenizer.json settings over the same vocabulary, checked on a corpus subset."""
    from tokenizers import Tokenizer
    with open(tokenizer_path, encoding="utf-8") as f:
        base = json.load(f)
    subset = corpus[::5]

    # Shallow copies: the large "model" section is shared unless a variant changes it.
    gpt2 = dict(base)
    gpt2["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": True}
    gpt2["normalizer"] = None

    prefix = dict(base)
    prefix["pre_tokenizer"] = copy.deepcopy(base["pre_tokenizer"])
    prefix["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = True
    prefix["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}

    gpt2_prefix = dict(gpt2)
    gpt2_prefix["pre_tokenizer"] = dict(gpt2["pre_tokenizer"], add_prefix_space=True)

    flags = dict(base)
    flags["model"] = dict(base["model"])
    flags["model"]["merges"] = [" ".join(m) for m in base["model"]["merges"]]  # "a b" form
    flags["added_tokens"] = copy.deepcopy(base["added_tokens"])
    next_id = max(t["id"] for t in flags["added_tokens"]) + 1
    for t in flags["added_tokens"]:
        if t["content"] == "<|im_end|>":
            t["rstrip"] = True
        if t["content"] == "<|im_start|>":
            t["lstrip"] = True
        if t["content"] == "<think>":
            t["lstrip"] = t["rstrip"] = True
    extra = [("im_start", False, False), ("caf\u00e9", False, True), ("e\u0301t\u00e9", False, True),
             ("<|end|>", True, False)]
    for content, special, normalized in extra:
        flags["added_tokens"].append({"id": next_id, "content": content, "single_word": False,
                                      "lstrip": False, "rstrip": False, "normalized": normalized,
                                      "special": special})
        next_id += 1

    variants = {"gpt2": gpt2, "prefix_space": prefix, "gpt2_prefix_space": gpt2_prefix,
                "added_flags": flags}
    for name, doc in variants.items():
        vdir = os.path.join(out_dir, f"variant_{name}")
        os.makedirs(vdir, exist_ok=True)
        path = os.path.join(vdir, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, ensure_ascii=False))  # dumps uses the C encoder, dump does not
        extra_texts = [(f"flags", s.encode()) for s in
                       ["a <|im_start|>  b", "x\n\t<|im_start|>y", "<|im_end|>   \n z", " <think>  q ",
                        "<|im_start|>", "café cafe\u0301 été e\u0301te\u0301", "<|end|><|end|x",
                        "im_start <|im_start|> im_startx", "  <think>\n\n</think>  "]]
        tok = Tokenizer.from_file(path)
        write_jsonl(os.path.join(vdir, "encode.jsonl"), hf_encode_rows(tok, subset + extra_texts))


def tiktoken_goldens(tokenizer_path, corpus, out_dir):
    """A Kimi-shaped tiktoken model: ranks = Qwen3 byte tokens, specials after them."""
    import tiktoken
    with open(tokenizer_path, encoding="utf-8") as f:
        vocab = json.load(f)["model"]["vocab"]
    decoder = {c: b for b, c in bytes_to_unicode().items()}
    ranks = {bytes(decoder[c] for c in piece): rank for piece, rank in vocab.items()}
    n_base = len(ranks)
    assert sorted(ranks.values()) == list(range(n_base))

    tdir = os.path.join(out_dir, "tiktoken")
    os.makedirs(tdir, exist_ok=True)
    with open(os.path.join(tdir, "tiktoken.model"), "w", encoding="ascii") as f:
        for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(token).decode()} {rank}\n")
    named = {n_base + i: s for i, s in enumerate(SPECIALS)}
    config = {"added_tokens_decoder": {str(i): {"content": s, "lstrip": False, "normalized": False,
                                                "rstrip": False, "single_word": False, "special": True}
                                       for i, s in named.items()}}
    with open(os.path.join(tdir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    specials = {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(n_base, n_base + 256)}
    enc = tiktoken.Encoding(name="kimi-shaped-test", pat_str=KIMI_PAT_STR, mergeable_ranks=ranks,
                            special_tokens=specials)
    rows = []
    for cat, raw in corpus:
        text = as_text(raw)
        rows.append({"cat": cat, "hex": raw.hex(),
                     "ids": enc.encode(text, allowed_special="all"),
                     "ids_plain": enc.encode(text, allowed_special=set(), disallowed_special=())})
    write_jsonl(os.path.join(tdir, "encode.jsonl"), rows)

    rng = random.Random(SEED + 2)
    seqs = random_id_sequences(rng, [r["ids"] for r in rows[:2000]], n_base + 256,
                               list(range(n_base, n_base + 256)), 500)
    seqs = [[i for i in s if i < n_base + 256] for s in seqs]
    write_jsonl(os.path.join(tdir, "decode.jsonl"),
                [{"ids": s, "text_hex": enc.decode(s).encode("utf-8").hex()} for s in seqs if s])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer-dir", required=True, help="the Qwen3 tokenizer directory (tests/data/qwen3-tokenizer)")
    parser.add_argument("--out", required=True, help="directory for the goldens")
    args = parser.parse_args()

    tokenizer_path = os.path.join(args.tokenizer_dir, "tokenizer.json")
    if not os.path.isfile(tokenizer_path):
        sys.exit(f"gen_tokenizer_goldens: {tokenizer_path} not found")
    out_dir = os.path.join(args.out, "tokenizer")
    os.makedirs(out_dir, exist_ok=True)

    corpus = build_corpus()
    qwen_goldens(tokenizer_path, corpus, out_dir)
    variant_goldens(tokenizer_path, corpus, out_dir)
    tiktoken_goldens(tokenizer_path, corpus, out_dir)
    print(f"gen_tokenizer_goldens: {len(corpus)} strings -> {out_dir}")


if __name__ == "__main__":
    main()
