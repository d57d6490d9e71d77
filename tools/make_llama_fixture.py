#!/usr/bin/env python3
"""A scaled-down Hugging Face LlamaForCausalLM directory for megadecode's tests.

Writes under --out/tiny-llama:
  config.json, generation_config.json, model.safetensors (BF16), tokenizer.json,
  tokenizer_config.json (the 512-token byte-level BPE and chat template of the tiny-qwen38
  fixture, built by make_qwen38_fixtures.py, so the two fixtures share one tokenizer).

Shape: hidden 64, 2 layers, 4 query heads / 2 KV heads of head_dim 16 (so GQA and the per-head
q/k row permutation are both exercised), SwiGLU intermediate 128, vocab 512, untied lm_head,
rope_theta 10000. Weights N(0, 0.02) except the lm_head N(0, 0.5) (spreads the logits so that
greedy margins are comfortably above float rounding) and the RMSNorm weights 1 + N(0, 0.1).
Numpy only, deterministic (fixed seed). Usage:
  make_llama_fixture.py --out DIR [--verify GOLDEN_DIR]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_qwen38_fixtures import (  # noqa: E402
    ENDOFTEXT, IM_END, VOCAB, check_tokenizer, make_tokenizer, verify_fixture, write_json,
    write_safetensors)

NAME = "tiny-llama"
H, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER = 64, 2, 4, 2, 16, 128
SEED = 20261201


def config() -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": H,
        "intermediate_size": INTER,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 256,
        "vocab_size": VOCAB,
        "tie_word_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": [ENDOFTEXT, IM_END],
        "torch_dtype": "bfloat16",
    }


def make_weights() -> dict:
    rng = np.random.default_rng(SEED)

    def normal(shape, std):
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    def norm(n):
        return 1.0 + normal((n,), 0.1)

    out = {"model.embed_tokens.weight": ("BF16", normal((VOCAB, H), 0.02 * 25))}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = ("BF16", norm(H))
        out[p + "post_attention_layernorm.weight"] = ("BF16", norm(H))
        # q/k a little larger than the rest so that attention is far from uniform and a wrong
        # RoPE pairing shows clearly in the logits.
        out[p + "self_attn.q_proj.weight"] = ("BF16", normal((HEADS * HEAD_DIM, H), 0.1))
        out[p + "self_attn.k_proj.weight"] = ("BF16", normal((KV_HEADS * HEAD_DIM, H), 0.1))
        out[p + "self_attn.v_proj.weight"] = ("BF16", normal((KV_HEADS * HEAD_DIM, H), 0.1))
        out[p + "self_attn.o_proj.weight"] = ("BF16", normal((H, HEADS * HEAD_DIM), 0.1))
        out[p + "mlp.gate_proj.weight"] = ("BF16", normal((INTER, H), 0.1))
        out[p + "mlp.up_proj.weight"] = ("BF16", normal((INTER, H), 0.1))
        out[p + "mlp.down_proj.weight"] = ("BF16", normal((H, INTER), 0.1))
    out["model.norm.weight"] = ("BF16", norm(H))
    out["lm_head.weight"] = ("BF16", normal((VOCAB, H), 0.5))
    return out


def write_fixture(root: Path) -> Path:
    d = root / NAME
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("*.safetensors*"):
        old.unlink()
    tokenizer, tok_config = make_tokenizer()
    write_json(d / "config.json", config())
    write_json(d / "generation_config.json",
               {"bos_token_id": None, "eos_token_id": [ENDOFTEXT, IM_END],
                "pad_token_id": ENDOFTEXT, "do_sample": False})
    write_json(d / "tokenizer.json", tokenizer)
    write_json(d / "tokenizer_config.json", tok_config)
    write_safetensors(d / "model.safetensors", make_weights())
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--verify", type=Path, metavar="GOLDEN_DIR",
                    help="fail unless every written file has the sha256 recorded in "
                         f"GOLDEN_DIR/{NAME}.json (the files the goldens were computed from)")
    args = ap.parse_args()
    d = write_fixture(args.out)
    check_tokenizer(d / "tokenizer.json")
    if args.verify and not verify_fixture(d, args.verify / f"{NAME}.json",
                                          readme="tools/gen_llama_goldens.py"):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
