#!/usr/bin/env python3
"""Goldens for the DFlash2 drafter on the scaled-down pair tiny-qwen38 (target) + tiny-dflash2.

The taps come from Hugging Face transformers' own qwen3_5 code (tiny-qwen38 loaded exactly as
tools/gen_qwen38_goldens.py does, float32, eager, `output_hidden_states`, tap of layer l =
hidden_states[l + 1]); every drafter output comes from tools/dflash2_reference.py, the float64
numpy transcription of spec sections 11.3-11.6. Optionally (--dflash-wheel) the reference is
cross-checked against z-lab's PyPI package `dflash` 0.1.0 run in float64 (imported straight
from the downloaded wheel, never installed); the result goes into the metadata only.

Runs only in .venv-golden (torch + transformers); CI only reads the committed outputs.
The format of the two files is documented in tests/goldens/dflash2/README.md.

Usage: gen_dflash2_goldens.py [--fixtures build/fixtures] [--out tests/goldens/dflash2]
                              [--dflash-wheel /tmp/dflash/dflash-0.1.0-py3-none-any.whl]
"""

import argparse
import json
import sys
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

# Refuses to run with fla / causal_conv1d / kernels installed (HF's pure-torch code is the ref).
from gen_qwen38_goldens import load_model, sha256  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import dflash2_reference as ref  # noqa: E402

TARGET = "tiny-qwen38"
DRAFT = "tiny-dflash2"
PROMPT_SEED = 20260402
PROMPT_LENGTH = 40
ROUND_POSITIONS = (1, 9, 20, 30, 40)   # anchor position s; context = positions 0..s-1
TRACE_ROUND = 2                        # s = 20: context longer than the 16-token window
TEMPERATURE = 0.7
UNIFORM_SEED = 20260403
TIE_SEED = 20260404


def f32(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32))


def i32(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.int32))


