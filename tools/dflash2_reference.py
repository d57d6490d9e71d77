#!/usr/bin/env python3
"""Float64 reference for the DFlash2 drafter (spec docs: qwen38-dflash2.md sections 11.3-11.6).

An independent numpy transcription of the spec's equations, written from the spec text only:
  context features    ctx_p = RMSNorm_plain(W_fc . concat(taps of p); hidden_norm)      (11.3)
  block conv          prepare / finish of the dynamic grouped causal conv (11.4)
  draft forward       anchor + 7 mask rows at positions s..s+7, per layer: input norm, attention
                      conv, q/k norms, full RoPE (pairs j <-> j + head_dim/2), GQA, bidirectional
                      block attention + context keys with (s+i) - p < sliding_window, o_proj,
                      conv finish, residual; post norm, MLP conv, SwiGLU, conv finish, residual;
                      final norm (11.5)
  logits, selector    target lm_head on rows 1..7, top-k sorted (value descending, ties -> lower
                      id), greedy left-to-right selector walk, and the sampled walk's
                      q_i = softmax(score_i / T) over the K candidates (11.6)

Numerics: the bf16 weights are read as the exact floats they are; every activation is float64 and
never rounded (mode "f64", the golden mode). Mode "bf16" applies R (round to bf16) at the points
where the spec writes R/Lin, as a diagnostic of how far the canonical bf16 pipeline drifts from
the f64 one; its rounding goes f64 -> f32 -> bf16 (round-to-nearest-even at each step), and the
attention output is not rounded before o_proj (S3's choice, which 11.5 allows).

Numpy only (no torch, no safetensors package: this file reads and writes safetensors itself), so
it runs in the light test venv (.venv). Used by tools/gen_dflash2_goldens.py (goldens) and
tools/test_dflash2_reference.py (self-test).
"""

import json
import struct
from pathlib import Path

import numpy as np

# --- safetensors (only the dtypes this project uses) ------------------------------------------

_DTYPES = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "I32": "<i4", "U8": "u1", "BOOL": "u1",
           "BF16": "<u2"}
_WRITE_DTYPES = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32",
                 np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8"}


