#!/usr/bin/env python3
"""Reference logits and greedy continuations for the scaled-down Qwen3.8 fixtures, computed by
Hugging Face transformers' own qwen3_5 implementation (pure-torch paths, float32, eager
attention), so megadecode's C++ forward is compared against code no one on this project wrote.

Runs only in .venv-golden (torch + transformers, see tools/setup-golden-venv); CI never runs it,
it only reads the committed outputs. For each fixture made by tools/make_qwen38_fixtures.py:

  <out>/<fixture>.safetensors
      p{i}.ids            I32 [L]       prompt i (P0..P3 random ids < 500 of lengths 1, 7, 64, 150;
                                        P4 = chat-template rendering of "Hello" with the generation
                                        prompt, tokenized by `tokenizers`)
      p{i}.logits         F32 [L, 512]  logits of every prompt position, one forward, no cache
      p{i}.greedy         I32 [64]      greedy continuation (cached decode, eos ignored)
      p{i}.greedy_margin  F32 [64]      top-1 minus top-2 logit that chose each greedy token
                                        (full no-cache recompute; compare tokens only up to the
                                        first small margin)
      p3.state.layer{l}.recurrent / .conv   (tiny-qwen38 only) HF cache after P3, GDN layers l:
                                        recurrent F32 [value_heads, K, V] (HF layout, transposed
                                        relative to megadecode's [heads][V][K]); conv F32
                                        [conv_dim, 4], raw pre-conv in_proj_qkv outputs of the
                                        last 4 positions, oldest first
  <out>/<fixture>.json  versions, sha256 of the fixture files, prompt lengths, max |logit| and
                        min greedy margin per prompt, HF's GDN chunk size, loading report and
                        HF's own split-prefill / recurrent-decode consistency on P3.

Usage: gen_qwen38_goldens.py --fixtures DIR --out tests/goldens/qwen38 [--only NAME]
"""

import argparse
import hashlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

# The pure-torch fallbacks must be the code under test: refuse to run with the optional kernels.
for _mod in ("fla", "causal_conv1d", "kernels"):
    if importlib.util.find_spec(_mod) is not None:
        sys.exit("gen_qwen38_goldens: package '%s' is installed; it would replace HF's pure-torch "
                 "GDN/conv code. Use the venv made by tools/setup-golden-venv." % _mod)

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5 as hf  # noqa: E402
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf_moe  # noqa: E402

from gen_template_goldens import make_environment  # noqa: E402  (transformers' jinja setup)

VOCAB = 512
GREEDY_STEPS = 64
PROMPT_SEED = 20260310
RANDOM_PROMPT_LENGTHS = (1, 7, 64, 150)
STATE_FIXTURE = "tiny-qwen38"
SPLIT_AT = 100  # P3 self-check: prefill 100 rows, then the remaining 50


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def random_prompts() -> list:
    rng = np.random.default_rng(PROMPT_SEED)
    return [rng.integers(0, 500, n).astype(np.int64).tolist() for n in RANDOM_PROMPT_LENGTHS]


def chat_prompt(fixture: Path) -> tuple:
    tok_config = json.loads((fixture / "tokenizer_config.json").read_text())
    text = make_environment().from_string(tok_config["chat_template"]).render(
        messages=[{"role": "user", "content": "Hello"}], tools=None, documents=None,
        add_generation_prompt=True, eos_token=tok_config["eos_token"])
    ids = Tokenizer.from_file(str(fixture / "tokenizer.json")).encode(text).ids
    return text, ids


def read_weights(fixture: Path) -> dict:
    index = fixture / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for f in files:
        out.update(load_file(str(fixture / f)))
    return out


