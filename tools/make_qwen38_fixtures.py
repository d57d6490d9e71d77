#!/usr/bin/env python3
"""Scaled-down Qwen3.8 (`qwen3_5`) model directories for megadecode's tests.

Writes one complete Hugging Face-style model folder per fixture under --out:
  config.json, generation_config.json, safetensors weights (single file or 2 shards + index),
  tokenizer.json, tokenizer_config.json (with the Qwen3.8-style chat template).

Fixtures (spec docs: qwen38-dflash2.md section 14):
  tiny-qwen38        nested qwen3_5 config, exactly the spec's "Target tiny-qwen3_5", spec weight init
  tiny-qwen38-hd256  nested, head_dim 256 / rotary 64 / GDN heads 128x128 like the real model,
                     12 layers, larger weight scales (spread logits), 2 shards + index
  tiny-qwen38-text   bare qwen3_5_text config (flat `model.*` names), full_attention_interval
                     instead of layer_types, partial_rotary_factor at the config top level
  tiny-qwen35-tied   the Qwen3.5-0.8B layout scaled down: tied embeddings (no lm_head.weight),
                     as many GDN value heads as key heads, GQA group 4
  tiny-qwen35-interval  bare config, full_attention_interval 2 (LFLFLF), conv kernel 3, rotary
                     half of head_dim, GQA group 3, key head dim 48
  tiny-qwen35-layers nested, explicit irregular layer_types (FLFFLLF: attention first, two
                     attention layers in a row), conv kernel 2, no GQA (heads 3/3)
  tiny-qwen35-moe    the Qwen3.5-35B-A3B layout scaled down (`qwen3_5_moe`): every layer's MLP a
                     sparse MoE block, 16 routed experts top-4 stored as the released checkpoint
                     stores them (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj
                     [E, H, I]), the router mlp.gate, a shared expert with its sigmoid gate
  tiny-qwen35-gelu-bias  hidden_act gelu_pytorch_tanh (the MLP's and the GDN conv's activation)
                     and attention_bias (biases on q_proj, k_proj, v_proj and o_proj)

Numpy only, deterministic (fixed seeds), well under a second. Every weight is exactly
bf16-representable (float32 rounded to bf16 with round-to-nearest-even), including the F32 ones.
The tokenizer is a 512-entry byte-level BPE whose merges this script learns itself from the
small corpus below. Usage:
  make_qwen38_fixtures.py --out DIR [--only NAME]
"""

import argparse
import json
import re
import struct
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from byte_level import bytes_to_unicode  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "tests" / "data" / "templates" / "qwen38_style.jinja"

VOCAB = 512
MERGED_VOCAB = 500  # ids [256, 500) are learned merges
ENDOFTEXT, IM_END = 510, 511
# (id, content, special); ids 500..511. `special: false` for the think/tool tags, as in Qwen.
ADDED_TOKENS = [
    (500, "<|mask|>", True),
    (501, "<|im_start|>", True),
    (502, "<think>", False),
    (503, "</think>", False),
    (504, "<tool_call>", False),
    (505, "</tool_call>", False),
    (506, "<tool_response>", False),
    (507, "</tool_response>", False),
    (508, "<|vision_start|>", True),
    (509, "<|vision_end|>", True),
    (ENDOFTEXT, "<|endoftext|>", True),
    (IM_END, "<|im_end|>", True),
]

