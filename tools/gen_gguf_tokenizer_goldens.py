#!/usr/bin/env python3
"""Reference token ids for megadecode's GGUF tokenizer test (SmolLM2-135M-Instruct GGUF), computed
by Hugging Face transformers' own GGUF tokenizer conversion (`AutoTokenizer.from_pretrained(...,
gguf_file=...)`), so the C++ code is compared against an implementation no one here wrote.

transformers needs torch, which never enters CI, so the output is committed:
  tests/goldens/smollm2/gguf_encode.jsonl
one line per string of tools/gen_tokenizer_goldens.py's corpus, the whole corpus, in corpus order.
Most lines carry the ids themselves:
  {"i": corpus index, "len": byte length, "sha": first 16 hex digits of sha1(raw bytes), "ids": [...],
   "ids_plain": [...] (only where it differs from "ids")}
"ids" parses special tokens, "ids_plain" does not (HF encode_special_tokens=True).
The 200 "long" documents (up to 40 kB each) would push the file past 3 MB with their ids written
out, so their lines carry a count and a hash of the ids instead; a mismatch is still caught, it
just cannot be located from the golden alone (the C++ test prints megadecode's first ids):
  {"i": ..., "len": ..., "sha": ..., "count": number of ids, "fnv1a": hash of the ids,
   "count_plain": ..., "fnv1a_plain": ... (the pair only where it differs from "count"/"fnv1a")}
The hash is 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over the ids
as consecutive little-endian 4-byte unsigned integers, written as 16 lowercase hex digits (a
JSON number would not survive readers that parse numbers as doubles);
tests/models/gguf_tokenizer_test.cpp computes the same hash.

The test reads the corpus strings from the ctest fixture's corpus_encode.jsonl and checks "len"
(C++) and "sha" (this script, when rerun) to catch a corpus that changed since this file was made.

Pre-tokenizer: transformers builds a gpt2-model GGUF as GPT2Tokenizer, i.e. ByteLevel with GPT-2's
regex, and only replaces that for the `tokenizer.ggml.pre` values it lists -- "smollm" is not one of
them. SmolLM2's published tokenizer.json (and llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM: "\\p{N}" then
GPT-2's regex) splits every digit first: Sequence[Digits(individual_digits=True),
ByteLevel(add_prefix_space=False, use_regex=True)]. The goldens use the model's semantics, so this
script installs that pre-tokenizer on transformers' tokenizer and prints how many corpus strings
transformers' unmodified conversion would tokenize differently.

Usage (in the golden venv, which has transformers):
  .venv-golden/bin/python tools/gen_gguf_tokenizer_goldens.py \
      --gguf .models/SmolLM2-135M-Instruct.Q4_1.gguf --out tests/goldens/smollm2
"""

import argparse
import hashlib
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_tokenizer_goldens import as_text, build_corpus  # noqa: E402


# Corpus categories whose lines carry a count and hash of the ids instead of the ids (see above).
HASHED_CATEGORIES = {"long"}

FNV64_OFFSET = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3


def fnv1a64(data):
    h = FNV64_OFFSET
    for b in data:
        h = ((h ^ b) * FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


# Published FNV-1a test vectors, so a slip here cannot silently agree with the same slip in C++.
assert fnv1a64(b"") == 0xCBF29CE484222325
assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
assert fnv1a64(b"foobar") == 0x85944171F73967E8


def ids_hash(ids):
    return f"{fnv1a64(struct.pack(f'<{len(ids)}I', *ids)):016x}"


def encode_all(tok, texts):
    tok.encode_special_tokens = False
    parsed = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    tok.encode_special_tokens = True
    plain = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    tok.encode_special_tokens = False
    return parsed, plain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from tokenizers import pre_tokenizers
    from transformers import AutoTokenizer

    gguf = os.path.abspath(args.gguf)
    hf = AutoTokenizer.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf))
    tok = hf.backend_tokenizer
    corpus = build_corpus()
    texts = [as_text(raw) for _, raw in corpus]

    as_converted = encode_all(tok, texts)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    parsed, plain = encode_all(tok, texts)
    differ = sum(1 for a, b in zip(as_converted[0], parsed) if a != b)
    print(f"transformers' GGUF conversion (GPT-2 regex, no digit split) differs from the "
          f"smollm pre-tokenizer on {differ} of {len(texts)} strings")

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "gguf_encode.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, ((cat, raw), p, q) in enumerate(zip(corpus, parsed, plain)):
            row = {"i": i, "len": len(raw), "sha": hashlib.sha1(raw).hexdigest()[:16]}
            if cat in HASHED_CATEGORIES:
                row["count"] = len(p)
                row["fnv1a"] = ids_hash(p)
                if q != p:
                    row["count_plain"] = len(q)
                    row["fnv1a_plain"] = ids_hash(q)
            else:
                row["ids"] = p
                if q != p:
                    row["ids_plain"] = q  # only where it differs, to keep the file small
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
    hashed = sum(1 for c, _ in corpus if c in HASHED_CATEGORIES)
    print(f"gen_gguf_tokenizer_goldens: {len(corpus)} strings ({len(corpus) - hashed} with ids, "
          f"{hashed} as count + FNV-1a) -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
