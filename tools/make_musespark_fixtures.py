#!/usr/bin/env python3
"""Scaled-down Muse Spark (`muse_spark`) model directories for megadecode's tests.

Writes one Hugging Face-style model folder per fixture under --out: config.json,
generation_config.json, (hf_quant_config.json for the NVFP4 fixture), safetensors weights and a
byte-level BPE tokenizer whose chat template is tests/data/templates/muse_spark_style.jinja (§9).
Muse's named special tokens sit at the top of the trained ids (the spec's TINY puts bos/eos/pad
at 0..3, which are byte tokens here); reserved special tokens fill the ids between the merges
and them.
The tensor names, dtypes and layouts are the published checkpoint's (docs/models/muse-spark-nvfp4.md
§2, §6); the shapes are small.

Fixtures:
  muse-spark-tiny   the spec's TINY configuration (§11): 6 layers S F S S S F, H 512, heads 8/2 of
                    64, latent Hm 256, experts 16 of I 96, top-4, vocab 1024 with 1000 trained ids,
                    window 16; NVFP4 experts (ModelOpt packing) on layers 1-4, bf16 on 0 and 5,
                    with the hand-built cases §11 lists (an all-zero block, every e2m1 code
                    including -0, gate clamps, norm ties, saturating softcap rows, large untrained
                    rows, two experts tied in routing)
  muse-spark-small  other widths: 5 layers S F S S S (a sliding layer last), H 192, heads 3/1,
                    Hm 128, experts 8 of I 64, top-2, vocab 512 with 500 trained ids, window 8,
                    bf16 experts only, no quantization config, 2 shards + index

Numpy only, deterministic (fixed seeds). Every BF16 tensor holds bf16 values; the router and its
bias are F32 values that bf16 cannot hold. The NVFP4 quantizer follows §6 and is checked here
against the spec's encode test vector before anything is written. Usage:
  make_musespark_fixtures.py --out DIR [--only NAME] [--verify GOLDEN_DIR]
"""

import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from byte_level import bytes_to_unicode  # noqa: E402
import make_qwen38_fixtures as qwen38_fixtures  # noqa: E402
from make_qwen38_fixtures import (CORPUS, added_token_entries, bf16_bits,  # noqa: E402
                                  byte_level_bpe, fixture_arguments, learn_bpe,
                                  verify_fixture, write_json)

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "tests" / "data" / "templates" / "muse_spark_style.jinja"
# Muse's named special tokens (§9), placed at the top of each fixture's trained ids.
SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eom|>", "<|eot|>",
                  "<|finetune_right_pad|>", "<|start|>", "<|message|>"]
MERGES = 240  # learned from the corpus; ids between the merges and the specials are reserved

FIXTURES = {
    "muse-spark-tiny": dict(
        layers=6, hidden=512, heads=8, kv_heads=2, head_dim=64, moe_hidden=256, inter=96,
        experts=16, top_k=4, vocab=1024, vocab_used=1000, window=16, nvfp4_layers=(1, 2, 3, 4),
        shards=1, seed=20261204),
    "muse-spark-small": dict(
        layers=5, hidden=192, heads=3, kv_heads=1, head_dim=64, moe_hidden=128, inter=64,
        experts=8, top_k=2, vocab=512, vocab_used=500, window=8, nvfp4_layers=(),
        shards=2, seed=20261205),
}
THETA = 500000.0
# Experts given identical router rows, biases and weights: routing ties that the lowest-index
# rule settles (identical weights keep the goldens independent of how torch breaks the tie).
TIED_EXPERTS = (5, 6)
SOFTCAP_ROWS = (7,)  # an lm_head row scaled up so that some of its logits saturate the softcap
LARGE_ROW_SCALE = 12.0

# --- NVFP4 (ModelOpt packing, spec §6) ------------------------------------------------------------

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)


def e4m3_values() -> np.ndarray:
    """The 256 float8_e4m3fn values (NaN at 0x7F and 0xFF)."""
    out = np.empty(256, dtype=np.float32)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        exponent, mantissa = (b >> 3) & 0xF, b & 7
        if exponent == 0xF and mantissa == 7:
            out[b] = np.nan
        elif exponent == 0:
            out[b] = sign * mantissa * 2.0 ** -9
        else:
            out[b] = sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return out


E4M3 = e4m3_values()
E4M3_POSITIVE = E4M3[1:0x7F]  # codes 0x01..0x7E, increasing


