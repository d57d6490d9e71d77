#!/usr/bin/env python3
"""Writes `qwen35` / `qwen35moe` GGUF files from the scaled-down Hugging Face qwen3_5 and
qwen3_5_moe fixtures, laid out as llama.cpp's converter (convert_hf_to_gguf.py, Qwen3_5TextModel
and its MoE sibling) lays them out, so that the C++ tests can check that a GGUF loads as the same
model as its safetensors directory.

The layout facts (read from llama.cpp's converter and gguf-py, no code copied):
  - names: token_embd, output (absent when tied), output_norm; per block attn_norm,
    post_attention_norm, ffn_gate/up/down; attention blocks attn_q (transformers' q_proj rows
    as they are: per head query rows then gate rows), attn_k, attn_v, attn_output, attn_q_norm,
    attn_k_norm; Gated DeltaNet blocks attn_qkv (in_proj_qkv), attn_gate (in_proj_z), ssm_beta
    (in_proj_b), ssm_alpha (in_proj_a), ssm_conv1d (conv1d squeezed to [channels, kernel]),
    ssm_dt.bias (dt_bias), ssm_a (-exp(A_log), no .weight suffix), ssm_norm (the gated norm),
    ssm_out (out_proj);
  - every `*norm.weight` except the Gated DeltaNet's gated norm gets +1 (transformers applies
    them as 1 + w, llama.cpp as stored);
  - when value heads outnumber key heads, every value-head tensor is reordered from grouped
    (value heads of key head g together) to tiled order: GGUF value head j * n_k + g is
    transformers' head g * r + j (r = n_v / n_k) - the V rows of attn_qkv and the V channels of
    ssm_conv1d, the rows of attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt.bias, and the columns
    of ssm_out;
  - qwen35moe blocks replace ffn_gate/up/down by the router ffn_gate_inp [E, H], the stacked
    experts ffn_gate_exps / ffn_up_exps [E, I, H] (transformers' gate_up_proj split in its gate
    and up halves) and ffn_down_exps [E, H, I] - or, with --fused-experts files, one
    ffn_gate_up_exps [E, 2I, H] holding gate_up_proj as it is - the shared expert
    ffn_gate_shexp / ffn_up_shexp / ffn_down_shexp and its gate ffn_gate_inp_shexp, a vector of
    H (the converter squeezes [1, H]); metadata expert_count, expert_used_count,
    expert_feed_forward_length, expert_shared_feed_forward_length instead of feed_forward_length;
  - vectors, norms and conv taps are F32 whatever the matrices' type;
  - metadata qwen35.*: block_count, context_length, embedding_length, feed_forward_length,
    attention.head_count(_kv), attention.key_length / value_length, attention.layer_norm_rms_
    epsilon, rope.freq_base, rope.dimension_count, rope.dimension_sections, ssm.conv_kernel,
    ssm.state_size (key head dim), ssm.group_count (key heads), ssm.time_step_rank (value heads),
    ssm.inner_size (value width), full_attention_interval. The converter can only say the layer
    pattern by an interval; for a pattern no interval gives, this writes the bool array
    attention.recurrent_layers that llama.cpp's loader also reads.
  - tokenizer: gpt2 model, the vocabulary in id order with token types (control for special
    added tokens, user-defined for the others), merges, eos = <|im_end|>, bos = <|endoftext|>,
    the chat template. tokenizer.ggml.pre is "qwen2" (these fixtures' tokenizer.json splits with
    Qwen2's regex; Qwen3.5's own tokenizer would be "qwen35").

Matrix types: BF16, or Q8_0 / Q4_0 / Q5_0 quantised by gguf-py's own quantisers, or Q4_K / Q5_K /
Q6_K written by this file's plain quantisers (gguf 0.19 dequantises K-quants but cannot quantise
them; the twins below are gguf-py's dequantisation of the blocks written). Each
quantised file comes with a twin, <fixture>.<type>-as-F32.gguf, whose matrices hold the values
gguf-py dequantises the quantised ones to, in F32: the model a quantised file means, exactly, so
that the block kernels can be checked against it to summation order.
Usage: make_qwen35_gguf.py --fixtures DIR --out DIR
       make_qwen35_gguf.py --random-0.8b TYPE --out FILE   (bench: Qwen3.5-0.8B's shape, random
                                                            weights, no tokenizer; TYPE BF16, Q8_0
                                                            or Q4_0)
       make_qwen35_gguf.py --random-moe TYPE --out FILE    (bench: 35B-A3B's layers, 8 of them,
                                                            64 experts)
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType as Q, TokenType, quants

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash2_reference import read_safetensors  # noqa: E402  (the tools' safetensors reader)

# (fixture directory name, matrix type) -> written as <fixture>.<type>.gguf
OUTPUTS = [
    ("tiny-qwen38", Q.BF16), ("tiny-qwen38", Q.Q8_0), ("tiny-qwen38", Q.Q4_0),
    ("tiny-qwen35-tied", Q.BF16), ("tiny-qwen35-tied", Q.Q8_0),
    ("tiny-qwen35-interval", Q.BF16), ("tiny-qwen35-layers", Q.BF16),
    ("tiny-qwen35-moe", Q.BF16), ("tiny-qwen35-moe", Q.Q8_0), ("tiny-qwen35-moe", Q.Q4_0),
    ("tiny-qwen38", Q.Q5_0),
    # K-quants need rows of 256: tiny-qwen38-hd256's o_proj, out_proj, down_proj and lm_head
    # have them; its narrower matrices fall back as llama.cpp's would.
    ("tiny-qwen38-hd256", Q.Q4_K), ("tiny-qwen38-hd256", Q.Q5_K), ("tiny-qwen38-hd256", Q.Q6_K),
]
# MoE fixtures also written with the experts' gate and up in one stacked tensor, as
# <fixture>.<type>-fused-experts.gguf.
FUSED_EXPERTS = [("tiny-qwen35-moe", Q.BF16)]


def read_weights(fixture: Path) -> dict:
    index = fixture / "model.safetensors.index.json"
    files = (sorted(set(json.loads(index.read_text())["weight_map"].values()))
             if index.exists() else ["model.safetensors"])
    out = {}
    for f in files:
        # float64 of bf16 / f32 values: exact in float32.
        out.update({n: v.astype(np.float32) for n, v in read_safetensors(fixture / f).items()})
    prefix = "model.language_model." if any(n.startswith("model.language_model.") for n in out) \
        else "model."
    return {(n[len(prefix):] if n.startswith(prefix) else n): v for n, v in out.items()}


def text_config(fixture: Path) -> dict:
    config = json.loads((fixture / "config.json").read_text())
    return config.get("text_config", config)


def layer_kinds(tc: dict) -> list:
    if "layer_types" in tc:
        return list(tc["layer_types"])
    interval = tc.get("full_attention_interval", 4)
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
            for i in range(tc["num_hidden_layers"])]


def interval_of(kinds: list):
    """The full_attention_interval that gives `kinds`, or None."""
    for interval in range(1, len(kinds) + 2):
        if all((k == "full_attention") == ((i + 1) % interval == 0) for i, k in enumerate(kinds)):
            return interval
    return None


def tiled_order(n_k: int, n_v: int) -> np.ndarray:
    """GGUF value head position p holds transformers' head order[p]."""
    r = n_v // n_k
    return np.array([g * r + j for j in range(r) for g in range(n_k)], dtype=np.int64)