# The Qwen2/3 pre-tokenizer regex (the one in the real tokenizer.json).
SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# The same regex for Python's `re`, used only to cut the training corpus into words
# (\p{L} -> [^\W\d_], \p{N} -> \d; exact for the ASCII corpus).
_L, _NOT_LN = r"[^\W\d_]", r"(?:_|[^\w])"
TRAIN_SPLIT = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?:_|[^\r\n\w])?" + _L + r"+|\d| ?(?:_|[^\s\w])+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = r'''
The quick brown fox jumps over the lazy dog. A language model reads a prompt, one token at a
time, and predicts the next token. The model has layers of attention and linear attention; each
layer keeps a state for the sequence. When the prompt is long, the prefill runs in chunks of
sixty-four tokens, and the decode step then continues from the state that the prefill left.
Hello, world! Hello there. How are you today? I am fine, thank you. What is the weather like?
It is sunny and warm in the morning, and the evening will be cool with a little rain.
The engine loads the weights from safetensors files, checks the config, and builds the tokenizer.
Speculative decoding drafts a block of tokens with a small model and verifies them with the
target model in one pass; the accepted tokens are committed and the rest are rolled back.
In the beginning the state is zero. The recurrent state decays, then it is updated with the new
key and value, and the output reads the updated state. Tests compare the result with a reference.
She said that the results were good, but they wanted to run the tests again on the new machine.
We think the answer is correct, and we will check it once more before we write the report.

def greedy(logits):
    best = 0
    for i in range(len(logits)):
        if logits[i] > logits[best]:
            best = i
    return best

def softmax(x):
    m = max(x)
    e = [math.exp(v - m) for v in x]
    s = sum(e)
    return [v / s for v in e]

class Tokenizer:
    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.merges = merges

    def encode(self, text):
        return [self.vocab[t] for t in self.split(text)]

for (int i = 0; i < n; ++i) {
    float x = input[i];
    output[i] = x / (1.0f + std::exp(-x));
}

int main(int argc, char** argv) {
    std::vector<int> tokens = tokenize(argv[1]);
    std::printf("%d tokens\n", static_cast<int>(tokens.size()));
    return 0;
}

{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help you?"}
<|im_start|>user
What is the capital of France?<|im_end|>
<|im_start|>assistant
<think>
The user asks for the capital of France. The answer is Paris.
</think>

The capital of France is Paris.<|im_end|>
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 512 1024 2048 4096 3.14159 2.71828 1e-6 0.25
'''

FIXTURES = {
    "tiny-qwen38": dict(
        nested=True, seed=20260301, hidden=128, intermediate=320, layers=8, heads=4, kv_heads=2,
        head_dim=64, partial=0.25, theta=1e7, lin_k_heads=2, lin_v_heads=6, lin_k_dim=32,
        lin_v_dim=16, a_log_dtype="F32", dt_bias_dtype="BF16", shards=1, init="spec"),
    "tiny-qwen38-hd256": dict(
        nested=True, seed=20260302, hidden=128, intermediate=256, layers=12, heads=6, kv_heads=2,
        head_dim=256, partial=0.25, theta=1e4, lin_k_heads=2, lin_v_heads=6, lin_k_dim=128,
        lin_v_dim=128, a_log_dtype="BF16", dt_bias_dtype="F32", shards=2, init="wide"),
    "tiny-qwen38-text": dict(
        nested=False, seed=20260303, hidden=64, intermediate=192, layers=8, heads=2, kv_heads=1,
        head_dim=256, partial=0.25, theta=1e4, lin_k_heads=2, lin_v_heads=4, lin_k_dim=64,
        lin_v_dim=32, a_log_dtype="F32", dt_bias_dtype="BF16", shards=1, init="wide"),
    # Issue 18: the dense configs transformers' qwen3_5 accepts beyond the 27B's.
    "tiny-qwen35-tied": dict(
        nested=True, seed=20260304, hidden=96, intermediate=256, layers=8, heads=4, kv_heads=1,
        head_dim=64, partial=0.25, theta=1e7, lin_k_heads=4, lin_v_heads=4, lin_k_dim=32,
        lin_v_dim=32, a_log_dtype="F32", dt_bias_dtype="BF16", shards=1, init="wide", tied=True),
    "tiny-qwen35-interval": dict(
        nested=False, seed=20260305, hidden=80, intermediate=160, layers=6, heads=6, kv_heads=2,
        head_dim=128, partial=0.5, theta=1e4, lin_k_heads=2, lin_v_heads=4, lin_k_dim=48,
        lin_v_dim=24, a_log_dtype="F32", dt_bias_dtype="F32", shards=1, init="wide", interval=2,
        conv_kernel=3),
    "tiny-qwen35-layers": dict(
        nested=True, seed=20260306, hidden=48, intermediate=128, layers=7, heads=3, kv_heads=3,
        head_dim=32, partial=0.25, theta=1e4, lin_k_heads=1, lin_v_heads=3, lin_k_dim=16,
        lin_v_dim=16, a_log_dtype="BF16", dt_bias_dtype="BF16", shards=1, init="wide",
        pattern="FLFFLLF", conv_kernel=2),
    # Issue 18 item 2: Qwen3.5-MoE. Router rows are wide (std 8/sqrt(H)) so that no row's k-th
    # and (k+1)-th router logits are close enough for float rounding to swap experts: over every
    # golden forward the smallest gap is 8.9e-4 (router_min_topk_logit_gap in the golden's json;
    # float32 differences between implementations are ~1e-5 here).
    "tiny-qwen35-moe": dict(
        nested=True, seed=20260307, hidden=64, intermediate=0, layers=4, heads=4, kv_heads=2,
        head_dim=32, partial=0.25, theta=1e7, lin_k_heads=2, lin_v_heads=4, lin_k_dim=16,
        lin_v_dim=16, a_log_dtype="F32", dt_bias_dtype="F32", shards=1, init="wide",
        moe=dict(experts=16, top_k=4, intermediate=32, shared_intermediate=48)),
    # A hidden_act other than silu (transformers applies it in the MLP and after the GDN conv) and
    # attention_bias (q/k/v/o projections with biases): accepted by transformers, in no release.
    "tiny-qwen35-gelu-bias": dict(
        nested=True, seed=20260308, hidden=64, intermediate=160, layers=4, heads=4, kv_heads=2,
        head_dim=32, partial=0.25, theta=1e7, lin_k_heads=2, lin_v_heads=2, lin_k_dim=16,
        lin_v_dim=32, a_log_dtype="F32", dt_bias_dtype="F32", shards=1, init="wide",
        act="gelu_pytorch_tanh", bias=True),
}