def load_model(fixture: Path):
    """Qwen3_5ForCausalLM on the text config, float32, eager attention, strict state dict; the
    multimodal names model.language_model.* map to the text model's model.*. Cross-checked
    against AutoModelForCausalLM.from_pretrained on the same folder."""
    config = AutoConfig.from_pretrained(str(fixture))
    nested = config.model_type in ("qwen3_5", "qwen3_5_moe")
    text_config = config.text_config if nested else config
    text_config._attn_implementation = "eager"
    moe = text_config.model_type == "qwen3_5_moe_text"
    if moe:
        text_config._experts_implementation = "eager"  # the per-expert loop, no grouped GEMM
    torch.manual_seed(0)  # irrelevant (every parameter is overwritten), keeps init reproducible
    causal_lm = hf_moe.Qwen3_5MoeForCausalLM if moe else hf.Qwen3_5ForCausalLM
    model = causal_lm(text_config).to(torch.float32).eval()
    state = {}
    for name, value in read_weights(fixture).items():
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model."):]
        state[name] = value.to(torch.float32)
    tied = bool(text_config.tie_word_embeddings)
    if tied:
        # The checkpoint has no lm_head.weight (the released tied models have none): the strict
        # load must find the tied parameter under both names.
        assert "lm_head.weight" not in state
        assert model.lm_head.weight is model.model.embed_tokens.weight, "lm_head is not tied"
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    result = model.load_state_dict(state, strict=True)
    assert not result.missing_keys and not result.unexpected_keys

    extra = {"experts_implementation": "eager"} if moe else {}
    auto, info = AutoModelForCausalLM.from_pretrained(
        str(fixture), dtype=torch.float32, attn_implementation="eager", output_loading_info=True,
        **extra)
    auto_state = auto.state_dict()
    assert set(auto_state) == set(model.state_dict()), "from_pretrained parameter names differ"
    for name, value in model.state_dict().items():
        assert torch.equal(value, auto_state[name]), "from_pretrained differs at " + name
    assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight) == tied
    assert (auto.lm_head.weight is auto.model.embed_tokens.weight) == tied
    loading = {
        "class": type(model).__name__,
        "path": "AutoConfig.from_pretrained -> (text_config) -> " + type(model).__name__ +
                "(config) -> "
                "load_state_dict(strict=True) after renaming model.language_model.* -> model.*; "
                "equal to AutoModelForCausalLM.from_pretrained(dtype=float32, eager)",
        "from_pretrained_class": type(auto).__name__,
        "from_pretrained_loading_info": {k: sorted(map(str, v)) for k, v in info.items()},
        "tie_word_embeddings": bool(text_config.tie_word_embeddings),
        "layer_types": list(text_config.layer_types),
        "rope_parameters": dict(text_config.rope_parameters),
        "rotary_inv_freq_count": int(model.model.rotary_emb.inv_freq.numel()),
    }
    return model, text_config, loading


@torch.no_grad()
def logits_nocache(model, ids: list) -> torch.Tensor:
    out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0].to(torch.float32)


def top2_margin(row: torch.Tensor) -> float:
    top = torch.topk(row, 2).values
    return float(top[0] - top[1])


@torch.no_grad()
def greedy(model, ids: list) -> tuple:
    """Cached greedy decode (prefill, then single-token steps), eos ignored; each step's margin
    and argmax from a full no-cache recompute of the same prefix."""
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    cache, row = out.past_key_values, out.logits[0, -1]
    tokens, margins, disagreements = [], [], 0
    seq = list(ids)
    for _ in range(GREEDY_STEPS):
        token = int(torch.argmax(row))
        full = logits_nocache(model, seq)[-1]
        margins.append(top2_margin(full))
        if int(torch.argmax(full)) != token:
            disagreements += 1
        tokens.append(token)
        seq.append(token)
        out = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True)
        cache, row = out.past_key_values, out.logits[0, -1]
    return tokens, margins, disagreements


def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return float((a - ref).abs().max() / ref.abs().max())


@torch.no_grad()
def self_check(model, ids: list, full: torch.Tensor) -> dict:
    """HF against itself on P3: (a) prefill in two segments (chunked rule continuing from a
    cached state), (b) prefill then token-by-token decode (recurrent rule + conv update)."""
    first = model(input_ids=torch.tensor([ids[:SPLIT_AT]]), use_cache=True)
    second = model(input_ids=torch.tensor([ids[SPLIT_AT:]]), past_key_values=first.past_key_values,
                   use_cache=True)
    split = torch.cat([first.logits[0], second.logits[0]]).to(torch.float32)

    out = model(input_ids=torch.tensor([ids[:SPLIT_AT]]), use_cache=True)
    rows, cache = [out.logits[0]], out.past_key_values
    for t in ids[SPLIT_AT:]:
        out = model(input_ids=torch.tensor([[t]]), past_key_values=cache, use_cache=True)
        rows.append(out.logits[0])
        cache = out.past_key_values
    decode = torch.cat(rows).to(torch.float32)
    return {
        "prompt": "p3",
        "split_at": SPLIT_AT,
        "two_segment_prefill_rel_max_err": rel(split, full),
        "prefill_then_decode_rel_max_err": rel(decode, full),
        "definition": "max|logits - one_forward_logits| / max|one_forward_logits| over all rows",
    }


@torch.no_grad()
def gdn_states(model, config, ids: list) -> tuple:
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    cache, tensors = out.past_key_values, {}
    for i, kind in enumerate(config.layer_types):
        if kind != "linear_attention":
            continue
        layer = cache.layers[i]
        rec = layer.recurrent_states[0][0].to(torch.float32).contiguous()
        conv = layer.conv_states[0][0].to(torch.float32).contiguous()
        tensors["p3.state.layer%d.recurrent" % i] = rec
        tensors["p3.state.layer%d.conv" % i] = conv
    note = {
        "prompt": "p3",
        "recurrent": "F32 [linear_num_value_heads, linear_key_head_dim, linear_value_head_dim]: "
                     "HF layout S[head][K][V], the transpose of megadecode's S[head][V][K]",
        "conv": "F32 [conv_dim, linear_conv_kernel_dim]: the raw (pre-conv, pre-SiLU) in_proj_qkv "
                "outputs of the last 4 positions, column 0 oldest, column 3 the last prompt token",
        "shapes": {k: list(v.shape) for k, v in sorted(tensors.items())},
    }
    return tensors, note