def reorder_heads(x: np.ndarray, order: np.ndarray, width: int, axis: int) -> np.ndarray:
    """Permutes `width`-wide head blocks of `x` along `axis` into `order`."""
    index = (order[:, None] * width + np.arange(width)[None, :]).reshape(-1)
    return np.take(x, index, axis=axis)


# --- K-quant writers -----------------------------------------------------------------------------
# gguf 0.19 dequantises the K-quants but cannot quantise them. These write valid blocks with a
# plain min/max (Q4_K, Q5_K) or absmax (Q6_K) choice of scales - not llama.cpp's search for the
# best ones, which only changes how close the blocks come to the weights, not what they mean.
# Layouts (ggml's block_q4_K / block_q5_K / block_q6_K):
#   Q4_K  d, dmin (f16), scales[12], qs[128]         x = d·sc_j·q - dmin·m_j, 8 sub-blocks of 32
#   Q5_K  d, dmin, scales[12], qh[32], qs[128]       the same with a fifth bit per weight in qh
#   Q6_K  ql[128], qh[64], int8 sc[16], d            x = d·sc_j·(q - 32), 16 sub-blocks of 16
# The 12 scale bytes: j < 4 holds sc_j / m_j in the low 6 bits of bytes j / j + 4; sub-blocks
# 4..7 keep their low 4 bits in the nibbles of bytes 8..11 and their top 2 bits in the top bits
# of bytes 0..7.