# --- bf16 and safetensors ------------------------------------------------------------------------


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round-to-nearest-even (inputs are finite)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16 value, kept as float32."""
    return (bf16_bits(x).astype(np.uint32) << 16).view(np.float32)


def tensor_bytes(value: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return bf16_bits(value).astype("<u2").tobytes()
    if dtype == "F32":
        return bf16_round(value).astype("<f4").tobytes()
    raise ValueError(dtype)


def write_safetensors(path: Path, tensors: dict, encode=None) -> int:
    """tensors: name -> (dtype, ndarray). Names sorted, data packed in that order, header padded
    with spaces to a multiple of 8 like the reference library. `encode(value, dtype)` gives a
    tensor's bytes (tensor_bytes by default). Returns the data size."""
    encode = encode or tensor_bytes
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, value = tensors[name]
        blob = encode(value, dtype)
        header[name] = {"dtype": dtype, "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header = {"__metadata__": {"format": "pt"}, **header}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)
    return offset


# --- tokenizer ------------------------------------------------------------------------------------


def learn_bpe(text: str, count: int) -> list:
    """Plain BPE over the byte-level words of `text`: repeatedly merge the most frequent adjacent
    pair (ties: lexicographically smallest pair), skipping pairs whose result already exists."""
    table = bytes_to_unicode()
    words = Counter(tuple(table[b] for b in w.encode()) for w in TRAIN_SPLIT.findall(text))
    known = set(table.values())
    merges = []
    while len(merges) < count:
        pairs = Counter()
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                if a + b not in known:
                    pairs[(a, b)] += n
        if not pairs:
            raise RuntimeError("corpus too small for %d merges" % count)
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merged = best[0] + best[1]
        merges.append(best)
        known.add(merged)
        new_words = Counter()
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] += n
        words = new_words
    return merges


def added_token_entries(tokens) -> list:
    """tokenizer.json `added_tokens` entries from (id, content, special) triples."""
    return [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": s} for i, c, s in tokens]


def byte_level_bpe(vocab: dict, merges: list, added: list, normalizer) -> dict:
    """A tokenizer.json of a byte-level BPE split by the Qwen pre-tokenizer regex."""
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT_REGEX}, "behavior": "Isolated",
             "invert": False},
            byte_level]},
        "post_processor": dict(byte_level),
        "decoder": dict(byte_level),
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": [[a, b] for a, b in merges]},
    }


