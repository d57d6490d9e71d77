#!/usr/bin/env python3
"""An independent float64 transcription of Kimi K3's text model (docs/models/kimi-k3-dspark.md
§5–§9), written from the spec alone, for the parts no library implements as K3 does (attention
residuals, the lower-bound KDA gate, the output-gated MLA, SiTU, the latent MoE with MXFP4
experts, the router's correction bias).

Numerics: everything in float64 from the checkpoint's exact values (bf16 and MXFP4 weights are
exact in float64); the spec's bf16 roundings of activations are NOT applied: this is the model's
mathematics, which megadecode's f32 pipeline must approach within order noise. Pieces are checked
against the libraries that implement them (check_pieces: KDA against fla-core's naive KDA, MLA
against transformers' KimiLinearAttention, MXFP4 against compressed-tensors, through the committed
goldens in tests/goldens/kimi/).

  kimi_reference.py --check-pieces                 (numpy only; ctest runs it)
  kimi_reference.py --fixture DIR --prompt 1,2,3   prints the greedy continuation
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash2_reference import read_checkpoint, read_safetensors  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def sigmoid(x):
    with np.errstate(over="ignore"):  # exp(−x) → inf gives the exact limit 0
        return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def rms(x, w, eps):
    """RMSk (§0): x · rsqrt(mean(x²) + eps) · w."""
    return x / np.sqrt(np.mean(x * x) + eps) * w


def l2(x):
    """L2 (§0): x · rsqrt(Σx² + 1e-6)."""
    return x / np.sqrt(np.sum(x * x) + 1e-6)


def situ(g, u, beta, linear_beta):
    """§8.1, no clamps."""
    return beta * np.tanh(g / beta) * sigmoid(g) * linear_beta * np.tanh(u / linear_beta)


def mxfp4(packed, scale):
    """§9: code 2j in the low nibble of byte j, E8M0 scale per 32 (0 and 255 refused)."""
    if np.any((scale == 0) | (scale == 255)):
        raise ValueError("E8M0 scale byte 0 or 255")
    codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[0], -1)
    values = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    return values * np.repeat(np.exp2(scale.astype(np.float64) - 127), 32, axis=1)


def mix(blocks, prefix, w, eps):
    """§5.2 Mix: softmax over [blocks…, prefix] of (v·w)·rsqrt(mean(v²) + eps)."""
    candidates = blocks + [prefix]
    scores = np.array([np.dot(v, w) / np.sqrt(np.mean(v * v) + eps) for v in candidates])
    p = np.exp(scores - scores.max())
    p /= p.sum()
    return sum(pi * v for pi, v in zip(p, candidates))


def kda_recurrent(q, k, v, g, beta, state):
    """§6.2 step 4 for one head over tokens; state S[key][value]; q already scaled."""
    out = []
    for t in range(q.shape[0]):
        state = state * np.exp(g[t])[:, None]
        u = beta[t] * (v[t] - k[t] @ state)
        state = state + np.outer(k[t], u)
        out.append(q[t] @ state)
    return np.array(out), state


class Model:
    def __init__(self, folder):
        folder = Path(folder)
        self.config = json.loads((folder / "config.json").read_text())["text_config"]
        self.w = read_checkpoint(folder)
        c = self.config
        self.eps = c["rms_norm_eps"]
        self.block = c["attn_res_block_size"]
        lin = c["linear_attn_config"]
        self.full = {n - 1 for n in lin["full_attn_layers"]}
        self.heads, self.d = lin["num_heads"], lin["head_dim"]
        self.taps = lin["short_conv_kernel_size"]
        self.lower_bound = lin["gate_lower_bound"]
        self.situ = (c["activation_situ_beta"], c["activation_situ_linear_beta"])

    def t(self, name):
        return self.w["language_model." + name]

    def new_state(self):
        state = []
        for layer in range(self.config["num_hidden_layers"]):
            if layer in self.full:
                state.append({"keys": [], "values": []})
            else:
                c = self.heads * self.d
                state.append({"hist": np.zeros((3, self.taps - 1, c)),
                              "S": np.zeros((self.heads, self.d, self.d))})
        return state

    def kda(self, layer, x, st):
        p = f"model.layers.{layer}.self_attn."
        h, d = self.heads, self.d
        raw = [self.t(p + f"{n}_proj.weight") @ x for n in "qkv"]
        fa = self.t(p + "f_a_proj.weight") @ x
        f = self.t(p + "f_b_proj.weight") @ fa
        a_log = self.t(p + "A_log")[:h]
        gdec = self.lower_bound * sigmoid(np.repeat(np.exp(a_log), d) * (f + self.t(p + "dt_bias")))
        convs = []
        for i, n in enumerate("qkv"):
            w = self.t(p + f"{n}_conv1d.weight")[:, 0, :]  # [C][K], tap K-1 = current token
            window = np.concatenate([st["hist"][i], raw[i][None]], axis=0)  # oldest first
            convs.append(silu(np.sum(w.T * window, axis=0)))
            st["hist"][i] = window[1:]
        beta = sigmoid(self.t(p + "b_proj.weight") @ x)
        go = self.t(p + "g_proj.weight") @ x
        y = np.zeros(h * d)
        for hd in range(h):
            sl = slice(hd * d, (hd + 1) * d)
            q = l2(convs[0][sl]) * d ** -0.5
            k = l2(convs[1][sl])
            o, st["S"][hd] = kda_recurrent(q[None], k[None], convs[2][sl][None], gdec[sl][None],
                                           beta[hd:hd + 1], st["S"][hd])
            o = o[0]
            r = 1.0 / np.sqrt(np.mean(o * o) + 1e-5)
            y[sl] = o * r * self.t(p + "o_norm.weight") * sigmoid(go[sl])
        return self.t(p + "o_proj.weight") @ y

    def mla(self, layer, x, st):
        c, p = self.config, f"model.layers.{layer}.self_attn."
        heads, nope, sh, v = (c["num_attention_heads"], c["qk_nope_head_dim"],
                              c["qk_rope_head_dim"], c["v_head_dim"])
        r = c["kv_lora_rank"]
        cq = rms(self.t(p + "q_a_proj.weight") @ x, self.t(p + "q_a_layernorm.weight"), self.eps)
        q = (self.t(p + "q_b_proj.weight") @ cq).reshape(heads, nope + sh)
        ckv = self.t(p + "kv_a_proj_with_mqa.weight") @ x
        latent = rms(ckv[:r], self.t(p + "kv_a_layernorm.weight"), self.eps)
        kv = (self.t(p + "kv_b_proj.weight") @ latent).reshape(heads, nope + v)
        st["keys"].append(np.concatenate([kv[:, :nope], np.tile(ckv[r:], (heads, 1))], axis=1))
        st["values"].append(kv[:, nope:])
        keys, values = np.array(st["keys"]), np.array(st["values"])  # [T][heads][·]
        g = self.t(p + "g_proj.weight") @ x
        y = np.zeros(heads * v)
        for hd in range(heads):
            scores = keys[:, hd] @ q[hd] * (nope + sh) ** -0.5
            pr = np.exp(scores - scores.max())
            pr /= pr.sum()
            y[hd * v:(hd + 1) * v] = (pr @ values[:, hd]) * sigmoid(g[hd * v:(hd + 1) * v])
        return self.t(p + "o_proj.weight") @ y

    def ffn(self, layer, x):
        c, p = self.config, f"model.layers.{layer}."
        if layer < c["first_k_dense_replace"]:
            g, u = self.t(p + "mlp.gate_proj.weight") @ x, self.t(p + "mlp.up_proj.weight") @ x
            return self.t(p + "mlp.down_proj.weight") @ situ(g, u, *self.situ)
        p += "block_sparse_moe."
        sc = sigmoid(self.t(p + "gate.weight") @ x)
        selection = sc + self.t(p + "gate.e_score_correction_bias")
        chosen = []
        for _ in range(c["num_experts_per_token"]):  # iterated argmax, lowest index on ties
            e = int(np.argmax(np.where(np.isin(np.arange(len(sc)), chosen), -np.inf, selection)))
            chosen.append(e)
        weights = sc[chosen] / sc[chosen].sum()
        lat = self.t(p + "routed_expert_down_proj.weight") @ x
        acc = np.zeros_like(lat)
        for e, we in zip(chosen, weights):
            ex = f"{p}experts.{e}."
            w1, w3, w2 = (mxfp4(self.t(ex + f"{n}.weight_packed"), self.t(ex + f"{n}.weight_scale"))
                          for n in ("w1", "w3", "w2"))
            acc += (w2 @ situ(w1 @ lat, w3 @ lat, *self.situ)) * we
        up = self.t(p + "routed_expert_up_proj.weight") @ rms(
            acc, self.t(p + "routed_expert_norm.weight"), self.eps)
        sg = self.t(p + "shared_experts.gate_proj.weight") @ x
        su = self.t(p + "shared_experts.up_proj.weight") @ x
        return up + self.t(p + "shared_experts.down_proj.weight") @ situ(sg, su, *self.situ)

    def folded(self, norm, proj):
        return self.t(norm) * self.t(proj)[0]

    def step(self, token, state):
        """One token through §5's timeline; returns the logits."""
        c = self.config
        prefix, blocks = self.t("model.embed_tokens.weight")[token], []
        for layer in range(c["num_hidden_layers"]):
            p = f"model.layers.{layer}."
            a_in = mix(blocks, prefix, self.folded(p + "self_attention_res_norm.weight",
                                                   p + "self_attention_res_proj.weight"), self.eps)
            fresh = layer % self.block == 0
            if fresh:
                blocks.append(prefix)
            x = rms(a_in, self.t(p + "input_layernorm.weight"), self.eps)
            a = self.mla(layer, x, state[layer]) if layer in self.full else self.kda(
                layer, x, state[layer])
            prefix = a if fresh else prefix + a
            m_in = mix(blocks, prefix, self.folded(p + "mlp_res_norm.weight",
                                                   p + "mlp_res_proj.weight"), self.eps)
            prefix = prefix + self.ffn(layer, rms(m_in, self.t(p + "post_attention_layernorm.weight"),
                                                  self.eps))
        h = mix(blocks, prefix, self.folded("model.output_attn_res_norm.weight",
                                            "model.output_attn_res_proj.weight"), self.eps)
        return self.t("lm_head.weight") @ rms(h, self.t("model.norm.weight"), self.eps)