def _f16(x):
    return x.astype(np.float16)


def _pack_scales(sc, m):
    """sc, m: (blocks, 8) integers 0..63 -> (blocks, 12) bytes."""
    sc, m = sc.astype(np.uint8), m.astype(np.uint8)
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return out


def _min_max_blocks(x, levels):
    """x: (blocks, 8, 32) -> d, dmin (f16), sc, m (0..63), q (0..levels) per weight."""
    low = np.minimum(x.min(axis=-1), 0)
    high = np.maximum(x.max(axis=-1), 0)
    scale = (high - low) / levels
    d = _f16(scale.max(axis=-1) / 63)
    dmin = _f16((-low).max(axis=-1) / 63)
    d32, dmin32 = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.rint(scale / d32), 0).clip(0, 63)
        m = np.where(dmin32 > 0, np.rint(-low / dmin32), 0).clip(0, 63)
        step = (d32 * sc)[..., None]
        q = np.where(step > 0, np.rint((x + (dmin32 * m)[..., None]) / step), 0)
    return d, dmin, sc, m, q.clip(0, levels).astype(np.uint8)


def _nibbles(q):
    """q: (blocks, 8, 32) values 0..15 -> qs (blocks, 128): pairs of sub-blocks, low then high."""
    pairs = q.reshape(q.shape[0], 4, 2, 32)
    return (pairs[:, :, 0, :] | (pairs[:, :, 1, :] << 4)).reshape(q.shape[0], 128)


def _q4_k(x):
    d, dmin, sc, m, q = _min_max_blocks(x, 15)
    return np.concatenate([d[:, None].view(np.uint8), dmin[:, None].view(np.uint8),
                           _pack_scales(sc, m), _nibbles(q)], axis=-1)


def _q5_k(x):
    d, dmin, sc, m, q = _min_max_blocks(x, 31)
    qh = np.zeros((x.shape[0], 32), dtype=np.uint8)
    for g in range(8):
        qh |= ((q[:, g, :] >> 4) & 1) << g
    return np.concatenate([d[:, None].view(np.uint8), dmin[:, None].view(np.uint8),
                           _pack_scales(sc, m), qh, _nibbles(q & 15)], axis=-1)


def _q6_k(x):
    """x: (blocks, 256)."""
    sub = x.reshape(x.shape[0], 16, 16)
    scale = np.abs(sub).max(axis=-1) / 31
    d = _f16(scale.max(axis=-1) / 127)
    d32 = d.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.rint(scale / d32), 0).clip(-128, 127)
        step = (d32 * sc)[..., None]
        q = np.where(step != 0, np.rint(sub / step), 0).clip(-32, 31) + 32
    q = q.astype(np.uint8).reshape(x.shape[0], 2, 4, 32)  # half, quarter, lane
    ql = np.zeros((x.shape[0], 2, 64), dtype=np.uint8)
    qh = np.zeros((x.shape[0], 2, 32), dtype=np.uint8)
    for k in range(4):
        low = q[:, :, k, :] & 15
        ql[:, :, 32 * (k % 2):32 * (k % 2) + 32] |= low if k < 2 else (low << 4)
        qh |= (q[:, :, k, :] >> 4) << (2 * k)
    return np.concatenate([ql.reshape(-1, 128), qh.reshape(-1, 64),
                           sc.astype(np.int8).view(np.uint8), d[:, None].view(np.uint8)], axis=-1)