def make_tokenizer() -> tuple:
    table = bytes_to_unicode()
    vocab = {ch: i for i, ch in enumerate(table.values())}
    merges = learn_bpe(CORPUS, MERGED_VOCAB - 256)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    assert len(vocab) == MERGED_VOCAB
    added = added_token_entries(ADDED_TOKENS)
    tokenizer = byte_level_bpe(vocab, merges, added, normalizer={"type": "NFC"})
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                 for t in added},
        "additional_special_tokens": [c for _, c, s in ADDED_TOKENS
                                      if s and c not in ("<|endoftext|>",)],
        "bos_token": None,
        "chat_template": TEMPLATE.read_text(),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    return tokenizer, config


# --- weights and configs --------------------------------------------------------------------------


def layer_types(f: dict) -> list:
    """An explicit pattern ('F' full attention, 'L' Gated DeltaNet), else every `interval`-th
    layer full attention (transformers' rule; default 4)."""
    if "pattern" in f:
        assert len(f["pattern"]) == f["layers"]
        return ["full_attention" if c == "F" else "linear_attention" for c in f["pattern"]]
    interval = f.get("interval", 4)
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
            for i in range(f["layers"])]


def mrope_section(rotary_dim: int) -> list:
    half = rotary_dim // 2
    a = (half + 2) // 3
    return [a, a, half - 2 * a]


def text_config(f: dict) -> dict:
    rotary = int(f["head_dim"] * f["partial"])
    rope = {"rope_type": "default", "rope_theta": f["theta"], "mrope_interleaved": True,
            "mrope_section": mrope_section(rotary)}
    cfg = {
        "model_type": "qwen3_5_text",
        "dtype": "bfloat16",
        "vocab_size": VOCAB,
        "hidden_size": f["hidden"],
        "intermediate_size": f["intermediate"],
        "num_hidden_layers": f["layers"],
        "num_attention_heads": f["heads"],
        "num_key_value_heads": f["kv_heads"],
        "head_dim": f["head_dim"],
        "linear_num_key_heads": f["lin_k_heads"],
        "linear_num_value_heads": f["lin_v_heads"],
        "linear_key_head_dim": f["lin_k_dim"],
        "linear_value_head_dim": f["lin_v_dim"],
        "linear_conv_kernel_dim": f.get("conv_kernel", 4),
        "hidden_act": f.get("act", "silu"),
        "rms_norm_eps": 1e-6,
        "attention_bias": f.get("bias", False),
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "output_gate_type": "swish",
        "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 4096,
        "initializer_range": 0.02,
        "tie_word_embeddings": f.get("tied", False),
        "use_cache": True,
        "bos_token_id": None,
        "eos_token_id": ENDOFTEXT,
        "pad_token_id": None,
        "full_attention_interval": f.get("interval", 4),
    }
    if "moe" in f:
        m = f["moe"]
        cfg["model_type"] = "qwen3_5_moe_text"
        del cfg["intermediate_size"]
        cfg.update({"num_experts": m["experts"], "num_experts_per_tok": m["top_k"],
                    "moe_intermediate_size": m["intermediate"],
                    "shared_expert_intermediate_size": m["shared_intermediate"],
                    "router_aux_loss_coef": 0.001, "output_router_logits": False})
    if f["nested"]:
        rope["partial_rotary_factor"] = f["partial"]
        cfg["layer_types"] = layer_types(f)
    else:
        # The bare text config: no layer_types (derived from full_attention_interval) and the
        # partial rotary factor at the top level instead of inside rope_parameters.
        cfg["partial_rotary_factor"] = f["partial"]
    cfg["rope_parameters"] = rope
    return cfg


def model_config(f: dict) -> dict:
    tc = text_config(f)
    if not f["nested"]:
        return {"architectures": ["Qwen3_5ForCausalLM"], **tc}
    if "moe" in f:
        return {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
                "model_type": "qwen3_5_moe", "tie_word_embeddings": f.get("tied", False),
                "text_config": tc}
    return {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
            "tie_word_embeddings": f.get("tied", False), "text_config": tc}