def e4m3_encode(x: np.ndarray) -> np.ndarray:
    """Positive f32 values in [2^-9, 448] to the nearest e4m3 code, ties to the even code."""
    i = np.clip(np.searchsorted(E4M3_POSITIVE, x), 1, len(E4M3_POSITIVE) - 1)
    lo, hi = E4M3_POSITIVE[i - 1], E4M3_POSITIVE[i]
    code_lo = i  # E4M3_POSITIVE[j] is code j + 1
    take_hi = (x - lo > hi - x) | ((x - lo == hi - x) & (code_lo % 2 == 1))
    return np.where(take_hi, code_lo + 1, code_lo).astype(np.uint8)


def e2m1_encode(x: np.ndarray) -> np.ndarray:
    """f32 values to e2m1 codes: nearest magnitude, ties to the even ordinal, saturating at 6;
    the sign bit set iff x < 0."""
    mag = np.abs(x)
    i = np.clip(np.searchsorted(E2M1, mag), 1, 7)
    lo, hi = E2M1[i - 1], E2M1[i]
    take_hi = (mag - lo > hi - mag) | ((mag - lo == hi - mag) & ((i - 1) % 2 == 1))
    code = np.where(mag >= 6, 7, np.where(take_hi, i, i - 1)).astype(np.uint8)
    return code | np.where(x < 0, 8, 0).astype(np.uint8)


def quantize_nvfp4(w: np.ndarray) -> tuple:
    """One quantization unit [rows, K] (K a multiple of 16) -> (codes uint8 [rows, K],
    block scale bytes uint8 [rows, K/16], global scale f32)."""
    w = w.astype(np.float32)
    amax = np.float32(np.abs(w).max())
    gs = np.float32(1.0) if amax == 0 else np.float32(amax / np.float32(2688))
    blocks = w.reshape(w.shape[0], -1, 16)
    block_amax = np.abs(blocks).max(axis=2)
    bs = np.clip(block_amax / np.float32(np.float32(6) * gs), 2.0 ** -9, 448).astype(np.float32)
    scale_codes = e4m3_encode(bs)
    den = (E4M3[scale_codes] * gs).astype(np.float32)
    codes = e2m1_encode((blocks / den[:, :, None]).astype(np.float32))
    return codes.reshape(w.shape), scale_codes, gs


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """Code k of a row in bits 0-3 of byte k/2 when k is even, bits 4-7 when odd."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def dequantize_nvfp4(codes: np.ndarray, scale_codes: np.ndarray, gs) -> np.ndarray:
    """W = e2m1 · e4m3 · global scale in f32 (the product of the first two is exact)."""
    magnitude = E2M1[codes & 7] * np.where(codes & 8, -1, 1).astype(np.float32)
    block = np.repeat(E4M3[scale_codes], 16, axis=-1)
    return ((magnitude * block).astype(np.float32) * np.float32(gs)).astype(np.float32)


def check_quantizer() -> None:
    vector = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.75, -0.3, 0.0, 2.9, -6.0],
                      dtype=np.float32)
    assert e2m1_encode(vector).tolist() == [0, 2, 2, 4, 4, 6, 6, 7, 10, 9, 0, 5, 15]
    w = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    codes, scales, gs = quantize_nvfp4(w)
    assert E4M3[scales].max() == 448  # the tensor-amax block gets exactly 448
    assert (np.abs(E2M1[codes & 7].reshape(4, 2, 16)).max(axis=2) == 6).all()
    again = quantize_nvfp4(dequantize_nvfp4(codes, scales, gs))
    assert (again[1] == scales).all() and again[2] == gs
    zero_codes, _, zero_gs = quantize_nvfp4(np.zeros((2, 16), np.float32))
    assert zero_gs == 1 and not zero_codes.any()


# --- weights ---------------------------------------------------------------------------------------


def normal(rng, shape, scale) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def centred_gamma(rng, n) -> np.ndarray:
    """A zero-centred norm weight; elements 0 and 1 are the r16(1 + γ) tie cases 2^-9, 3·2^-9."""
    g = normal(rng, (n,), 0.1)
    g[0], g[1] = 2.0 ** -9, 3 * 2.0 ** -9
    return g


def residual_gate(rng, n) -> np.ndarray:
    """Gate parameters; ±4 make α's clamp engage (α² + β² = 1 holds only for |g| ≲ 2.3)."""
    g = normal(rng, (n,), 0.8)
    g[2], g[3], g[4] = 4.0, -4.0, 3.5
    return g


