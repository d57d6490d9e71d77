#!/usr/bin/env python3
"""Scaled-down Kimi K3 checkpoints for megadecode's tests (docs/models/kimi-k3-dspark.md §15).

Writes one folder per fixture under --out: config.json in the real nested layout (top level
KimiK3ForConditionalGeneration with `text_config` and its `linear_attn_config`, compressed-tensors
MXFP4 `quantization_config`), generation_config.json, a tiktoken tokenizer (tiktoken.model with merges learned from a small
corpus, tokenizer_config.json naming Kimi's special tokens), and safetensors weights with the published
checkpoint's tensor names, dtypes and layouts (§3: the `language_model.` prefix, f32 A_log,
dt_bias, convs, o_norm and router bias, bf16 everywhere else, MXFP4 routed experts as u8
`weight_packed` / `weight_scale`), split over two shards with a `model.safetensors.index.json`.

Fixtures:
  kimi-k3-tiny   §15 exactly (tests/data/configs/kimi-k3-tiny/config.json): 10 layers, block 4,
                 MLA at 0-based {3, 7, 9}, H 256, KDA 4 × 32, MLA 4 heads (q_lora 64, kv_lora 32,
                 nope 32, shared 16, v 32), dense layer 0 of 512, 16 experts top-4 of width 64
                 over a latent of 128, 2 shared experts, A_log stored with 8 entries (4 used),
                 a nonzero e_score_correction_bias, MXFP4 scales in 120…130
  kimi-k3-small  other widths and head counts, so that nothing is tuned to one shape: 6 layers,
                 block 3 (pushes at 0 and 3), MLA at {2, 5}, H 192, KDA 3 × 32, MLA 3 heads
                 (q_lora 48, kv_lora 64, nope 32, shared 8, v 32), dense 384, 8 experts top-2 of
                 width 96 over a latent of 64, 1 shared expert, A_log of exactly 3

Numpy only, deterministic (fixed seeds). Usage:
  make_kimi_fixtures.py --out DIR [--only NAME] [--verify GOLDEN_DIR]
"""

import base64
import copy
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_qwen38_fixtures as qwen38_fixtures  # noqa: E402
from byte_level import bytes_to_unicode  # noqa: E402
from make_qwen38_fixtures import (CORPUS, bf16_bits, fixture_arguments, learn_bpe,  # noqa: E402
                                  verify_fixture, write_json)

REPO = Path(__file__).resolve().parent.parent
TINY_CONFIG = REPO / "tests" / "data" / "configs" / "kimi-k3-tiny" / "config.json"


def small_config(tiny: dict) -> dict:
    c = copy.deepcopy(tiny)
    t = c["text_config"]
    t.update(hidden_size=192, intermediate_size=384, num_hidden_layers=6, attn_res_block_size=3,
             num_attention_heads=3, num_key_value_heads=3, q_lora_rank=48, kv_lora_rank=64,
             qk_nope_head_dim=32, qk_rope_head_dim=8, v_head_dim=32, num_experts=8,
             num_experts_per_token=2, num_shared_experts=1, moe_intermediate_size=96,
             routed_expert_hidden_size=64)
    t["linear_attn_config"].update(full_attn_layers=[3, 6], kda_layers=[1, 2, 4, 5], head_dim=32,
                                   num_heads=3)
    return c


FIXTURES = {
    "kimi-k3-tiny": dict(config=lambda tiny: tiny, a_log_stored=8, shards=2, seed=20261204),
    "kimi-k3-small": dict(config=small_config, a_log_stored=3, shards=2, seed=20261205),
}


def normal(rng, shape, scale) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def norm_weight(rng, n) -> np.ndarray:
    return (1.0 + normal(rng, (n,), 0.1)).astype(np.float32)


def residual_proj(rng, h) -> np.ndarray:
    """An attention-residual projection [1, H]. Its scale sets how peaked the mixes' softmax is:
    at 0.5 the scores spread over ±8·rms and the 10-layer model amplified f32 rounding to ~1e-3
    of its logits (measured by perturbing sublayer outputs by 1e-7 in the float64 reference);
    at 0.1 the mixes stay selective and the amplification is ~10× lower, so a test's bound sits
    well above order noise and still far below what a wrong formula costs."""
    return normal(rng, (1, h), 0.1)