K_QUANTS = {Q.Q4_K: (_q4_k, (8, 32)), Q.Q5_K: (_q5_k, (8, 32)), Q.Q6_K: (_q6_k, (256,))}
# A row that is no whole number of a type's blocks takes llama.cpp's fallback type (its
# quantiser's rule), except Q5_K's Q5_1, which megadecode does not read: Q5_0 instead.
FALLBACK = {Q.Q4_K: Q.Q5_0, Q.Q5_K: Q.Q5_0, Q.Q6_K: Q.Q8_0}


def quantize(values: np.ndarray, qtype) -> np.ndarray:
    if qtype not in K_QUANTS:
        return quants.quantize(values, qtype)
    writer, shape = K_QUANTS[qtype]
    rows = values.reshape(-1, values.shape[-1]).astype(np.float32)
    blocks = rows.reshape(-1, *shape)
    raw = writer(blocks)
    return raw.reshape(*values.shape[:-1], -1)


def matrix_data(values: np.ndarray, qtype, as_f32: bool):
    # Rows that are no whole number of blocks take another type, as llama.cpp's quantiser falls
    # back to one the row width allows (tiny-qwen35-moe's shared expert down_proj is 48 wide).
    if values.shape[-1] % quants.GGML_QUANT_SIZES[qtype][0] != 0:
        qtype = FALLBACK.get(qtype, Q.BF16)
        if values.shape[-1] % quants.GGML_QUANT_SIZES[qtype][0] != 0:
            qtype = Q.BF16
    data = quantize(values, qtype)
    if as_f32:  # the values the quantised blocks stand for
        return quants.dequantize(data, qtype).astype(np.float32).reshape(values.shape), Q.F32
    return data, qtype


def write(fixture: Path, qtype, out: Path, as_f32: bool = False,
          fused_experts: bool = False) -> Path:
    tc = text_config(fixture)
    suffix = ("-as-F32" if as_f32 else "") + ("-fused-experts" if fused_experts else "")
    name = f"{fixture.name}.{qtype.name}{suffix}.gguf"
    write_model(tc, read_weights(fixture), layer_kinds(tc), qtype, out / name, fixture, as_f32,
                fused_experts)
    return out / name


