#!/usr/bin/env python3
"""Float64 reference for the DSpark drafter (spec: docs/models/kimi-k3-dspark.md §13.3–§13.6).

One transcription serves the drafters of both target families in tools/make_dspark_fixtures.py:
DSpark for Muse Spark follows the same §13 structure on Muse's target (the drafter has its own
embedding and lm_head; the target only fixes the hidden size, the vocabulary and the tap range).

An independent numpy transcription of the spec's equations, written from the spec text only:
  context features  ctx_p = RMSNorm(fc · concat(taps of p), hidden_norm)                  (13.3)
  context K/V       per layer, K_p = RoPE(RMSNorm_head(Wk · ctx_p, k_norm), p),
                    V_p = Wv · ctx_p (no input_layernorm on ctx); the ring is kept exactly:
                    the block sees every context position p with N − W <= p < N          (13.4)
  block forward     rows j = 0…B−1 = [anchor, mask, …, mask] at positions N + j; per layer
                    input norm, q/k/v, q/k per-head norms, RoPE, GQA (q head h reads kv head
                    h // group), keys = visible context + block rows i <= j (causal),
                    softmax(q·k / sqrt(head_dim)), o_proj, residual; post norm, SwiGLU MLP,
                    residual; final norm; base_j = lm_head · hid_j                          (13.5)
  Markov chain      prev = anchor; for k = 0…B−2: logits_k = base_k + markov_w2 · markov_w1[prev],
                    D_k = argmax (ties -> lowest id), prev = D_k                            (13.6)
  draft vocabulary  where draft_vocab_size < vocab_size: lm_head and markov_w2 have a row per draft
                    id, the argmax is a draft id d, the draft is the target id d + d2t[d] (and
                    the next prev is that target id); a checkpoint without embed_tokens embeds
                    with its target's table (speculators saves none)
  confidence        where the config enables the head: conf_k = σ(proj · [hid_k ; markov_w1[prev_k]]
                    + bias) with prev_k the token of slot k's Markov bias, or σ(proj · hid_k +
                    bias) when confidence_head_with_markov is false                        (13.7)
Here RMSNorm(x, w) = x / sqrt(mean(x²) + eps) · w with eps = rms_norm_eps, and RoPE is neox
rotate-half over the whole head_dim d: inv_i = theta^(−2i/d) (i < d/2), angle = p · inv_i, cos and
sin duplicated over both halves, RoPE(x) = x·cos + [−x[d/2:], x[:d/2]]·sin.

"House numerics": the bf16 weights are read as the exact values they are, every activation is
float64, and none of the spec's bf16(·) roundings of activations is applied.

Taps (the drafter's input, §13.3) are not stored: they follow a formula the C++ tests
reproduce. For context position p, tap i (config order, T taps) and channel c of H:
  index = (p·T + i)·H + c,  tap = float32( ((index · 2654435761) mod 2^32) / 2^32 − 0.5 )
(integer arithmetic, then float64, then one rounding to float32).

Goldens (tests/goldens/dspark/<fixture>.json): for each fixture a context of N positions, N larger
than the window W so that the oldest positions fall out of it (dspark-kimi-k3-tiny N = 20, W = 16;
dspark-kimi-k3-small N = 13, W = 8; dspark-muse-spark-tiny N = 11, W = 6; dspark-muse-spark-small
N = 16, W = 10), the block for one anchor at position N, the drafts D_0…D_{B−2}, the logits they
are argmaxes of, and two negative controls computed by deliberately wrong formulas (a
bidirectional block; no Markov bias). Floats are stored as float32 (shortest decimals).

Numpy only (the .venv). Usage:
  dspark_reference.py --fixtures DIR --out tests/goldens/dspark     # write the goldens
  dspark_reference.py --fixtures DIR --check [--goldens tests/goldens/dspark]   # self-test
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash2_reference import read_safetensors  # noqa: E402  (exact bf16 -> float64 reader)

REPO = Path(__file__).resolve().parent.parent

# fixture -> (context length N, anchor token). N exceeds the window on every fixture.
CASES = {
    "dspark-kimi-k3-tiny": dict(context_length=20, anchor=123),
    "dspark-kimi-k3-small": dict(context_length=13, anchor=77),
    "dspark-muse-spark-tiny": dict(context_length=11, anchor=250),
    "dspark-muse-spark-small": dict(context_length=16, anchor=77),
    "dspark-kimi-k3-draftvocab": dict(context_length=19, anchor=321),
}

TAPS_FORMULA = ("tap[p][i][c] = float32(((((p*T + i)*H + c) * 2654435761) mod 2^32) / 2^32 - 0.5), "
                "T = number of taps (config order), H = hidden_size, p = context position")


# --- inputs --------------------------------------------------------------------------------------


def make_taps(n: int, taps: int, hidden: int) -> np.ndarray:
    """[n, taps, hidden] float64 values of float32 numbers (the formula in the docstring)."""
    index = np.arange(n * taps * hidden, dtype=np.uint64)
    hashed = (index * np.uint64(2654435761)) % np.uint64(1 << 32)    # < 2^64: no overflow here
    value = hashed.astype(np.float64) / float(1 << 32) - 0.5           # exact in float64
    return value.astype(np.float32).astype(np.float64).reshape(n, taps, hidden)


# --- primitives (float64) ------------------------------------------------------------------------


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Over the last axis: x / sqrt(mean(x²) + eps) · w."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """Neox rotate-half over the whole last axis. x [n, heads, d], positions [n]."""
    d = x.shape[-1]
    inv = theta ** (-2.0 * np.arange(d // 2) / d)
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], axis=-1)[:, None, :]
    rot = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos + rot * sin


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def argmax_lowest(x: np.ndarray) -> int:
    """argmax with ties to the lowest index (numpy's argmax returns the first maximum)."""
    return int(np.argmax(x))


# --- the drafter ---------------------------------------------------------------------------------


class DSparkReference:
    """One drafter folder (config.json + model.safetensors), weights as exact float64."""

    def __init__(self, folder, target_folder=None):
        folder = Path(folder)
        top = json.loads((folder / "config.json").read_text())
        c = top["transformer_layer_config"]
        self.hidden = c["hidden_size"]
        self.layers = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c["num_key_value_heads"]
        self.head_dim = c["head_dim"]
        self.vocab = c["vocab_size"]
        self.window = c["sliding_window"]
        self.theta = float(c["rope_parameters"]["rope_theta"])
        self.eps = float(c["rms_norm_eps"])
        self.tap_ids = list(top["aux_hidden_state_layer_ids"])
        self.mask_token = top["mask_token_id"]
        self.rank = top["markov_rank"]
        self.block = top["block_size"]
        # speculators' defaults: a confidence head over [hidden ; markov_w1[prev]]
        self.confidence = top.get("enable_confidence_head", True)
        self.confidence_with_markov = (self.confidence and
                                       top.get("confidence_head_with_markov", True))
        self.w = read_safetensors(folder / "model.safetensors")
        if "embed_tokens.weight" not in self.w:
            self.w["embed_tokens.weight"] = target_embedding(target_folder)
        self.draft_vocab = top.get("draft_vocab_size", self.vocab)
        # draft id -> target id
        self.to_target = (np.arange(self.draft_vocab) + self.w["d2t"]
                          if self.draft_vocab != self.vocab else np.arange(self.vocab))

    def layer(self, l: int, name: str) -> np.ndarray:
        return self.w[f"layers.{l}.{name}.weight"]

    # §13.3
    def context_features(self, taps: np.ndarray) -> np.ndarray:
        """taps [n, T, H] -> ctx [n, H]; the concatenation index is tap·H + c."""
        flat = taps.reshape(taps.shape[0], -1)
        return rms_norm(flat @ self.w["fc.weight"].T, self.w["hidden_norm.weight"], self.eps)

    def heads_norm_rope(self, y: np.ndarray, heads: int, norm_w: np.ndarray,
                        positions: np.ndarray) -> np.ndarray:
        """[n, heads·d] projection -> per-head RMSNorm -> RoPE at `positions`: [n, heads, d]."""
        y = y.reshape(y.shape[0], heads, self.head_dim)
        return rope(rms_norm(y, norm_w, self.eps), positions, self.theta)

    # §13.4
    def context_kv(self, ctx: np.ndarray) -> list:
        """Per layer (K [n, kv, d], V [n, kv, d]) of context rows at positions 0…n−1."""
        positions = np.arange(ctx.shape[0])
        out = []
        for l in range(self.layers):
            k = self.heads_norm_rope(ctx @ self.layer(l, "self_attn.k_proj").T, self.kv_heads,
                                     self.layer(l, "self_attn.k_norm"), positions)
            v = (ctx @ self.layer(l, "self_attn.v_proj").T).reshape(-1, self.kv_heads,
                                                                   self.head_dim)
            out.append((k, v))
        return out

    def visible_context(self, n: int) -> np.ndarray:
        """Context positions the block sees for anchor_pos = n: max(0, n − W) <= p < n."""
        return np.arange(max(0, n - self.window), n)

    # §13.5
    def block_forward(self, anchor: int, n: int, kv: list, rows: int = None,
                      causal: bool = True) -> np.ndarray:
        """base logits [rows, V] of the block [anchor, mask, …] at positions n, n+1, …
        `causal=False` is the negative control (every row sees every block row)."""
        return self.block_hidden(anchor, n, kv, rows, causal) @ self.w["lm_head.weight"].T

    def block_hidden(self, anchor: int, n: int, kv: list, rows: int = None,
                     causal: bool = True) -> np.ndarray:
        """hid [rows, H]: the block's rows after the final norm (lm_head's and the confidence
        head's input)."""
        rows = self.block if rows is None else rows
        tokens = [anchor] + [self.mask_token] * (rows - 1)
        positions = n + np.arange(rows)
        visible = self.visible_context(n)
        group = self.heads // self.kv_heads
        x = self.w["embed_tokens.weight"][tokens].copy()                  # [rows, H]
        allowed = np.tril(np.ones((rows, rows), bool)) if causal else np.ones((rows, rows), bool)
        for l in range(self.layers):
            h = rms_norm(x, self.layer(l, "input_layernorm"), self.eps)
            q = self.heads_norm_rope(h @ self.layer(l, "self_attn.q_proj").T, self.heads,
                                     self.layer(l, "self_attn.q_norm"), positions)
            k = self.heads_norm_rope(h @ self.layer(l, "self_attn.k_proj").T, self.kv_heads,
                                     self.layer(l, "self_attn.k_norm"), positions)
            v = (h @ self.layer(l, "self_attn.v_proj").T).reshape(rows, self.kv_heads,
                                                                 self.head_dim)
            ck, cv = kv[l]
            keys = np.concatenate([ck[visible], k], axis=0)              # [m + rows, kv, d]
            values = np.concatenate([cv[visible], v], axis=0)
            mask = np.concatenate([np.ones((rows, len(visible)), bool), allowed], axis=1)
            o = np.empty((rows, self.heads, self.head_dim))
            for head in range(self.heads):
                g = head // group
                s = q[:, head, :] @ keys[:, g, :].T / np.sqrt(self.head_dim)   # [rows, keys]
                s = np.where(mask, s, -np.inf)
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                o[:, head, :] = p @ values[:, g, :]
            x = x + o.reshape(rows, -1) @ self.layer(l, "self_attn.o_proj").T
            h = rms_norm(x, self.layer(l, "post_attention_layernorm"), self.eps)
            a = silu(h @ self.layer(l, "mlp.gate_proj").T) * (h @ self.layer(l, "mlp.up_proj").T)
            x = x + a @ self.layer(l, "mlp.down_proj").T
        return rms_norm(x, self.w["norm.weight"], self.eps)

    # §13.6
    def markov_bias(self, prev: int) -> np.ndarray:
        return self.w["markov_head.markov_w2.weight"] @ self.w["markov_head.markov_w1.weight"][prev]

    def markov_chain(self, base: np.ndarray, anchor: int) -> tuple:
        """(drafts [B−1] as target ids, logits [B−1, draft vocabulary]) from base rows 0…B−2."""
        prev, drafts, logits = anchor, [], []
        for k in range(self.block - 1):
            row = base[k] + self.markov_bias(prev)
            prev = int(self.to_target[argmax_lowest(row)])
            drafts.append(prev)
            logits.append(row)
        return drafts, np.array(logits)

    # §13.7
    def confidences(self, hid: np.ndarray, prevs: list) -> np.ndarray:
        """conf_k for rows k of hid, prevs[k] the token of slot k's Markov bias."""
        w = self.w["confidence_head.proj.weight"][0]
        b = self.w["confidence_head.proj.bias"][0]
        out = []
        for k, prev in enumerate(prevs):
            features = hid[k]
            if self.confidence_with_markov:
                features = np.concatenate([features, self.w["markov_head.markov_w1.weight"][prev]])
            out.append(1.0 / (1.0 + np.exp(-(features @ w + b))))
        return np.array(out)

    def draft(self, taps: np.ndarray, anchor: int) -> dict:
        """Everything the goldens hold, for a context of taps [n, T, H] and the anchor."""
        n = taps.shape[0]
        kv = self.context_kv(self.context_features(taps))
        hid = self.block_hidden(anchor, n, kv)
        base = hid @ self.w["lm_head.weight"].T
        drafts, logits = self.markov_chain(base, anchor)
        confidences = (self.confidences(hid, [anchor] + drafts[:-1]) if self.confidence
                       else None)
        bidir_base = self.block_forward(anchor, n, kv, causal=False)
        _, logits_bidir = self.markov_chain(bidir_base, anchor)
        return dict(drafts=drafts, logits=logits, logits_bidirectional=logits_bidir,
                    logits_without_markov=base[:self.block - 1], confidences=confidences)


# --- goldens -------------------------------------------------------------------------------------


def reference_of(fixtures: Path, name: str) -> DSparkReference:
    """The drafter `name`, with its target fixture beside it (for a drafter without embed_tokens;
    the Kimi and Muse fixture folders: make_kimi_fixtures.py / make_musespark_fixtures.py)."""
    target = json.loads((fixtures / name / "config.json").read_text())["speculators_config"][
        "verifier"]["name_or_path"]
    return DSparkReference(fixtures / name, fixtures / target)


def target_embedding(target_folder) -> np.ndarray:
    """The target checkpoint's embedding table (a drafter saved without its own)."""
    for path in sorted(Path(target_folder).glob("*.safetensors")):
        for name, value in read_safetensors(path).items():
            if name.endswith("embed_tokens.weight"):
                return value
    raise FileNotFoundError(f"no embed_tokens.weight under {target_folder}")


def f32(x) -> float:
    """The float32 value of x as the float whose repr is float32's shortest decimal."""
    return float(str(np.float32(x)))


def top2_gaps(logits: np.ndarray) -> list:
    top = np.sort(logits, axis=1)[:, -2:]
    return [float(g) for g in top[:, 1] - top[:, 0]]


def compute_case(fixtures: Path, name: str) -> dict:
    case = CASES[name]
    folder = fixtures / name
    ref = reference_of(fixtures, name)
    n, anchor = case["context_length"], case["anchor"]
    out = ref.draft(make_taps(n, len(ref.tap_ids), ref.hidden), anchor)
    logits = out["logits"]
    max_abs = float(np.abs(logits).max())
    return {
        "fixture": name,
        "generator": "tools/dspark_reference.py",
        "reference": "float64 transcription of kimi-k3-dspark.md sections 13.3-13.6 "
                     "(bf16 weights exact, float64 activations, no activation rounding, "
                     "ring kept exactly); stored as float32",
        "fixture_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                           for p in sorted(folder.iterdir()) if p.is_file()},
        "taps_formula": TAPS_FORMULA,
        "target": json.loads((folder / "config.json").read_text())["speculators_config"][
            "verifier"]["name_or_path"],
        "aux_hidden_state_layer_ids": ref.tap_ids,
        "hidden_size": ref.hidden,
        "vocab_size": ref.vocab,
        "draft_vocab_size": ref.draft_vocab,
        "block_size": ref.block,
        "mask_token_id": ref.mask_token,
        "context_length": n,
        "anchor": anchor,
        "anchor_position": n,
        "window": ref.window,
        "visible_context": [int(ref.visible_context(n)[0]), n],
        "drafts": out["drafts"],
        "confidence_head": ("with_markov" if ref.confidence_with_markov else "hidden_only")
                           if ref.confidence else None,
        "confidences": None if out["confidences"] is None
                       else [f32(c) for c in out["confidences"]],
        "max_abs_logit": f32(max_abs),
        "top2_gaps": [f32(g) for g in top2_gaps(logits)],
        "max_abs_diff_bidirectional":
            f32(np.abs(out["logits_bidirectional"] - logits).max()),
        "max_abs_diff_without_markov":
            f32(np.abs(out["logits_without_markov"] - logits).max()),
        "logits": [[f32(v) for v in row] for row in logits],
        "logits_bidirectional": [[f32(v) for v in row] for row in out["logits_bidirectional"]],
        "logits_without_markov": [[f32(v) for v in row] for row in out["logits_without_markov"]],
    }


def dumps(value, indent: int = 0) -> str:
    """JSON with every list of numbers on one line (a logits row is one line)."""
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {dumps(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list) and value and all(isinstance(v, (list, dict)) for v in value):
        items = [pad + dumps(v, indent + 2) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value)


def write_goldens(fixtures: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for name in CASES:
        g = compute_case(fixtures, name)
        (out / f"{name}.json").write_text(dumps(g) + "\n")
        m, bidir, plain = (g["max_abs_logit"], g["max_abs_diff_bidirectional"],
                           g["max_abs_diff_without_markov"])
        print(f"{name}: drafts {g['drafts']}, max |logit| {m:.4g}, "
              f"min top-2 gap {min(g['top2_gaps']):.4g} ({min(g['top2_gaps']) / m:.3g} of max), "
              f"bidirectional differs by {bidir:.4g} ({bidir / m:.3g}), "
              f"without Markov by {plain:.4g} ({plain / m:.3g})")
    return 0


# --- self-test -----------------------------------------------------------------------------------


def naive_block(ref: DSparkReference, anchor: int, n: int, taps: np.ndarray) -> np.ndarray:
    """The block's base logits [B, V], recomputed the slow way: scalar loops over heads and keys,
    the context K/V and the block's rows rebuilt per layer, one row vector at a time."""
    ctx = ref.context_features(taps)
    tokens = [anchor] + [ref.mask_token] * (ref.block - 1)
    xs = [ref.w["embed_tokens.weight"][t].copy() for t in tokens]
    group = ref.heads // ref.kv_heads
    d = ref.head_dim

    def proj_heads(W, vec, heads, norm_w, pos):
        y = (W @ vec).reshape(heads, d)
        y = y / np.sqrt((y * y).mean(axis=1, keepdims=True) + ref.eps) * norm_w
        out = np.empty_like(y)
        for i in range(d // 2):
            a = pos * ref.theta ** (-2.0 * i / d)
            c, s = np.cos(a), np.sin(a)
            out[:, i] = y[:, i] * c - y[:, i + d // 2] * s
            out[:, i + d // 2] = y[:, i + d // 2] * c + y[:, i] * s
        return out

    for l in range(ref.layers):
        W = {nm: ref.layer(l, nm) for nm in ("self_attn.q_proj", "self_attn.k_proj",
                                             "self_attn.v_proj", "self_attn.o_proj",
                                             "self_attn.q_norm", "self_attn.k_norm",
                                             "input_layernorm", "post_attention_layernorm",
                                             "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
        keys, vals = [], []
        for p in range(max(0, n - ref.window), n):
            keys.append(proj_heads(W["self_attn.k_proj"], ctx[p], ref.kv_heads,
                                   W["self_attn.k_norm"], p))
            vals.append((W["self_attn.v_proj"] @ ctx[p]).reshape(ref.kv_heads, d))
        hs = [x / np.sqrt((x * x).mean() + ref.eps) * W["input_layernorm"] for x in xs]
        for i, h in enumerate(hs):
            keys.append(proj_heads(W["self_attn.k_proj"], h, ref.kv_heads, W["self_attn.k_norm"],
                                   n + i))
            vals.append((W["self_attn.v_proj"] @ h).reshape(ref.kv_heads, d))
        new = []
        for i, (x, h) in enumerate(zip(xs, hs)):
            q = proj_heads(W["self_attn.q_proj"], h, ref.heads, W["self_attn.q_norm"], n + i)
            seen = len(keys) - len(xs) + i + 1                            # context + rows 0…i
            o = np.zeros((ref.heads, d))
            for head in range(ref.heads):
                g = head // group
                scores = [sum(q[head, c] * keys[t][g, c] for c in range(d)) / np.sqrt(d)
                          for t in range(seen)]
                top = max(scores)
                e = [np.exp(s - top) for s in scores]
                total = sum(e)
                for t in range(seen):
                    o[head] += e[t] / total * vals[t][g]
            x = x + W["self_attn.o_proj"] @ o.reshape(-1)
            h2 = x / np.sqrt((x * x).mean() + ref.eps) * W["post_attention_layernorm"]
            gate = W["mlp.gate_proj"] @ h2
            a = gate / (1.0 + np.exp(-gate)) * (W["mlp.up_proj"] @ h2)
            new.append(x + W["mlp.down_proj"] @ a)
        xs = new
    return np.array([ref.w["lm_head.weight"] @
                     (x / np.sqrt((x * x).mean() + ref.eps) * ref.w["norm.weight"]) for x in xs])


def self_test(fixtures: Path, goldens: Path = None) -> int:
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((1, 2, 16)), rng.standard_normal((1, 2, 16))
    check(np.allclose(np.linalg.norm(rope(q, [37], 1e4), axis=-1), np.linalg.norm(q, axis=-1),
                      rtol=1e-14), "rope keeps norms")
    check(np.allclose(np.sum(rope(q, [3], 1e4) * rope(k, [7], 1e4), -1),
                      np.sum(rope(q, [13], 1e4) * rope(k, [17], 1e4), -1), rtol=1e-12),
          "rope scores depend on relative positions only")
    taps = make_taps(2, 3, 4)
    check(taps[0, 0, 0] == -0.5 and taps[0, 0, 1] == np.float32(2654435761 / 2 ** 32 - 0.5),
          "taps formula (index 0 and 1)")

    for name, case in CASES.items():
        ref = reference_of(fixtures, name)
        n, anchor = case["context_length"], case["anchor"]
        taps = make_taps(n, len(ref.tap_ids), ref.hidden)
        kv = ref.context_kv(ref.context_features(taps))
        base = ref.block_forward(anchor, n, kv)
        diff = np.abs(naive_block(ref, anchor, n, taps) - base).max()
        check(diff < 1e-12 * np.abs(base).max(),
              f"{name}: the block equals the scalar-loop recomputation (max diff {diff:.2g})")
        drafts, logits = ref.markov_chain(base, anchor)
        prevs = [anchor] + drafts[:-1]
        w1, w2 = ref.w["markov_head.markov_w1.weight"], ref.w["markov_head.markov_w2.weight"]
        bias = np.array([[sum(w2[v, r] * w1[p, r] for r in range(ref.rank))
                          for v in range(ref.draft_vocab)] for p in prevs])
        ids = [int(np.flatnonzero(ref.to_target == d)[0]) for d in drafts]   # draft ids
        check(np.abs(logits - base[:ref.block - 1] - bias).max() < 1e-12 and
              all(logits[k, ids[k]] >= logits[k].max() and
                  not (logits[k, :ids[k]] >= logits[k, ids[k]]).any()
                  for k in range(ref.block - 1)),
              f"{name}: Markov chain (bias from the previous draft, first maximum)")
        if ref.confidence:
            hid = ref.block_hidden(anchor, n, kv)
            w = ref.w["confidence_head.proj.weight"][0]
            feats = [list(hid[k]) + (list(w1[p]) if ref.confidence_with_markov else [])
                     for k, p in enumerate(prevs)]
            explicit = [1 / (1 + np.exp(-(sum(a * b for a, b in zip(f, w)) +
                                          ref.w["confidence_head.proj.bias"][0])))
                        for f in feats]
            check(np.abs(ref.confidences(hid, prevs) - explicit).max() < 1e-12,
                  f"{name}: confidences equal explicit sums")
        shorter = ref.block_forward(anchor, n, kv, rows=ref.block - 1)
        diff = np.abs(shorter - base[:ref.block - 1]).max()
        check(diff < 1e-12 * np.abs(base).max(),
              f"{name}: dropping the last block row leaves rows 0..B-2 unchanged "
              f"(max diff {diff:.2g}: matrix-product order only)")
        old = taps.copy()
        old[:n - ref.window] += 1.0                                       # outside the window
        kv_old = ref.context_kv(ref.context_features(old))
        check(np.array_equal(ref.block_forward(anchor, n, kv_old), base),
              f"{name}: positions before N - W = {n - ref.window} do not matter")
        recent = taps.copy()
        recent[n - ref.window] += 1.0                                     # the oldest visible
        kv_recent = ref.context_kv(ref.context_features(recent))
        check(not np.allclose(ref.block_forward(anchor, n, kv_recent), base),
              f"{name}: position N - W = {n - ref.window} does matter")
        if goldens is not None:
            stored = json.loads((goldens / f"{name}.json").read_text())
            fresh = compute_case(fixtures, name)
            check(stored == fresh, f"{name}: reproduces {goldens / (name + '.json')}")
    print("all passed" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", type=Path, default=REPO / "build" / "fixtures",
                    help="folder holding the dspark-* fixtures (make_dspark_fixtures.py)")
    ap.add_argument("--out", type=Path, help="write <fixture>.json goldens into this folder")
    ap.add_argument("--check", action="store_true", help="run the self-test")
    ap.add_argument("--goldens", type=Path,
                    help="with --check: also require these goldens to be reproduced exactly")
    args = ap.parse_args()
    if not args.out and not args.check:
        ap.error("give --out DIR and/or --check")
    rc = 0
    if args.out:
        rc |= write_goldens(args.fixtures, args.out)
    if args.check:
        rc |= self_test(args.fixtures, args.goldens)
    return rc


if __name__ == "__main__":
    sys.exit(main())