def bf16_bits_to_f64(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> the exact values as float64."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """Round to the nearest bf16 value (via float32, round-to-nearest-even), returned as float64."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return bf16_bits_to_f64(u.astype(np.uint16))


def read_safetensors(path) -> dict:
    """name -> ndarray. BF16 and F32 tensors come back as float64 (exact), integers as they are."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        a = np.frombuffer(raw[base + begin:base + end], dtype=_DTYPES[info["dtype"]])
        a = a.reshape(info["shape"])
        if info["dtype"] == "BF16":
            a = bf16_bits_to_f64(a)
        elif info["dtype"] in ("F32", "F64"):
            a = a.astype(np.float64)
        else:
            a = a.copy()
        out[name] = a
    return out


def write_safetensors(path, tensors: dict) -> None:
    """tensors: name -> ndarray of float32 / float64 / int32 / int64 / uint8. Names sorted, data
    packed in that order, no __metadata__, header padded with spaces to a multiple of 8. The same
    input always gives the same bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        value = np.ascontiguousarray(tensors[name])
        dtype = _WRITE_DTYPES[value.dtype]
        blob = value.astype(_DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(value.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)


def read_checkpoint(folder) -> dict:
    """All tensors of a model folder (model.safetensors, or the shards of an index)."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    files = (sorted(set(json.loads(index.read_text())["weight_map"].values()))
             if index.exists() else ["model.safetensors"])
    out = {}
    for f in files:
        out.update(read_safetensors(folder / f))
    return out


def target_embedding_and_head(folder) -> tuple:
    """The target's embed_tokens [V, H] and lm_head [V, H] (float64), for either the nested
    (model.language_model.*) or the bare (model.*) naming; a tied head is the embedding."""
    w = read_checkpoint(folder)
    for prefix in ("model.language_model.", "model."):
        if prefix + "embed_tokens.weight" in w:
            embed = w[prefix + "embed_tokens.weight"]
            break
    else:
        raise KeyError("no embed_tokens in " + str(folder))
    head = w.get("lm_head.weight", embed)
    return embed, head


# --- primitive operations (float64; R is the identity in the golden mode) ----------------------


def identity(x):
    return x


def rms_norm_plain(x: np.ndarray, w: np.ndarray, eps: float, R=identity) -> np.ndarray:
    """Qwen3-order RMSNorm over the last axis: R( R(x * r) * w ), r = 1/sqrt(mean x^2 + eps)."""
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return R(R(x * r) * w)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def softmax(x: np.ndarray, axis=-1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def conv_coefficients(x: np.ndarray, w_kp: np.ndarray, kernel: int, R=identity) -> np.ndarray:
    """D = R(LinF(W_kp, x_t)) for every row, viewed [rows][side 0..1][tap][group] (flat index
    side * kernel * groups + tap * groups + group)."""
    rows = x.shape[0]
    d = R(x @ w_kp.T)
    return d.reshape(rows, 2, kernel, -1)


def grouped_conv(x: np.ndarray, base: np.ndarray, dyn: np.ndarray, group_size: int,
                 R=identity) -> np.ndarray:
    """One side of the dynamic grouped causal conv along the block:
    out[t][c] = sum_tap (base[tap][c] + dyn[t][tap][c // group_size]) * x[t - tap][c],
    rows before 0 are zero. x [rows, C], base [kernel, C], dyn [rows, kernel, groups]."""
    rows, _ = x.shape
    kernel = base.shape[0]
    coef = base[None, :, :] + np.repeat(dyn, group_size, axis=2)      # [rows, kernel, C]
    out = np.zeros_like(x)
    for tap in range(kernel):
        shifted = np.zeros_like(x)
        shifted[tap:] = x[:rows - tap]
        out += coef[:, tap, :] * shifted
    return R(out)


def rope(x: np.ndarray, positions: np.ndarray, theta: float, R=identity) -> np.ndarray:
    """Full rotary over the last axis (D = head_dim), rotate-half pairing j <-> j + D/2:
    inv_j = theta^(-2j/D), a = p * inv_j. x [n, heads, D], positions [n]."""
    d = x.shape[-1]
    half = d // 2
    inv = theta ** (-(2.0 * np.arange(half)) / d)
    ang = positions.astype(np.float64)[:, None] * inv[None, :]          # [n, half]
    c = R(np.cos(ang))[:, None, :]
    s = R(np.sin(ang))[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([R(x1 * c - x2 * s), R(x2 * c + x1 * s)], axis=-1)


def context_visible(s: int, block: int, ctx_len: int, window: int) -> np.ndarray:
    """[block, ctx_len] bool: query row i (position s+i) sees context position p iff
    (s + i) - p < window. Block keys are always visible (bidirectional)."""
    q = s + np.arange(block)[:, None]
    p = np.arange(ctx_len)[None, :]
    return (q - p) < window


def topk_sorted(logits: np.ndarray, k: int) -> tuple:
    """(values, ids) of the k largest, sorted by value descending, ties -> lower id."""
    order = np.lexsort((np.arange(logits.shape[-1]), -logits))[:k]
    return logits[order], order.astype(np.int64)


# --- the drafter --------------------------------------------------------------------------------


class DFlash2Reference:
    """The DFlash2 drafter of spec section 11 in float64 (mode "f64") or with the spec's bf16
    rounding points (mode "bf16"). weights: the drafter's tensors (section 11.2 names); embed and
    lm_head: the target's [vocab, hidden] matrices."""

    def __init__(self, config: dict, weights: dict, embed: np.ndarray, lm_head: np.ndarray,
                 mode: str = "f64"):
        if mode not in ("f64", "bf16"):
            raise ValueError(mode)
        self.mode = mode
        self.R = bf16_round if mode == "bf16" else identity
        dc = config["dflash_config"]
        self.H = config["hidden_size"]
        self.layers = config["num_hidden_layers"]
        self.nh = config["num_attention_heads"]
        self.nkv = config["num_key_value_heads"]
        self.hd = config["head_dim"]
        self.eps = config["rms_norm_eps"]
        rope_params = config.get("rope_parameters") or {}
        self.theta = float(rope_params.get("rope_theta", config.get("rope_theta", 10000.0)))
        self.window = config["sliding_window"]
        if config.get("is_causal", False):
            raise ValueError("is_causal true is refused (spec 13 item 9)")
        self.block = dc["block_size"]
        self.mask_id = dc["mask_token_id"]
        self.kernel = dc["conv_kernel_size"]
        self.group = dc["conv_group_size"]
        self.top_k = dc["selector_top_k"]
        self.rank = dc["selector_rank"]
        self.tap_ids = list(dc["target_layer_ids"])
        if self.H % self.group:
            raise ValueError("hidden_size % conv_group_size != 0")
        for key, default in (("output_multiplier", 1.0), ("final_logit_softcapping", None),
                             ("input_embedding_scale", 1.0)):
            if dc.get(key, default) != default:
                raise ValueError("non-default dflash_config." + key + " is not implemented")
        self.w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
        self.embed = np.asarray(embed, dtype=np.float64)
        self.lm_head = np.asarray(lm_head, dtype=np.float64)

    @classmethod
    def from_dirs(cls, draft_dir, target_dir, mode: str = "f64") -> "DFlash2Reference":
        config = json.loads((Path(draft_dir) / "config.json").read_text())
        weights = read_checkpoint(draft_dir)
        embed, head = target_embedding_and_head(target_dir)
        return cls(config, weights, embed, head, mode)

    def lin(self, x: np.ndarray, name: str) -> np.ndarray:
        """Lin(W, x) = R(W . x) over the last axis of x."""
        return self.R(x @ self.w[name].T)

    # 11.3
    def context_features(self, taps: np.ndarray) -> np.ndarray:
        """taps [P, len(target_layer_ids), H] (the post-layer residuals of the tapped layers, in
        target_layer_ids order) -> ctx [P, H]."""
        f = taps.reshape(taps.shape[0], -1)
        return rms_norm_plain(self.R(f @ self.w["fc.weight"].T), self.w["hidden_norm.weight"],
                              self.eps, self.R)

    # 11.4
    def conv_prepare(self, x: np.ndarray, prefix: str) -> tuple:
        d = conv_coefficients(x, self.w[prefix + "kernel_projection.weight"], self.kernel, self.R)
        xc = grouped_conv(x, self.w[prefix + "base_kernel"][0], d[:, 0], self.group, self.R)
        return xc, d[:, 1], d

    def conv_finish(self, o: np.ndarray, d1: np.ndarray, prefix: str) -> np.ndarray:
        return grouped_conv(o, self.w[prefix + "base_kernel"][1], d1, self.group, self.R)

    # 11.5
    def attention(self, xc: np.ndarray, ctx: np.ndarray, s: int, p: str, tr: dict) -> np.ndarray:
        B, nh, nkv, hd, R = xc.shape[0], self.nh, self.nkv, self.hd, self.R
        q = self.lin(xc, p + "q_proj.weight").reshape(B, nh, hd)
        kb = self.lin(xc, p + "k_proj.weight").reshape(B, nkv, hd)
        vb = self.lin(xc, p + "v_proj.weight").reshape(B, nkv, hd)
        kc = self.lin(ctx, p + "k_proj.weight").reshape(s, nkv, hd)
        vc = self.lin(ctx, p + "v_proj.weight").reshape(s, nkv, hd)
        q = rms_norm_plain(q, self.w[p + "q_norm.weight"], self.eps, R)
        k = rms_norm_plain(np.concatenate([kc, kb]), self.w[p + "k_norm.weight"], self.eps, R)
        v = np.concatenate([vc, vb])
        qpos = s + np.arange(B)
        kpos = np.concatenate([np.arange(s), qpos])
        q = rope(q, qpos, self.theta, R)
        k = rope(k, kpos, self.theta, R)
        visible = np.concatenate(
            [context_visible(s, B, s, self.window), np.ones((B, B), dtype=bool)], axis=1)
        group = nh // nkv
        kh = np.repeat(k, group, axis=1)                        # [keys, nh, hd], head h -> h//group
        vh = np.repeat(v, group, axis=1)
        scores = np.einsum("ihd,jhd->hij", q, kh) * hd ** -0.5  # [nh, B, keys]
        scores = np.where(visible[None], scores, -np.inf)
        probs = softmax(scores, axis=-1)
        out = np.einsum("hij,jhd->ihd", probs, vh).reshape(B, nh * hd)
        if tr is not None:
            tr.update({"q": q, "k_ctx": k[:s], "v_ctx": v[:s], "k_block": k[s:], "v_block": v[s:],
                       "probs": probs, "attn": out})
        return out

    def forward(self, anchor: int, s: int, ctx: np.ndarray, trace: bool = False,
                block_embeddings: np.ndarray = None) -> dict:
        """One draft round: anchor at position s, context ctx[0:s] (ctx_p rows). Returns
        {"h": [layers + 1, block, H] residual stream (input rows, then after each layer),
        "hf": [block, H] final-norm output (row 0 included, it is discarded downstream),
        "trace": per-layer intermediates if trace}."""
        if ctx.shape[0] < s:
            raise ValueError("need ctx rows for positions 0..s-1")
        ctx = np.asarray(ctx[:s], dtype=np.float64)
        if block_embeddings is None:
            ids = [anchor] + [self.mask_id] * (self.block - 1)
            h = self.embed[ids].copy()
        else:
            h = np.asarray(block_embeddings, dtype=np.float64).copy()
        hs, traces = [h], []
        R, eps = self.R, self.eps
        for layer in range(self.layers):
            p = "layers.%d." % layer
            tr = {} if trace else None
            x = rms_norm_plain(h, self.w[p + "input_layernorm.weight"], eps, R)
            xc, d1, d_attn = self.conv_prepare(x, p + "attention_conv.")
            att = self.attention(xc, ctx, s, p + "self_attn.", tr)
            a = R(att @ self.w[p + "self_attn.o_proj.weight"].T)
            af = self.conv_finish(a, d1, p + "attention_conv.")
            h_mid = R(h + af)
            x2 = rms_norm_plain(h_mid, self.w[p + "post_attention_layernorm.weight"], eps, R)
            mc, d1m, d_mlp = self.conv_prepare(x2, p + "mlp_conv.")
            gate = self.lin(mc, p + "mlp.gate_proj.weight")
            up = self.lin(mc, p + "mlp.up_proj.weight")
            m = self.lin(R(R(silu(gate)) * up), p + "mlp.down_proj.weight")
            mf = self.conv_finish(m, d1m, p + "mlp_conv.")
            h = R(h_mid + mf)
            hs.append(h)
            if trace:
                tr.update({"x": x, "d_attn": d_attn, "xc": xc, "o_proj": a, "attn_conv_out": af,
                           "h_mid": h_mid, "x2": x2, "d_mlp": d_mlp, "mc": mc, "mlp_out": m,
                           "mlp_conv_out": mf, "h": h})
                traces.append(tr)
        hf = rms_norm_plain(h, self.w["norm.weight"], eps, R)
        out = {"h": np.stack(hs), "hf": hf}
        if trace:
            out["trace"] = traces
        return out

    # 11.6
    def logits(self, eta: np.ndarray) -> np.ndarray:
        """LinF(target lm_head, eta) (never rounded)."""
        return eta @ self.lm_head.T

    def selector_projection(self, eta: np.ndarray) -> np.ndarray:
        """rho = LinF(W_sel, eta) (never rounded)."""
        return eta @ self.w["candidate_selector.hidden_projection.weight"].T

    def step_scores(self, prev: int, u: np.ndarray, c: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """score[k] = u[k] + sum_r Pcb[prev][r] * rho[r] * Scb[c[k]][r]."""
        pcb = self.w["candidate_selector.predecessor_codebook"]
        scb = self.w["candidate_selector.successor_codebook"]
        return u + scb[c] @ (pcb[prev] * rho)

    def walk(self, anchor: int, u: np.ndarray, c: np.ndarray, rho: np.ndarray,
             choices=None) -> tuple:
        """The selector walk over the drafted rows. choices None: greedy (first maximum of the
        scores at each step). Otherwise the given candidate indices are taken (a sampled walk
        replayed). Returns (k [n], tokens [n], scores [n, K])."""
        prev, ks, toks, scores = anchor, [], [], []
        for i in range(u.shape[0]):
            sc = self.step_scores(prev, u[i], c[i], rho[i])
            k = int(np.argmax(sc)) if choices is None else int(choices[i])
            prev = int(c[i][k])
            ks.append(k)
            toks.append(prev)
            scores.append(sc)
        return np.array(ks), np.array(toks), np.stack(scores)

    def sampled_walk(self, anchor: int, u: np.ndarray, c: np.ndarray, rho: np.ndarray,
                     temperature: float, uniforms: np.ndarray) -> tuple:
        """Sampled walk (T > 0): at step i, q_i = softmax(score_i / T) over the K candidates and
        k* = the first k with cumsum(q_i)[k] > uniforms[i] (inverse CDF). Returns
        (k [n], tokens [n], scores [n, K], q [n, K])."""
        prev, ks, toks, scores, qs = anchor, [], [], [], []
        for i in range(u.shape[0]):
            sc = self.step_scores(prev, u[i], c[i], rho[i])
            q = softmax(sc / temperature)
            k = min(int(np.searchsorted(np.cumsum(q), uniforms[i], side="right")), len(q) - 1)
            prev = int(c[i][k])
            ks.append(k)
            toks.append(prev)
            scores.append(sc)
            qs.append(q)
        return np.array(ks), np.array(toks), np.stack(scores), np.stack(qs)

    def draft_round(self, anchor: int, s: int, ctx: np.ndarray, temperature: float = None,
                    uniforms: np.ndarray = None, trace: bool = False) -> dict:
        """Forward + logits of rows 1..block-1 + top-k + greedy walk (+ sampled walk)."""
        fw = self.forward(anchor, s, ctx, trace=trace)
        eta = fw["hf"][1:]
        logits = self.logits(eta)
        tops = [topk_sorted(row, self.top_k) for row in logits]
        u = np.stack([t[0] for t in tops])
        c = np.stack([t[1] for t in tops])
        rho = self.selector_projection(eta)
        gk, gtok, gscores = self.walk(anchor, u, c, rho)
        out = dict(fw, logits=logits, topk_values=u, topk_ids=c, rho=rho, greedy_k=gk,
                   greedy_path=gtok, greedy_scores=gscores)
        if temperature is not None:
            sk, stok, sscores, sq = self.sampled_walk(anchor, u, c, rho, temperature, uniforms)
            out.update(sampled_k=sk, sampled_path=stok, sampled_scores=sscores, sampled_q=sq,
                       greedy_q=softmax(gscores / temperature, axis=-1))
        return out