def write_model(tc: dict, w, kinds: list, qtype, path: Path, tokenizer_from,
                as_f32: bool = False, fused_experts: bool = False) -> None:
    n_k, n_v = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    dk, dv = tc["linear_key_head_dim"], tc["linear_value_head_dim"]
    key_dim = n_k * dk
    order = tiled_order(n_k, n_v) if n_v != n_k else np.arange(n_v)
    moe = "num_experts" in tc
    arch = "qwen35moe" if moe else "qwen35"
    writer = GGUFWriter(str(path), arch)

    writer.add_uint32(f"{arch}.block_count", tc["num_hidden_layers"])
    writer.add_uint32(f"{arch}.context_length", tc["max_position_embeddings"])
    writer.add_uint32(f"{arch}.embedding_length", tc["hidden_size"])
    if moe:
        writer.add_uint32(f"{arch}.expert_count", tc["num_experts"])
        writer.add_uint32(f"{arch}.expert_used_count", tc["num_experts_per_tok"])
        writer.add_uint32(f"{arch}.expert_feed_forward_length", tc["moe_intermediate_size"])
        writer.add_uint32(f"{arch}.expert_shared_feed_forward_length",
                          tc["shared_expert_intermediate_size"])
    else:
        writer.add_uint32(f"{arch}.feed_forward_length", tc["intermediate_size"])
    writer.add_uint32(f"{arch}.attention.head_count", tc["num_attention_heads"])
    writer.add_uint32(f"{arch}.attention.head_count_kv", tc["num_key_value_heads"])
    writer.add_uint32(f"{arch}.attention.key_length", tc["head_dim"])
    writer.add_uint32(f"{arch}.attention.value_length", tc["head_dim"])
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", tc["rms_norm_eps"])
    rope = tc.get("rope_parameters", {})
    partial = rope.get("partial_rotary_factor", tc.get("partial_rotary_factor", 0.25))
    writer.add_float32(f"{arch}.rope.freq_base", rope.get("rope_theta", tc.get("rope_theta")))
    writer.add_uint32(f"{arch}.rope.dimension_count", int(tc["head_dim"] * partial))
    sections = list(rope.get("mrope_section", [])) + [0] * 4
    writer.add_array(f"{arch}.rope.dimension_sections", sections[:4])
    writer.add_uint32(f"{arch}.ssm.conv_kernel", tc["linear_conv_kernel_dim"])
    writer.add_uint32(f"{arch}.ssm.state_size", dk)
    writer.add_uint32(f"{arch}.ssm.group_count", n_k)
    writer.add_uint32(f"{arch}.ssm.time_step_rank", n_v)
    writer.add_uint32(f"{arch}.ssm.inner_size", n_v * dv)
    interval = interval_of(kinds)
    if interval is not None:
        writer.add_uint32(f"{arch}.full_attention_interval", interval)
    else:
        writer.add_array(f"{arch}.attention.recurrent_layers",
                         [k == "linear_attention" for k in kinds])
    if tokenizer_from is not None:
        add_tokenizer(writer, tokenizer_from)

    def matrix(gguf_name, values):
        data, dtype = matrix_data(values.astype(np.float32), qtype, as_f32)
        if dtype == Q.F32:
            writer.add_tensor(gguf_name, np.ascontiguousarray(data))
        else:
            writer.add_tensor(gguf_name, data, raw_dtype=dtype)

    def f32(gguf_name, values):
        writer.add_tensor(gguf_name, np.ascontiguousarray(values, dtype=np.float32))

    def plus_one(values):
        return (values.astype(np.float32) + np.float32(1.0)).astype(np.float32)

    matrix("token_embd.weight", w["embed_tokens.weight"])
    f32("output_norm.weight", plus_one(w["norm.weight"]))
    if "lm_head.weight" in w and not tc.get("tie_word_embeddings", False):
        matrix("output.weight", w["lm_head.weight"])
    for i, kind in enumerate(kinds):
        p, b = f"layers.{i}.", f"blk.{i}."
        f32(b + "attn_norm.weight", plus_one(w[p + "input_layernorm.weight"]))
        f32(b + "post_attention_norm.weight", plus_one(w[p + "post_attention_layernorm.weight"]))
        if kind == "full_attention":
            a = p + "self_attn."
            matrix(b + "attn_q.weight", w[a + "q_proj.weight"])
            matrix(b + "attn_k.weight", w[a + "k_proj.weight"])
            matrix(b + "attn_v.weight", w[a + "v_proj.weight"])
            matrix(b + "attn_output.weight", w[a + "o_proj.weight"])
            f32(b + "attn_q_norm.weight", plus_one(w[a + "q_norm.weight"]))
            f32(b + "attn_k_norm.weight", plus_one(w[a + "k_norm.weight"]))
        else:
            g = p + "linear_attn."
            qkv = w[g + "in_proj_qkv.weight"]
            qkv = np.concatenate([qkv[:2 * key_dim], reorder_heads(qkv[2 * key_dim:], order, dv, 0)])
            matrix(b + "attn_qkv.weight", qkv)
            matrix(b + "attn_gate.weight", reorder_heads(w[g + "in_proj_z.weight"], order, dv, 0))
            matrix(b + "ssm_beta.weight", reorder_heads(w[g + "in_proj_b.weight"], order, 1, 0))
            matrix(b + "ssm_alpha.weight", reorder_heads(w[g + "in_proj_a.weight"], order, 1, 0))
            conv = w[g + "conv1d.weight"][:, 0, :]
            conv = np.concatenate([conv[:2 * key_dim], reorder_heads(conv[2 * key_dim:], order, dv, 0)])
            f32(b + "ssm_conv1d.weight", conv)
            f32(b + "ssm_dt.bias", reorder_heads(w[g + "dt_bias"], order, 1, 0))
            # -exp in float64, rounded once to f32 (what a correctly rounded expf gives).
            a_neg = (-np.exp(w[g + "A_log"].astype(np.float64))).astype(np.float32)
            f32(b + "ssm_a", reorder_heads(a_neg, order, 1, 0))
            f32(b + "ssm_norm.weight", w[g + "norm.weight"])
            matrix(b + "ssm_out.weight", reorder_heads(w[g + "out_proj.weight"], order, dv, 1))
        if moe:
            m = p + "mlp."
            matrix(b + "ffn_gate_inp.weight", w[m + "gate.weight"])
            gate_up = w[m + "experts.gate_up_proj"]
            if fused_experts:
                matrix(b + "ffn_gate_up_exps.weight", gate_up)
            else:
                half = gate_up.shape[1] // 2
                matrix(b + "ffn_gate_exps.weight", gate_up[:, :half])
                matrix(b + "ffn_up_exps.weight", gate_up[:, half:])
            matrix(b + "ffn_down_exps.weight", w[m + "experts.down_proj"])
            matrix(b + "ffn_gate_shexp.weight", w[m + "shared_expert.gate_proj.weight"])
            matrix(b + "ffn_up_shexp.weight", w[m + "shared_expert.up_proj.weight"])
            matrix(b + "ffn_down_shexp.weight", w[m + "shared_expert.down_proj.weight"])
            f32(b + "ffn_gate_inp_shexp.weight", w[m + "shared_expert_gate.weight"].reshape(-1))
            continue
        matrix(b + "ffn_gate.weight", w[p + "mlp.gate_proj.weight"])
        matrix(b + "ffn_up.weight", w[p + "mlp.up_proj.weight"])
        matrix(b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def add_tokenizer(writer: GGUFWriter, fixture: Path) -> None:
    tokenizer = json.loads((fixture / "tokenizer.json").read_text())
    tok_config = json.loads((fixture / "tokenizer_config.json").read_text())
    vocab = dict(tokenizer["model"]["vocab"])
    types = {}
    for added in tokenizer["added_tokens"]:
        vocab[added["content"]] = added["id"]
        types[added["id"]] = TokenType.CONTROL if added["special"] else TokenType.USER_DEFINED
    tokens = [None] * (max(vocab.values()) + 1)
    for text, i in vocab.items():
        tokens[i] = text
    assert all(t is not None for t in tokens), "the fixture vocabulary has gaps"
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([types.get(i, TokenType.NORMAL) for i in range(len(tokens))])
    writer.add_token_merges(merges)
    writer.add_eos_token_id(vocab["<|im_end|>"])
    writer.add_bos_token_id(vocab["<|endoftext|>"])
    writer.add_add_bos_token(False)
    writer.add_chat_template(tok_config["chat_template"])


# Qwen3.5-0.8B's text config (hidden 1024, 24 layers LLLF, 8 / 2 heads of 256, 16 / 16 GDN heads
# of 128, MLP 3584, vocab 248320, tied embeddings).
SHAPE_0_8B = {
    "num_hidden_layers": 24, "hidden_size": 1024, "intermediate_size": 3584,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
    "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "vocab_size": 248320,
    "rms_norm_eps": 1e-6, "max_position_embeddings": 262144, "full_attention_interval": 4,
    "rope_parameters": {"rope_theta": 1e7, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10]},
    "tie_word_embeddings": True,
}