def expert_f32(rng, f: dict) -> tuple:
    e, i, hm = f["experts"], f["inter"], f["moe_hidden"]
    gate = normal(rng, (e, i, hm), hm ** -0.5)
    up = normal(rng, (e, i, hm), 4 * hm ** -0.5)  # 4×: the two halves' global scales differ
    down = normal(rng, (e, hm, i), i ** -0.5)
    a, b = TIED_EXPERTS
    gate[b], up[b], down[b] = gate[a], up[a], down[a]
    return gate, up, down


def nvfp4_experts(prefix: str, gate, up, down) -> dict:
    e = gate.shape[0]
    codes_gu, scales_gu, codes_d, scales_d = [], [], [], []
    ws2_gu = np.zeros((e, 2), np.float32)
    ws2_d = np.zeros((e,), np.float32)
    for x in range(e):
        cg, sg, gg = quantize_nvfp4(gate[x])
        cu, su, gu = quantize_nvfp4(up[x])
        cd, sd, gd = quantize_nvfp4(down[x])
        codes_gu.append(np.concatenate([cg, cu]))
        scales_gu.append(np.concatenate([sg, su]))
        codes_d.append(cd)
        scales_d.append(sd)
        ws2_gu[x] = (gg, gu)
        ws2_d[x] = gd
    codes_gu, scales_gu = np.stack(codes_gu), np.stack(scales_gu)
    codes_d, scales_d = np.stack(codes_d), np.stack(scales_d)
    # Hand-built blocks (expert 0): an all-zero block, whose scale clamps to 2^-9 (byte 0x01);
    # a block holding every code, −0 (8) among them; the encoder's tie results in another.
    codes_gu[0, 0, 0:16], scales_gu[0, 0, 0] = 0, 0x01
    codes_gu[0, 1, 16:32] = np.arange(16, dtype=np.uint8)
    codes_d[0, 2, 0:16] = [0, 2, 2, 4, 4, 6, 6, 7, 10, 9, 0, 5, 15, 8, 8, 1]
    return {
        prefix + "gate_up_proj": ("U8", pack_nibbles(codes_gu)),
        prefix + "gate_up_proj_weight_scale": ("F8_E4M3", scales_gu),
        prefix + "gate_up_proj_weight_scale_2": ("F32", ws2_gu),
        prefix + "gate_up_proj_input_scale": ("F32", np.full((e, 2), 0.5, np.float32)),
        prefix + "down_proj": ("U8", pack_nibbles(codes_d)),
        prefix + "down_proj_weight_scale": ("F8_E4M3", scales_d),
        prefix + "down_proj_weight_scale_2": ("F32", ws2_d),
        prefix + "down_proj_input_scale": ("F32", np.full((e,), 0.5, np.float32)),
    }


def layer_weights(rng, f: dict, layer: int) -> dict:
    h, hd, hm = f["hidden"], f["head_dim"], f["moe_hidden"]
    q_dim, kv_dim, e = f["heads"] * hd, f["kv_heads"] * hd, f["experts"]
    p = "model.language_model.layers.%d." % layer
    router = normal(rng, (e, h), 3 * h ** -0.5)
    bias = normal(rng, (e,), 0.05)
    a, b = TIED_EXPERTS
    router[b], bias[b] = router[a], bias[a]
    t = {
        p + "input_layernorm.weight": ("BF16", centred_gamma(rng, h)),
        p + "self_attn.q_proj.weight": ("BF16", normal(rng, (q_dim, h), h ** -0.5)),
        p + "self_attn.k_proj.weight": ("BF16", normal(rng, (kv_dim, h), h ** -0.5)),
        p + "self_attn.v_proj.weight": ("BF16", normal(rng, (kv_dim, h), h ** -0.5)),
        p + "self_attn.gate_proj.weight": ("BF16", normal(rng, (q_dim, h), h ** -0.5)),
        p + "self_attn.o_proj.weight": ("BF16", normal(rng, (h, q_dim), q_dim ** -0.5)),
        p + "post_attention_residual_gate.gate": ("BF16", residual_gate(rng, h)),
        p + "pre_feedforward_layernorm.weight": ("BF16", centred_gamma(rng, h)),
        p + "post_feedforward_layernorm.weight": ("BF16", centred_gamma(rng, h)),
        p + "post_feedforward_residual_gate.gate": ("BF16", residual_gate(rng, h)),
        p + "mlp.gate.weight": ("F32", router),
        p + "mlp.gate.e_score_correction_bias": ("F32", bias),
        p + "mlp.pre_expert_proj.weight": ("BF16", normal(rng, (hm, h), h ** -0.5)),
        p + "mlp.pre_expert_norm.weight": ("BF16", centred_gamma(rng, hm)),
        p + "mlp.experts.post_expert_norm.weight": ("BF16", centred_gamma(rng, hm)),
        p + "mlp.post_expert_proj.weight": ("BF16", normal(rng, (h, hm), hm ** -0.5)),
    }
    gate, up, down = expert_f32(rng, f)
    if layer in f["nvfp4_layers"]:
        t.update(nvfp4_experts(p + "mlp.experts.", gate, up, down))
    else:
        t[p + "mlp.experts.gate_up_proj"] = ("BF16", np.concatenate([gate, up], axis=1))
        t[p + "mlp.experts.down_proj"] = ("BF16", down)
    return t