def mxfp4(rng, rows, cols) -> dict:
    """Random codes (every one of the 16, −0 included) and E8M0 scales in 120…130 (§15)."""
    return {"weight_packed": ("U8", rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)),
            "weight_scale": ("U8", rng.integers(120, 131, (rows, cols // 32), dtype=np.uint8))}


def kda_weights(rng, t: dict, a_log_stored: int) -> dict:
    lin = t["linear_attn_config"]
    h, heads, d = t["hidden_size"], lin["num_heads"], lin["head_dim"]
    c, k = heads * d, lin["short_conv_kernel_size"]
    w = {}
    for name in ("q_proj", "k_proj", "v_proj"):
        w[f"{name}.weight"] = ("BF16", normal(rng, (c, h), h ** -0.5))
    for name in ("q_conv1d", "k_conv1d", "v_conv1d"):
        w[f"{name}.weight"] = ("F32", normal(rng, (c, 1, k), 0.5))
    w["f_a_proj.weight"] = ("BF16", normal(rng, (d, h), h ** -0.5))
    w["f_b_proj.weight"] = ("BF16", normal(rng, (c, d), d ** -0.5))
    w["A_log"] = ("F32", normal(rng, (a_log_stored,), 0.5))  # only the first `heads` are used
    w["dt_bias"] = ("F32", normal(rng, (c,), 0.5))
    w["b_proj.weight"] = ("BF16", normal(rng, (heads, h), h ** -0.5))
    w["o_norm.weight"] = ("F32", norm_weight(rng, d))
    w["g_proj.weight"] = ("BF16", normal(rng, (c, h), h ** -0.5))
    w["o_proj.weight"] = ("BF16", normal(rng, (h, c), c ** -0.5))
    return w


def mla_weights(rng, t: dict) -> dict:
    h, heads = t["hidden_size"], t["num_attention_heads"]
    qr, kvr = t["q_lora_rank"], t["kv_lora_rank"]
    nope, shared, v = t["qk_nope_head_dim"], t["qk_rope_head_dim"], t["v_head_dim"]
    return {"q_a_proj.weight": ("BF16", normal(rng, (qr, h), h ** -0.5)),
            "q_a_layernorm.weight": ("BF16", norm_weight(rng, qr)),
            "q_b_proj.weight": ("BF16", normal(rng, (heads * (nope + shared), qr), qr ** -0.5)),
            "kv_a_proj_with_mqa.weight": ("BF16", normal(rng, (kvr + shared, h), h ** -0.5)),
            "kv_a_layernorm.weight": ("BF16", norm_weight(rng, kvr)),
            "kv_b_proj.weight": ("BF16", normal(rng, (heads * (nope + v), kvr), kvr ** -0.5)),
            "g_proj.weight": ("BF16", normal(rng, (heads * v, h), h ** -0.5)),
            "o_proj.weight": ("BF16", normal(rng, (h, heads * v), (heads * v) ** -0.5))}


def moe_weights(rng, t: dict) -> dict:
    h, e, i = t["hidden_size"], t["num_experts"], t["moe_intermediate_size"]
    lat, shared = t["routed_expert_hidden_size"], t["num_shared_experts"] * i
    w = {"gate.weight": ("BF16", normal(rng, (e, h), h ** -0.5)),
         # Large enough that the corrected selection differs from plain top-k (§15).
         "gate.e_score_correction_bias": ("F32", normal(rng, (e,), 0.3)),
         "routed_expert_down_proj.weight": ("BF16", normal(rng, (lat, h), h ** -0.5)),
         "routed_expert_norm.weight": ("BF16", norm_weight(rng, lat)),
         "routed_expert_up_proj.weight": ("BF16", normal(rng, (h, lat), lat ** -0.5)),
         "shared_experts.gate_proj.weight": ("BF16", normal(rng, (shared, h), h ** -0.5)),
         "shared_experts.up_proj.weight": ("BF16", normal(rng, (shared, h), h ** -0.5)),
         "shared_experts.down_proj.weight": ("BF16", normal(rng, (h, shared), shared ** -0.5))}
    for x in range(e):
        for name, rows, cols in (("w1", i, lat), ("w3", i, lat), ("w2", lat, i)):
            for part, value in mxfp4(rng, rows, cols).items():
                w[f"experts.{x}.{name}.{part}"] = value
    return w


def make_weights(config: dict, f: dict) -> dict:
    t = config["text_config"]
    rng = np.random.default_rng(f["seed"])
    h, v, layers = t["hidden_size"], t["vocab_size"], t["num_hidden_layers"]
    full = {n - 1 for n in t["linear_attn_config"]["full_attn_layers"]}
    w = {"language_model.model.embed_tokens.weight": ("BF16", normal(rng, (v, h), 1.0)),
         "language_model.lm_head.weight": ("BF16", normal(rng, (v, h), h ** -0.5)),
         "language_model.model.norm.weight": ("BF16", norm_weight(rng, h)),
         "language_model.model.output_attn_res_norm.weight": ("BF16", norm_weight(rng, h)),
         "language_model.model.output_attn_res_proj.weight": ("BF16", residual_proj(rng, h))}
    for layer in range(layers):
        p = f"language_model.model.layers.{layer}."
        for name in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm",
                     "mlp_res_norm"):
            w[f"{p}{name}.weight"] = ("BF16", norm_weight(rng, h))
        for name in ("self_attention_res_proj", "mlp_res_proj"):
            w[f"{p}{name}.weight"] = ("BF16", residual_proj(rng, h))
        attn = mla_weights(rng, t) if layer in full else kda_weights(rng, t, f["a_log_stored"])
        w.update({f"{p}self_attn.{n}": value for n, value in attn.items()})
        if layer < t["first_k_dense_replace"]:
            inter = t["intermediate_size"]
            w[f"{p}mlp.gate_proj.weight"] = ("BF16", normal(rng, (inter, h), h ** -0.5))
            w[f"{p}mlp.up_proj.weight"] = ("BF16", normal(rng, (inter, h), h ** -0.5))
            w[f"{p}mlp.down_proj.weight"] = ("BF16", normal(rng, (h, inter), inter ** -0.5))
        else:
            w.update({f"{p}block_sparse_moe.{n}": value for n, value in moe_weights(rng, t).items()})
    return w


def tensor_bytes(value: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return bf16_bits(value).astype("<u2").tobytes()
    if dtype == "F32":
        return np.ascontiguousarray(value, dtype="<f4").tobytes()
    if dtype == "U8":
        return np.ascontiguousarray(value, dtype=np.uint8).tobytes()
    raise ValueError(dtype)


def write_weights(d: Path, layers: int, weights: dict, shards: int) -> None:
    """Layers split evenly over the shards; global tensors in the first (lm_head in the last)."""
    def shard_of(name):
        if ".layers." in name:
            return int(name.split(".layers.")[1].split(".")[0]) * shards // layers
        return shards - 1 if name.endswith("lm_head.weight") else 0

    total, weight_map = 0, {}
    for s in range(shards):
        file = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = {n: v for n, v in weights.items() if shard_of(n) == s}
        total += qwen38_fixtures.write_safetensors(d / file, part, encode=tensor_bytes)
        weight_map.update({n: file for n in part})
    write_json(d / "model.safetensors.index.json",
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})


# --- tokenizer (tiktoken, as Kimi ships it) ---------------------------------------------------

# Named special tokens by offset from the first special id (= bos_token_id = the number of
# ranks), at Kimi K3's offsets where the scaled-down vocabulary has room ([UNK] and [PAD] end it,
# as in K3); the other ids are <|reserved_token_{id}|>. K3's structure markers are not "special"
# (decoded text keeps them for the output parsers).
SPECIAL_NAMES = {0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>",
                 5: "<|sep|>", 6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]"}
NOT_SPECIAL = {"<|open|>", "<|close|>", "<|sep|>"}
UNK_NAME, PAD_NAME = "[UNK]", "[PAD]"


def tiktoken_ranks(n_base: int) -> str:
    """tiktoken.model text: the 256 bytes, then merges learned from the corpus, as
    "base64(bytes) rank" lines; a merge's rank is its order, so tiktoken applies them as learned."""
    to_byte = {ch: b for b, ch in bytes_to_unicode().items()}
    tokens = [bytes([b]) for b in range(256)]
    for a, b in learn_bpe(CORPUS, n_base - 256):
        tokens.append(bytes(to_byte[c] for c in a + b))
    return "".join("%s %d\n" % (base64.b64encode(t).decode(), rank)
                   for rank, t in enumerate(tokens))


def tokenizer_config(t: dict) -> dict:
    first, vocab = t["bos_token_id"], t["vocab_size"]
    names = {first + offset: name for offset, name in SPECIAL_NAMES.items()}
    names[vocab - 2], names[t["pad_token_id"]] = UNK_NAME, PAD_NAME
    entry = dict(lstrip=False, normalized=False, rstrip=False, single_word=False)

    def added(i):
        name = names.get(i, "<|reserved_token_%d|>" % i)
        return dict(content=name, **entry, special=name not in NOT_SPECIAL)
    return {
        "added_tokens_decoder": {str(i): added(i) for i in range(first, vocab)},
        "bos_token": "[BOS]",
        "eos_token": "[EOS]",
        "pad_token": PAD_NAME,
        "unk_token": UNK_NAME,
        "model_max_length": t["max_position_embeddings"],
        "tokenizer_class": "TikTokenTokenizer",
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
    }


def write_fixture(root: Path, name: str) -> None:
    f = FIXTURES[name]
    config = f["config"](json.loads(TINY_CONFIG.read_text()))
    t = config["text_config"]
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    write_json(d / "config.json", config)
    write_json(d / "generation_config.json",
               {"bos_token_id": t["bos_token_id"],
                # [EOS] and <|end_of_msg|>, which ends every K3 message (§12's stop tokens).
                "eos_token_id": [t["eos_token_id"], t["eos_token_id"] + 1],
                "pad_token_id": t["pad_token_id"]})
    write_weights(d, t["num_hidden_layers"], make_weights(config, f), f["shards"])
    (d / "tiktoken.model").write_text(tiktoken_ranks(t["bos_token_id"]))
    write_json(d / "tokenizer_config.json", tokenizer_config(t))


def main() -> int:
    args = fixture_arguments(__doc__.split("\n")[0], FIXTURES)
    for name in FIXTURES:
        if args.only and name != args.only:
            continue
        write_fixture(args.out, name)
        if args.verify and not verify_fixture(args.out / name, args.verify / f"{name}.json",
                                              "tests/goldens/kimi/README.md"):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