# Qwen3.5-35B-A3B's layer shapes (hidden 2048, 16 / 2 heads of 256, 16 / 32 GDN heads of 128,
# experts 512 wide top-8, shared expert 512) cut to 8 layers (LLLF x 2) and 64 experts so that
# the file stays a few GB; tied embeddings (the release unties them). A token reads what a
# 35B-A3B token reads per layer.
SHAPE_MOE = {
    "num_hidden_layers": 8, "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "vocab_size": 248320, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 262144, "full_attention_interval": 4,
    "rope_parameters": {"rope_theta": 1e7, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10]},
    "tie_word_embeddings": True, "num_experts": 64, "num_experts_per_tok": 8,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
}


class RandomWeights(dict):
    """transformers' tensor names of SHAPE_0_8B, drawn on first use (N(0, 1/fan_in) matrices)."""

    def __init__(self, tc: dict, seed: int):
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.tc = tc

    def __missing__(self, name):
        tc, h = self.tc, self.tc["hidden_size"]
        kd = tc["linear_num_key_heads"] * tc["linear_key_head_dim"]
        vd = tc["linear_num_value_heads"] * tc["linear_value_head_dim"]
        nv = tc["linear_num_value_heads"]
        shapes = {"embed_tokens.weight": (tc["vocab_size"], h), "norm.weight": (h,),
                  "input_layernorm.weight": (h,), "post_attention_layernorm.weight": (h,),
                  "q_proj.weight": (2 * tc["num_attention_heads"] * tc["head_dim"], h),
                  "k_proj.weight": (tc["num_key_value_heads"] * tc["head_dim"], h),
                  "v_proj.weight": (tc["num_key_value_heads"] * tc["head_dim"], h),
                  "o_proj.weight": (h, tc["num_attention_heads"] * tc["head_dim"]),
                  "q_norm.weight": (tc["head_dim"],), "k_norm.weight": (tc["head_dim"],),
                  "in_proj_qkv.weight": (2 * kd + vd, h), "in_proj_z.weight": (vd, h),
                  "in_proj_b.weight": (nv, h), "in_proj_a.weight": (nv, h),
                  "conv1d.weight": (2 * kd + vd, 1, tc["linear_conv_kernel_dim"]),
                  "A_log": (nv,), "dt_bias": (nv,), "norm.weight@gdn": (tc["linear_value_head_dim"],),
                  "out_proj.weight": (h, vd), "gate_proj.weight": (tc.get("intermediate_size", 0), h),
                  "up_proj.weight": (tc.get("intermediate_size", 0), h),
                  "down_proj.weight": (h, tc.get("intermediate_size", 0))}
        if "num_experts" in tc:
            e, i, si = tc["num_experts"], tc["moe_intermediate_size"], tc["shared_expert_intermediate_size"]
            shapes.update({"gate.weight": (e, h), "experts.gate_up_proj": (e, 2 * i, h),
                           "experts.down_proj": (e, h, i),
                           "shared_expert.gate_proj.weight": (si, h),
                           "shared_expert.up_proj.weight": (si, h),
                           "shared_expert.down_proj.weight": (h, si),
                           "shared_expert_gate.weight": (1, h)})
        leaf = name.split(".", 2)[-1] if name.startswith("layers.") else name
        leaf = leaf.split(".", 1)[1] if leaf.startswith(("self_attn.", "linear_attn.", "mlp.")) else leaf
        if name.endswith("linear_attn.norm.weight"):
            leaf = "norm.weight@gdn"
        shape = shapes[leaf]
        scale = 1.0 / np.sqrt(shape[-1]) if len(shape) >= 2 else 0.1
        value = (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))
        if leaf == "norm.weight@gdn":
            value = value + np.float32(1.0)
        return value  # not kept: the writer holds what it needs

    def __contains__(self, name):
        return name != "lm_head.weight"