def make_weights(f: dict) -> dict:
    rng = np.random.default_rng(f["seed"])
    h, vocab, used = f["hidden"], f["vocab"], f["vocab_used"]
    # Raw logits of spread about 8 (softcapped inputs about 1.4): greedy margins stay readable.
    lm_head = normal(rng, (vocab, h), 8 * h ** -0.5)
    for row in SOFTCAP_ROWS:
        if row < used:
            lm_head[row] *= LARGE_ROW_SCALE
    lm_head[used:] *= LARGE_ROW_SCALE  # untrained rows large: forgetting the mask changes argmax
    final_norm = (1 + normal(rng, (h,), 0.1)).astype(np.float32)
    t = {
        "model.language_model.embed_tokens.weight": ("BF16", normal(rng, (vocab, h), 1.0)),
        "model.language_model.norm.weight": ("BF16", final_norm),
        "lm_head.weight": ("BF16", lm_head),
    }
    for layer in range(f["layers"]):
        t.update(layer_weights(rng, f, layer))
    return t


# --- tokenizer -------------------------------------------------------------------------------------


def special_ids(f: dict) -> dict:
    first = f["vocab_used"] - len(SPECIAL_TOKENS)
    return {token: first + i for i, token in enumerate(SPECIAL_TOKENS)}


def stop_ids(f: dict) -> list:
    ids = special_ids(f)
    return [ids["<|end_of_text|>"], ids["<|eot|>"]]


def make_tokenizer(f: dict) -> tuple:
    """A byte-level BPE (the GPT-2 byte characters, then merges learned from the corpus), reserved
    special tokens up to Muse's named ones at the top of the trained ids."""
    table = bytes_to_unicode()
    vocab = {ch: i for i, ch in enumerate(table.values())}
    first_special = f["vocab_used"] - len(SPECIAL_TOKENS)
    merges = learn_bpe(CORPUS, min(MERGES, first_special - 256))
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added = [(i, "<|reserved_special_token_%d|>" % (i - len(vocab)))
             for i in range(len(vocab), first_special)]
    added += [(i, token) for token, i in special_ids(f).items()]
    added_tokens = added_token_entries([(i, c, True) for i, c in added])
    tokenizer = byte_level_bpe(vocab, merges, added_tokens, normalizer=None)
    config = {
        "add_bos_token": False,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                 for t in added_tokens},
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|eot|>",
        "pad_token": "<|finetune_right_pad|>",
        "chat_template": TEMPLATE.read_text(),
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    return tokenizer, config