def watch_routing(model) -> list:
    """MoE models: after each forward, the smallest gap between the k-th and (k+1)-th router
    logit of any row and layer, i.e. the log of the ratio of their routing probabilities (a gap
    near float rounding would make the expert choice, and so the golden, fragile)."""
    gaps = []

    def hook(module, _inputs, outputs):
        top = torch.topk(outputs[0].float(), module.top_k + 1, dim=-1).values
        gaps.append(float((top[:, -2] - top[:, -1]).min()))

    for module in model.modules():
        if type(module).__name__ == "Qwen3_5MoeTopKRouter":
            module.register_forward_hook(hook)
    return gaps


def run_fixture(fixture: Path, out_dir: Path) -> dict:
    name = fixture.name
    model, config, loading = load_model(fixture)
    routing_gaps = watch_routing(model)
    chat_text, chat_ids = chat_prompt(fixture)
    prompts = random_prompts() + [chat_ids]
    tensors, summary = {}, []
    full_p3 = None
    for i, ids in enumerate(prompts):
        logits = logits_nocache(model, ids)
        if i == 3:
            full_p3 = logits
        tokens, margins, disagreements = greedy(model, ids)
        tensors["p%d.ids" % i] = torch.tensor(ids, dtype=torch.int32)
        tensors["p%d.logits" % i] = logits.contiguous()
        tensors["p%d.greedy" % i] = torch.tensor(tokens, dtype=torch.int32)
        tensors["p%d.greedy_margin" % i] = torch.tensor(margins, dtype=torch.float32)
        summary.append({
            "length": len(ids),
            "max_abs_logit": float(logits.abs().max()),
            "min_greedy_margin": min(margins),
            "greedy_margins_below_1e-2": sum(m < 1e-2 for m in margins),
            "last_row_top2_margin": top2_margin(logits[-1]),
            "cached_vs_recompute_argmax_disagreements": disagreements,
        })
    meta = {
        "fixture": name,
        "generator": "tools/gen_qwen38_goldens.py",
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "numpy_version": np.__version__,
        "dtype": "float32",
        "attn_implementation": "eager",
        "gdn_chunk_size": inspect.signature(hf.torch_chunk_gated_delta_rule)
        .parameters["chunk_size"].default,
        "gdn_kernels": "pure torch (torch_chunk_gated_delta_rule for multi-token calls, "
                       "torch_recurrent_gated_delta_rule for cached single-token steps, "
                       "torch causal_conv1d_fn / causal_conv1d_update); fla, causal_conv1d and "
                       "kernels not installed",
        "fixture_sha256": {p.name: sha256(p) for p in sorted(fixture.iterdir()) if p.is_file()},
        "loading": loading,
        "prompt_count": len(prompts),
        "prompt_seed": PROMPT_SEED,
        "p4_chat_text": chat_text,
        "greedy_steps": GREEDY_STEPS,
        "greedy_rule": "argmax of the cached-decode float32 logits (first index on ties), eos not "
                       "stopping; greedy_margin[k] = top1 - top2 of the no-cache recompute logits "
                       "that choose greedy[k]",
        "prompts": summary,
        "hf_self_check": self_check(model, prompts[3], full_p3),
    }
    if routing_gaps:
        meta["router_min_topk_logit_gap"] = min(routing_gaps)
    if name == STATE_FIXTURE:
        state_tensors, meta["p3_state"] = gdn_states(model, config, prompts[3])
        tensors.update(state_tensors)
    out_dir.mkdir(parents=True, exist_ok=True)
    # No __metadata__: the library writes its keys in hash order, which would make the bytes vary.
    save_file(tensors, str(out_dir / (name + ".safetensors")))
    (out_dir / (name + ".json")).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    (out_dir / (name + ".safetensors")).chmod(0o644)  # save_file creates it 0600
    return meta


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only")
    args = ap.parse_args()
    torch.set_num_threads(1)  # reproducible float32 reductions
    torch.use_deterministic_algorithms(True)
    names = sorted(p.name for p in args.fixtures.iterdir() if (p / "config.json").exists())
    if args.only:
        names = [n for n in names if n == args.only]
    if not names:
        sys.exit("gen_qwen38_goldens: no fixtures under %s" % args.fixtures)
    for name in names:
        meta = run_fixture(args.fixtures / name, args.out)
        for i, p in enumerate(meta["prompts"]):
            print("%s p%d L=%d max|logit|=%.3f min_margin=%.4g" % (
                name, i, p["length"], p["max_abs_logit"], p["min_greedy_margin"]))
        print("%s self-check %s" % (name, meta["hf_self_check"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