def make_weights(f: dict) -> dict:
    """name -> (dtype, float32 ndarray); names as in the real checkpoint (spec section 2)."""
    rng = np.random.default_rng(f["seed"])
    H, I, hd = f["hidden"], f["intermediate"], f["head_dim"]
    nq, nkv = f["heads"], f["kv_heads"]
    kh, vh, kd, vd = f["lin_k_heads"], f["lin_v_heads"], f["lin_k_dim"], f["lin_v_dim"]
    key_dim, value_dim = kh * kd, vh * vd
    conv_dim = 2 * key_dim + value_dim
    spec = f["init"] == "spec"

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def matrix(out, inp):
        return normal((out, inp), 0.02 if spec else inp ** -0.5)

    def zc_norm(n):  # zero-centred norm, used as (1 + w)
        return normal((n,), 0.1)

    def plain_norm(n):
        return (1.0 + normal((n,), 0.1)).astype(np.float32)

    prefix = "model.language_model." if f["nested"] else "model."
    out = {}

    def put(name, value, dtype="BF16"):
        out[prefix + name] = (dtype, value)

    put("embed_tokens.weight", normal((VOCAB, H), 0.02 if spec else 1.0))
    kernel = f.get("conv_kernel", 4)
    for i, kind in enumerate(layer_types(f)):
        p = "layers.%d." % i
        put(p + "input_layernorm.weight", zc_norm(H))
        if kind == "linear_attention":
            put(p + "linear_attn.in_proj_qkv.weight", matrix(conv_dim, H))
            put(p + "linear_attn.in_proj_z.weight", matrix(value_dim, H))
            put(p + "linear_attn.in_proj_b.weight", matrix(vh, H))
            put(p + "linear_attn.in_proj_a.weight", matrix(vh, H))
            put(p + "linear_attn.conv1d.weight", normal((conv_dim, 1, kernel), 0.3 if spec else 0.5))
            if spec:
                a = rng.uniform(0.01, 16.0, vh)
                dt_bias = np.ones(vh, dtype=np.float32)
            else:  # spread decay rates, many slow heads, so the state carries over chunks
                a = np.exp(rng.uniform(np.log(0.005), np.log(2.0), vh))
                dt_bias = (1.0 + rng.standard_normal(vh) * 0.3).astype(np.float32)
            put(p + "linear_attn.A_log", np.log(a).astype(np.float32), f["a_log_dtype"])
            put(p + "linear_attn.dt_bias", dt_bias, f["dt_bias_dtype"])
            put(p + "linear_attn.norm.weight", plain_norm(vd))
            put(p + "linear_attn.out_proj.weight", matrix(H, value_dim))
        else:
            put(p + "self_attn.q_proj.weight", matrix(nq * hd * 2, H))
            put(p + "self_attn.k_proj.weight", matrix(nkv * hd, H))
            put(p + "self_attn.v_proj.weight", matrix(nkv * hd, H))
            put(p + "self_attn.o_proj.weight", matrix(H, nq * hd))
            put(p + "self_attn.q_norm.weight", zc_norm(hd))
            put(p + "self_attn.k_norm.weight", zc_norm(hd))
            if f.get("bias", False):
                put(p + "self_attn.q_proj.bias", normal((nq * hd * 2,), 0.5))
                put(p + "self_attn.k_proj.bias", normal((nkv * hd,), 0.5))
                put(p + "self_attn.v_proj.bias", normal((nkv * hd,), 0.5))
                put(p + "self_attn.o_proj.bias", normal((H,), 0.5))
        put(p + "post_attention_layernorm.weight", zc_norm(H))
        if "moe" in f:
            m = f["moe"]
            E, mi, si = m["experts"], m["intermediate"], m["shared_intermediate"]
            put(p + "mlp.gate.weight", normal((E, H), 8.0 * H ** -0.5))
            put(p + "mlp.experts.gate_up_proj", normal((E, 2 * mi, H), H ** -0.5))
            put(p + "mlp.experts.down_proj", normal((E, H, mi), mi ** -0.5))
            put(p + "mlp.shared_expert.gate_proj.weight", matrix(si, H))
            put(p + "mlp.shared_expert.up_proj.weight", matrix(si, H))
            put(p + "mlp.shared_expert.down_proj.weight", matrix(H, si))
            put(p + "mlp.shared_expert_gate.weight", matrix(1, H))
            continue
        put(p + "mlp.gate_proj.weight", matrix(I, H))
        put(p + "mlp.up_proj.weight", matrix(I, H))
        put(p + "mlp.down_proj.weight", matrix(H, I))
    put("norm.weight", zc_norm(H))
    if not f.get("tied", False):  # tied: lm_head is embed_tokens, and the file has no copy
        out["lm_head.weight"] = ("BF16", normal((VOCAB, H), 0.02 if spec else 1.0))
    return out


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def write_fixture(root: Path, name: str, tokenizer: dict, tok_config: dict) -> None:
    f = FIXTURES[name]
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.safetensors*"):
        old.unlink()
    write_json(d / "config.json", model_config(f))
    write_json(d / "generation_config.json",
               {"bos_token_id": None, "eos_token_id": [ENDOFTEXT, IM_END],
                "pad_token_id": ENDOFTEXT, "do_sample": False})
    write_json(d / "tokenizer.json", tokenizer)
    write_json(d / "tokenizer_config.json", tok_config)
    weights = make_weights(f)
    if f["shards"] == 1:
        write_safetensors(d / "model.safetensors", weights)
        return
    # Shard by layer halves: globals and the first half of the layers, then the rest.
    names = sorted(weights)
    half = f["layers"] // 2

    def shard_of(n):
        m = re.search(r"\.layers\.(\d+)\.", n)
        if m:
            return 0 if int(m.group(1)) < half else 1
        return 1 if n == "lm_head.weight" else 0

    count = f["shards"]
    total, weight_map = 0, {}
    for s in range(count):
        file = "model-%05d-of-%05d.safetensors" % (s + 1, count)
        part = {n: weights[n] for n in names if shard_of(n) == s}
        total += write_safetensors(d / file, part)
        weight_map.update({n: file for n in part})
    write_json(d / "model.safetensors.index.json",
               {"metadata": {"total_size": total},
                "weight_map": dict(sorted(weight_map.items()))})