def write_random(qtype, path: Path, shape: dict = SHAPE_0_8B) -> Path:
    """A bench file of `shape` with random weights, no tokenizer."""
    tc = dict(shape)
    kinds = layer_kinds(tc)
    weights = RandomWeights(tc, 20261203)
    write_model(tc, weights, kinds, qtype, path, tokenizer_from=None)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", type=Path,
                    help="folder of tools/make_qwen38_fixtures.py's fixtures")
    ap.add_argument("--random-0.8b", dest="random", choices=["BF16", "Q8_0", "Q4_0"])
    ap.add_argument("--random-moe", choices=["BF16", "Q8_0", "Q4_0"],
                    help="a qwen35moe bench file of SHAPE_MOE (35B-A3B layers, 8 of them, 64 "
                         "experts), random weights")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    if args.random:
        print(write_random(Q[args.random], args.out))
        return 0
    if args.random_moe:
        print(write_random(Q[args.random_moe], args.out, SHAPE_MOE))
        return 0
    if args.fixtures is None:
        ap.error("--fixtures or --random-0.8b is needed")
    args.out.mkdir(parents=True, exist_ok=True)
    for fixture, qtype in OUTPUTS:
        print(write(args.fixtures / fixture, qtype, args.out))
        if qtype != Q.BF16:
            print(write(args.fixtures / fixture, qtype, args.out, as_f32=True))
    for fixture, qtype in FUSED_EXPERTS:
        print(write(args.fixtures / fixture, qtype, args.out, fused_experts=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