def rel_max(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def fixture_hashes(folder: Path) -> dict:
    return {p.name: sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}


@torch.no_grad()
def target_taps(model, config, ids: list, tap_ids: list) -> tuple:
    """HF forward over the prompt: hidden_states[l + 1] for the tapped layers [L, n_taps, H]
    (float32), the greedy next token, and checks of what hidden_states[l + 1] is."""
    n_layers = config.num_hidden_layers
    captured = {}

    def hook(index):
        def fn(_module, _inputs, output):
            captured[index] = (output[0] if isinstance(output, tuple) else output).detach().clone()
        return fn

    handles = [model.model.layers[i].register_forward_hook(hook(i)) for i in range(n_layers)]
    try:
        out = model(input_ids=torch.tensor([ids]), use_cache=False, output_hidden_states=True)
    finally:
        for h in handles:
            h.remove()
    hs = out.hidden_states
    checks = {
        "hidden_states_count": len(hs),
        "tap_equals_layer_output": {str(l): bool(torch.equal(hs[l + 1], captured[l]))
                                    for l in tap_ids},
        "last_entry_equals_last_layer_output": bool(torch.equal(hs[n_layers],
                                                                captured[n_layers - 1])),
        "last_layer": n_layers - 1,
        "tapped_layers_exclude_last": (n_layers - 1) not in tap_ids,
    }
    taps = torch.stack([hs[l + 1][0] for l in tap_ids], dim=1).to(torch.float32).numpy()
    last = out.logits[0, -1].to(torch.float32)
    top2 = torch.topk(last, 2).values
    nxt = int(torch.argmax(last))
    return taps, nxt, float(top2[0] - top2[1]), checks


def selector_tie_case(r: ref.DFlash2Reference) -> tuple:
    """A synthetic selector input with exact ties: logits on a quarter-integer grid (many equal
    values), three candidates tied at the top of every row and a tie across the top-k boundary;
    rho is zero on rows 0, 2, 4 so their scores equal the (tied) unary values and the first
    maximum (the lowest of the tied ids) must win; the other rows have random rho."""
    rng = np.random.default_rng(TIE_SEED)
    rows, vocab, k = r.block - 1, r.lm_head.shape[0], r.top_k
    logits = rng.integers(-8, 9, (rows, vocab)).astype(np.float64) / 4.0   # [-2, 2]
    for i in range(rows):
        top = rng.choice(vocab, 3 + 2, replace=False)
        logits[i, top[:3]] = 3.0            # tied maximum, ids in random order
        logits[i, top[3:]] = 2.75           # tied pair straddling the top-4 boundary
    rho = (rng.standard_normal((rows, r.rank)) * 0.3).astype(np.float32).astype(np.float64)
    rho[[0, 2, 4]] = 0.0                    # F32-exact, so the stored rho is the one used
    anchor = 7
    tops = [ref.topk_sorted(row, k) for row in logits]
    u = np.stack([t[0] for t in tops])
    c = np.stack([t[1] for t in tops])
    gk, gtok, gscores = r.walk(anchor, u, c, rho)
    tensors = {
        "seltie.anchor": i32([anchor]),
        "seltie.logits": f32(logits),
        "seltie.rho": f32(rho),
        "seltie.topk_ids": i32(c),
        "seltie.topk_values": f32(u),
        "seltie.scores": f32(gscores),
        "seltie.greedy_k": i32(gk),
        "seltie.greedy_path": i32(gtok),
    }
    return tensors


@torch.no_grad()
def crosscheck_dflash(wheel: Path, draft_dir: Path, r: ref.DFlash2Reference, taps64: np.ndarray,
                      rounds: list) -> dict:
    """Run z-lab dflash 0.1.0's DFlash2DraftModel (imported from the wheel file, not installed)
    in float64 on the same inputs and compare with the reference."""
    sys.path.insert(0, str(wheel))
    import dflash  # noqa: F401
    from dflash.model import DFlash2DraftModel
    from transformers import Qwen3Config

    cfg = json.loads((draft_dir / "config.json").read_text())
    config = Qwen3Config(**cfg)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = DFlash2DraftModel(config).to(torch.float64).eval()
    state = {}
    for name, value in ref.read_checkpoint(draft_dir).items():
        if name.startswith("candidate_selector.") and name.endswith("_codebook"):
            name += ".weight"
        state[name] = torch.from_numpy(value)
    result = model.load_state_dict(state, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    embed = torch.from_numpy(r.embed)
    head = torch.nn.Linear(r.H, r.lm_head.shape[0], bias=False, dtype=torch.float64)
    head.weight.data.copy_(torch.from_numpy(r.lm_head))
    feats = torch.from_numpy(taps64.reshape(taps64.shape[0], -1))
    out = {"package": "dflash 0.1.0 (" + wheel.name + ")", "dtype": "float64",
           "attention": "sdpa with dflash's _attention_mask (is_causal false from config)",
           "is_causal_attribute": [bool(l.self_attn.is_causal) for l in model.layers]}
    out["rounds"] = crosscheck_rounds(model, r, embed, head, feats, rounds)
    # transformers' Qwen3RMSNorm normalises in float32 and Qwen3RotaryEmbedding computes its
    # angles and cos/sin in float32 whatever the model dtype: the ~1e-7 above. With those two
    # evaluated in float64 the package and the reference agree to rounding.
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, Qwen3RotaryEmbedding

    def rms64(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                              + self.variance_epsilon))

    def rotary64(self, x, position_ids):
        d = r.hd
        inv = r.theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        freqs = position_ids[..., None].to(torch.float64) * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    for module in model.modules():
        if isinstance(module, Qwen3RMSNorm):
            module.forward = types.MethodType(rms64, module)
        elif isinstance(module, Qwen3RotaryEmbedding):
            module.forward = types.MethodType(rotary64, module)
    out["rounds_with_float64_norm_and_rotary"] = crosscheck_rounds(model, r, embed, head, feats,
                                                                   rounds)
    return out


def crosscheck_rounds(model, r, embed, head, feats, rounds) -> list:
    out = []
    for rd in rounds:
        s, anchor = rd["s"], rd["anchor"]
        ids = torch.tensor([[anchor] + [r.mask_id] * (r.block - 1)])
        hidden = model(position_ids=torch.arange(s + r.block)[None],
                       noise_embedding=embed[ids], target_hidden=feats[None, :s],
                       use_cache=False)
        hf = hidden[0].numpy()
        path, cand, _ = model.propose(hidden[:, 1:], torch.tensor([anchor]), head, 0.0)
        z_cand = cand[0].numpy()
        # T > 0: replay the package's own sampled path in the reference and compare its q rows
        # (candidate order mapped from the package's unsorted top-k to the sorted one).
        torch.manual_seed(s)
        spath, scand, sq = model.propose(hidden[:, 1:], torch.tensor([anchor]), head,
                                         TEMPERATURE)
        spath, scand, sq = spath[0].numpy(), scand[0].numpy(), sq[0].numpy()
        ks = [int(np.where(rd["topk_ids"][i] == spath[i])[0][0]) for i in range(len(spath))]
        _, _, rscores = r.walk(anchor, rd["topk_values"], rd["topk_ids"], rd["rho"], ks)
        rq = ref.softmax(rscores / TEMPERATURE, axis=-1)
        perm = [[int(np.where(scand[i] == t)[0][0]) for t in rd["topk_ids"][i]]
                for i in range(len(spath))]
        zq = np.stack([sq[i][perm[i]] for i in range(len(spath))])
        out.append({
            "sampled_T": TEMPERATURE,
            "sampled_path": spath.tolist(),
            "sampled_q_max_abs_err": float(np.max(np.abs(zq - rq))),
            "s": s,
            "hf_rel_max_err": rel_max(hf, rd["hf"]),
            "logits_rel_max_err": rel_max(hf[1:] @ r.lm_head.T, rd["logits"]),
            "topk_same_sets": bool(all(set(a) == set(b) for a, b in zip(z_cand, rd["topk_ids"]))),
            "greedy_path_equal": bool(np.array_equal(path[0].numpy(), rd["greedy_path"])),
        })
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", type=Path, default=REPO / "build" / "fixtures")
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "goldens" / "dflash2")
    ap.add_argument("--dflash-wheel", type=Path,
                    help="cross-check against z-lab dflash 0.1.0 (pip download --no-deps "
                         "dflash==0.1.0); recorded in the metadata only")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    target_dir, draft_dir = args.fixtures / TARGET, args.fixtures / DRAFT

    r = ref.DFlash2Reference.from_dirs(draft_dir, target_dir, "f64")
    rb = ref.DFlash2Reference.from_dirs(draft_dir, target_dir, "bf16")

    model, config, _ = load_model(target_dir)
    prompt = np.random.default_rng(PROMPT_SEED).integers(0, 500, PROMPT_LENGTH).tolist()
    taps32, nxt, nxt_margin, tap_checks = target_taps(model, config, prompt, r.tap_ids)
    taps = ref.bf16_round(taps32)                  # bf16 taps, as the target hands them over
    seq = prompt + [nxt]                           # positions 0..40
    ctx = r.context_features(taps)

    uniforms = np.random.default_rng(UNIFORM_SEED).random((len(ROUND_POSITIONS), r.block - 1))
    uniforms = uniforms.astype(np.float32).astype(np.float64)  # exactly representable in F32
    rounds, bf16_rounds = [], []
    trace = None
    for j, s in enumerate(ROUND_POSITIONS):
        rd = r.draft_round(seq[s], s, ctx, TEMPERATURE, uniforms[j], trace=(j == TRACE_ROUND))
        rd.update(s=s, anchor=seq[s])
        if j == TRACE_ROUND:
            trace = rd["trace"]
        rounds.append(rd)
        bf16_rounds.append(rb.draft_round(seq[s], s, rb.context_features(taps)))

    def stack(key, conv):
        return conv(np.stack([rd[key] for rd in rounds]))

    def margins(rd):
        srt = np.sort(rd["greedy_scores"], axis=1)
        greedy_margin = srt[:, -1] - srt[:, -2]
        top = -np.sort(-rd["logits"], axis=1)[:, :r.top_k + 1]
        topk_gap = np.min(top[:, :-1] - top[:, 1:], axis=1)
        return greedy_margin, topk_gap

    gm = np.stack([margins(rd)[0] for rd in rounds])
    tg = np.stack([margins(rd)[1] for rd in rounds])
    tensors = {
        "prompt.ids": i32(seq),
        "taps": f32(taps),
        "ctx": f32(ctx),
        "round.s": i32(ROUND_POSITIONS),
        "round.anchor": i32([rd["anchor"] for rd in rounds]),
        "round.hidden": stack("h", f32),
        "round.hf": stack("hf", f32),
        "round.logits": stack("logits", f32),
        "round.topk_ids": stack("topk_ids", i32),
        "round.topk_values": stack("topk_values", f32),
        "round.topk_gap": f32(tg),
        "round.rho": stack("rho", f32),
        "round.greedy_scores": stack("greedy_scores", f32),
        "round.greedy_k": stack("greedy_k", i32),
        "round.greedy_path": stack("greedy_path", i32),
        "round.greedy_margin": f32(gm),
        "round.greedy_q": stack("greedy_q", f32),
        "round.sampled_uniform": f32(uniforms),
        "round.sampled_k": stack("sampled_k", i32),
        "round.sampled_path": stack("sampled_path", i32),
        "round.sampled_scores": stack("sampled_scores", f32),
        "round.sampled_q": stack("sampled_q", f32),
    }
    for l, tr in enumerate(trace):
        for key, value in tr.items():
            tensors["trace.layer%d.%s" % (l, key)] = f32(value)
    tensors.update(selector_tie_case(r))

    bf16_diag = []
    for rd, rdb in zip(rounds, bf16_rounds):
        bf16_diag.append({
            "s": rd["s"],
            "hf_rel_max_err": rel_max(rdb["hf"], rd["hf"]),
            "logits_rel_max_err": rel_max(rdb["logits"], rd["logits"]),
            "topk_ids_equal": bool(np.array_equal(rdb["topk_ids"], rd["topk_ids"])),
            "greedy_path_equal": bool(np.array_equal(rdb["greedy_path"], rd["greedy_path"])),
        })
    meta = {
        "generator": "tools/gen_dflash2_goldens.py",
        "reference": "tools/dflash2_reference.py, mode f64 (bf16 weights exact, float64 "
                     "activations, no rounding); stored as float32",
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "numpy_version": np.__version__,
        "fixture_sha256": fixture_hashes(draft_dir),
        "target_fixture": TARGET,
        "target_fixture_sha256": fixture_hashes(target_dir),
        "prompt_seed": PROMPT_SEED,
        "prompt_length": PROMPT_LENGTH,
        "prompt_next_token": nxt,
        "prompt_next_token_top2_margin": nxt_margin,
        "taps": {
            "target_layer_ids": r.tap_ids,
            "source": "HF Qwen3_5ForCausalLM float32 eager, one forward over the 40 prompt ids "
                      "without cache, hidden_states[l + 1], then rounded to bf16 (stored as F32, "
                      "exactly bf16-representable)",
            "hf_checks": tap_checks,
            "bf16_rounding_rel_max_change": rel_max(taps, taps32),
        },
        "rounds": [{"s": rd["s"], "anchor": rd["anchor"], "context_positions": [0, rd["s"] - 1],
                    "visible_context_row0": [max(0, rd["s"] - r.window + 1), rd["s"] - 1],
                    "visible_context_row7": [max(0, rd["s"] + r.block - 1 - r.window + 1),
                                             rd["s"] - 1],
                    "greedy_path": rd["greedy_path"].tolist(),
                    "sampled_path": rd["sampled_path"].tolist(),
                    "min_greedy_margin": float(np.min(gm[j])),
                    "min_topk_gap": float(np.min(tg[j])),
                    "max_abs_logit": float(np.max(np.abs(rd["logits"])))}
                   for j, rd in enumerate(rounds)],
        "trace_round": TRACE_ROUND,
        "temperature": TEMPERATURE,
        "uniform_seed": UNIFORM_SEED,
        "sampled_rule": "q_i = softmax(score_i / T) over the K candidates; k* = first k with "
                        "cumsum(q_i)[k] > uniform_i (inverse CDF), given the previous sampled "
                        "token",
        "tie_seed": TIE_SEED,
        "bf16_pipeline_vs_f64": {
            "what": "tools/dflash2_reference.py mode bf16 (R at the spec's rounding points) "
                    "against the f64 goldens: the size of the drift a canonical bf16 "
                    "implementation shows",
            "rounds": bf16_diag,
        },
    }
    if args.dflash_wheel:
        meta["crosscheck_dflash_package"] = crosscheck_dflash(args.dflash_wheel, draft_dir, r,
                                                              taps, rounds)
    args.out.mkdir(parents=True, exist_ok=True)
    ref.write_safetensors(args.out / (DRAFT + ".safetensors"), tensors)
    (args.out / (DRAFT + ".json")).write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps({k: meta[k] for k in ("rounds", "bf16_pipeline_vs_f64")}, indent=1))
    if "crosscheck_dflash_package" in meta:
        print(json.dumps(meta["crosscheck_dflash_package"], indent=1))
    size = (args.out / (DRAFT + ".safetensors")).stat().st_size
    print("wrote %s (%d bytes)" % (args.out / (DRAFT + ".safetensors"), size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