def check_tokenizer(tokenizer_path: Path) -> None:
    """Round trip through the `tokenizers` package when it is installed (it is in .venv)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return
    tok = Tokenizer.from_file(str(tokenizer_path))
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB
    samples = [CORPUS, "Hello", "naïve café — 日本語 🙂\r\n\t x", "<|im_start|>user\nHi<|im_end|>\n",
               "<think>\nok\n</think>\n\n<tool_call>{}</tool_call><|endoftext|>"]
    for s in samples:
        ids = tok.encode(s).ids
        assert all(0 <= i < VOCAB for i in ids)
        back = tok.decode(ids, skip_special_tokens=False)
        assert back == s, (s, back)
    assert tok.encode("<|im_end|><|endoftext|><|mask|>").ids == [IM_END, ENDOFTEXT, 500]


def fixture_arguments(description: str, names) -> argparse.Namespace:
    """The fixture scripts' options: --out DIR, --only NAME (one of `names`), --verify GOLDEN_DIR."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only", choices=sorted(names))
    ap.add_argument("--verify", type=Path, metavar="GOLDEN_DIR",
                    help="fail unless every written file has the sha256 recorded in "
                         "GOLDEN_DIR/<fixture>.json (the files the goldens were computed from)")
    return ap.parse_args()


def main() -> int:
    args = fixture_arguments(__doc__.split("\n")[0], FIXTURES)
    tokenizer, tok_config = make_tokenizer()
    for name in FIXTURES:
        if args.only and name != args.only:
            continue
        write_fixture(args.out, name, tokenizer, tok_config)
        check_tokenizer(args.out / name / "tokenizer.json")
        if args.verify and not verify_fixture(args.out / name, args.verify / f"{name}.json"):
            return 1
    return 0


def verify_fixture(folder: Path, golden_json: Path,
                   readme: str = "tests/goldens/qwen38/README.md") -> bool:
    """The goldens are only meaningful for byte-identical checkpoints: a numpy release that
    changed its random streams, or an edit to this script, must fail loudly here."""
    import hashlib
    recorded = json.loads(golden_json.read_text())["fixture_sha256"]
    written = sorted(p.name for p in folder.iterdir())
    if written != sorted(recorded):
        print(f"{folder}: files {written} differ from those in {golden_json}: {sorted(recorded)}",
              file=sys.stderr)
        return False
    ok = True
    for name, digest in recorded.items():
        actual = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        if actual != digest:
            print(f"{folder / name}: sha256 {actual} but the goldens were computed from {digest}; "
                  f"regenerate the goldens ({readme})", file=sys.stderr)
            ok = False
    return ok


if __name__ == "__main__":
    sys.exit(main())