def check_pieces() -> int:
    """The transcription's pieces against the independent libraries' goldens."""
    goldens = REPO / "tests" / "goldens" / "kimi"
    worst = {}
    g = read_safetensors(goldens / "mxfp4-compressed-tensors.safetensors")
    with np.errstate(over="ignore"):
        mine = mxfp4(g["weight_packed"], g["weight_scale"])
    worst["mxfp4 vs compressed-tensors"] = float(np.max(np.where(
        np.isinf(g["weight"]), 0, np.abs(mine - g["weight"]))))
    g = read_safetensors(goldens / "kda-fla.safetensors")
    d = g["q"].shape[2]
    for h in range(g["q"].shape[1]):
        o, s = kda_recurrent(g["q"][:, h] * np.float32(d ** -0.5), g["k"][:, h], g["v"][:, h],
                             g["g"][:, h], g["beta"][:, h], g["state0"][h])
        scale = np.max(np.abs(g["recurrent.o"]))
        worst[f"KDA head {h} vs fla"] = float(np.max(np.abs(o - g["recurrent.o"][:, h])) / scale)
    g = read_safetensors(goldens / "mla-kimi-linear.safetensors")
    tokens, heads, qk = g["query"].shape
    nope, sh = 32, qk - 32
    v = g["attention"].shape[1] // heads
    kv = g["latent"] @ g["kv_b_proj.weight"].T  # [T, heads·(nope+v)]
    kv = kv.reshape(tokens, heads, nope + v)
    err = 0.0
    for t in range(tokens):
        for hd in range(heads):
            keys = np.concatenate([kv[:t + 1, hd, :nope], g["shared_key"][:t + 1]], axis=1)
            scores = keys @ g["query"][t, hd] * qk ** -0.5
            pr = np.exp(scores - scores.max())
            pr /= pr.sum()
            o = pr @ kv[:t + 1, hd, nope:]
            err = max(err, float(np.max(np.abs(o - g["attention"][t, hd * v:(hd + 1) * v]))))
    worst["MLA vs transformers"] = err / float(np.max(np.abs(g["attention"])))
    bounds = {"mxfp4 vs compressed-tensors": 0.0}
    failed = False
    for name, value in worst.items():
        bound = bounds.get(name, 1e-5)
        ok = value <= bound
        failed |= not ok
        print(f"{name}: {value:.3g} (bound {bound:g}) {'ok' if ok else 'FAILED'}")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check-pieces", action="store_true")
    ap.add_argument("--fixture", type=Path)
    ap.add_argument("--prompt", default="1,2,3")
    ap.add_argument("--new", type=int, default=4)
    args = ap.parse_args()
    if args.check_pieces:
        return check_pieces()
    model = Model(args.fixture)
    state = model.new_state()
    ids = [int(x) for x in args.prompt.split(",")]
    for token in ids:
        logits = model.step(token, state)
    out = []
    for _ in range(args.new):
        out.append(int(np.argmax(logits)))
        logits = model.step(out[-1], state)
    print("greedy:", out, "max |logit|", float(np.max(np.abs(logits))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