def check_tokenizer(path: Path, f: dict) -> None:
    """Round trip through the `tokenizers` package when it is installed (it is in .venv)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return
    tok = Tokenizer.from_file(str(path))
    assert tok.get_vocab_size(with_added_tokens=True) == f["vocab_used"]
    ids = special_ids(f)
    text = "<|start|>assistant to=self<|message|>Hello, world!<|eom|><|eot|>"
    encoded = tok.encode(text).ids
    assert encoded[0] == ids["<|start|>"] and encoded[-1] == ids["<|eot|>"], encoded
    assert tok.decode(encoded, skip_special_tokens=False) == text


# --- configs and files -----------------------------------------------------------------------------


def is_full(layer: int) -> bool:
    return layer % 4 == 1


def text_config(f: dict) -> dict:
    layers = range(f["layers"])
    return {
        "model_type": "muse_spark_text",
        "num_hidden_layers": f["layers"],
        "hidden_size": f["hidden"],
        "moe_hidden_size": f["moe_hidden"],
        "moe_intermediate_size": f["inter"],
        "num_local_experts": f["experts"],
        "num_experts_per_tok": f["top_k"],
        "num_attention_heads": f["heads"],
        "num_key_value_heads": f["kv_heads"],
        "head_dim": f["head_dim"],
        "vocab_size": f["vocab"],
        "vocab_used": f["vocab_used"],
        "sliding_window": f["window"],
        "rope_parameters": {"rope_theta": THETA, "rope_type": "default"},
        "layer_types": ["full_attention" if is_full(l) else "sliding_attention" for l in layers],
        "layer_rope_theta": [0.0 if is_full(l) else THETA for l in layers],
        "mlp_layer_types": ["sparse"] * f["layers"],
        "rms_norm_eps": 1e-05,
        "post_norm_eps": 1e-08,
        "residual_gate_temperature": 0.3,
        "qk_scale_factor": 5.4730064863875,
        "output_multiplier": 0.17677669529663687,
        "final_logit_softcapping": 20.0,
        "attention_bias": False,
        "hidden_act": "silu",
        "num_shared_experts": 0,
        "routed_scaling_factor": 1.0,
        "tie_word_embeddings": False,
        "bos_token_id": special_ids(f)["<|begin_of_text|>"],
        "eos_token_id": stop_ids(f)[0],
        "pad_token_id": special_ids(f)["<|finetune_right_pad|>"],
        "max_position_embeddings": 4096,
    }


def model_config(f: dict) -> dict:
    return {"architectures": ["MuseSparkForConditionalGeneration"], "model_type": "muse_spark",
            "tie_word_embeddings": False, "text_config": text_config(f)}


def tensor_bytes(value: np.ndarray, dtype: str) -> bytes:
    if dtype == "BF16":
        return bf16_bits(value).astype("<u2").tobytes()
    if dtype == "F32":
        return np.ascontiguousarray(value, dtype="<f4").tobytes()
    if dtype in ("U8", "F8_E4M3"):
        return np.ascontiguousarray(value, dtype=np.uint8).tobytes()
    raise ValueError(dtype)


def write_safetensors(path: Path, tensors: dict) -> int:
    """The qwen38 fixtures' writer with this family's dtypes (U8 codes, F8_E4M3 scales, exact F32)."""
    return qwen38_fixtures.write_safetensors(path, tensors, encode=tensor_bytes)


def write_weights(d: Path, f: dict, weights: dict) -> None:
    if f["shards"] == 1:
        write_safetensors(d / "model.safetensors", weights)
        return
    half = f["layers"] // 2

    def shard_of(name):
        m = re.search(r"\.layers\.(\d+)\.", name)
        return (0 if int(m.group(1)) < half else 1) if m else (1 if name == "lm_head.weight" else 0)

    total, weight_map = 0, {}
    for s in range(f["shards"]):
        file = "model-%05d-of-%05d.safetensors" % (s + 1, f["shards"])
        part = {n: v for n, v in weights.items() if shard_of(n) == s}
        total += write_safetensors(d / file, part)
        weight_map.update({n: file for n in part})
    write_json(d / "model.safetensors.index.json",
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})


def write_fixture(root: Path, name: str) -> None:
    f = FIXTURES[name]
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    write_json(d / "config.json", model_config(f))
    ids = special_ids(f)
    write_json(d / "generation_config.json",
               {"bos_token_id": ids["<|begin_of_text|>"], "eos_token_id": stop_ids(f),
                "pad_token_id": ids["<|finetune_right_pad|>"]})
    tokenizer, tok_config = make_tokenizer(f)
    write_json(d / "tokenizer.json", tokenizer)
    write_json(d / "tokenizer_config.json", tok_config)
    check_tokenizer(d / "tokenizer.json", f)
    if f["nvfp4_layers"]:
        write_json(d / "hf_quant_config.json",
                   {"producer": {"name": "modelopt", "version": "0.47.0"},
                    "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                                     "group_size": 16, "exclude_modules": ["lm_head"]}})
    write_weights(d, f, make_weights(f))


def main() -> int:
    args = fixture_arguments(__doc__.split("\n")[0], FIXTURES)
    check_quantizer()
    for name in FIXTURES:
        if args.only and name != args.only:
            continue
        write_fixture(args.out, name)
        if args.verify and not verify_fixture(args.out / name, args.verify / f"{name}.json",
                                              "tests/goldens/musespark/README.md"):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
