#!/usr/bin/env python3
"""The scaled-down DFlash2 drafter `tiny-dflash2` for megadecode's tests.

Writes <out>/tiny-dflash2/config.json and model.safetensors: the spec's "Draft tiny-dflash2"
(qwen38-dflash2.md section 14), the drafter of the `tiny-qwen38` target that
tools/make_qwen38_fixtures.py writes (exactly the spec's "Target tiny-qwen3_5"). The drafter has no
embedding and no head of its own; it borrows the target's `embed_tokens` and `lm_head`.

  hidden 128, 2 layers, heads 4 / kv 2 / head_dim 32, intermediate 256, window 16, theta 1e7,
  vocab 512, block 8, conv kernel 2 / group 16 (8 groups), selector rank 8 / top-k 4,
  mask id 500, target_layer_ids [0, 2, 3, 5, 6], num_target_layers 8, is_causal false.

Tensors: every name and shape of spec section 11.2 at these sizes, all BF16, in one file with no
prefix. The two codebooks have no `.weight` suffix. Weights follow section 14's rules, from one
fixed seed (numpy's default_rng, float32 draws rounded to bf16 with round-to-nearest-even):
  matrices (fc, q/k/v/o, gate/up/down, kernel_projection, hidden_projection)  N(0, 0.02)
  block-conv base kernels                                                     N(0, 0.3)
  norms (all plain: hidden_norm, norm, input/post_attention_layernorm, q/k_norm)  1 + N(0, 0.1)
  predecessor / successor codebooks                                           N(0, 0.5)

Numpy only, deterministic, well under a second. Usage:
  make_dflash2_fixture.py [--out DIR] [--verify GOLDEN_DIR]
--out defaults to build/fixtures (beside the target fixtures that scripts/setup writes there).
--verify fails unless every written file has the sha256 recorded in GOLDEN_DIR/tiny-dflash2.json
(tests/goldens/dflash2), the files the drafter goldens were computed from.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_qwen38_fixtures import verify_fixture, write_json, write_safetensors  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
NAME = "tiny-dflash2"
SEED = 20260401

VOCAB = 512
HIDDEN = 128
LAYERS = 2
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 32
INTERMEDIATE = 256
WINDOW = 16
THETA = 1e7
BLOCK = 8
CONV_KERNEL, CONV_GROUP = 2, 16
SEL_RANK, SEL_TOP_K = 8, 4
MASK_ID = 500
TARGET_LAYER_IDS = [0, 2, 3, 5, 6]
TARGET_LAYERS = 8
ENDOFTEXT = 510  # the tiny target's <|endoftext|> (pad and eos, as F1 has 248044 for both)


def config() -> dict:
    """F1's field set (sgl-project/SpecForge configs/qwen3.6-27b-dflash2.json) with section 14's
    values."""
    return {
        "architectures": ["DFlash2DraftModel"],
        "model_type": "qwen3",
        "dtype": "bfloat16",
        "is_causal": False,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": ENDOFTEXT,
        "pad_token_id": ENDOFTEXT,
        "dflash_config": {
            "block_size": BLOCK,
            "conv_group_size": CONV_GROUP,
            "conv_kernel_size": CONV_KERNEL,
            "mask_token_id": MASK_ID,
            "selector_rank": SEL_RANK,
            "selector_top_k": SEL_TOP_K,
            "target_layer_ids": TARGET_LAYER_IDS,
        },
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE,
        "layer_types": ["sliding_attention"] * LAYERS,
        "max_position_embeddings": 4096,
        "max_window_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "num_target_layers": TARGET_LAYERS,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": THETA, "rope_type": "default"},
        "sliding_window": WINDOW,
        "tie_word_embeddings": False,
        "use_cache": True,
        "use_sliding_window": True,
        "vocab_size": VOCAB,
    }


def make_weights() -> dict:
    """name -> ("BF16", float32 ndarray); names and shapes of spec section 11.2. Drawn in a fixed
    order (this order is part of the fixture: changing it changes every weight)."""
    rng = np.random.default_rng(SEED)
    H, I, hd = HIDDEN, INTERMEDIATE, HEAD_DIM
    groups = H // CONV_GROUP

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def matrix(out, inp):
        return normal((out, inp), 0.02)

    def plain_norm(n):
        return (1.0 + normal((n,), 0.1)).astype(np.float32)

    out = {}

    def put(name, value):
        out[name] = ("BF16", value)

    put("fc.weight", matrix(H, len(TARGET_LAYER_IDS) * H))
    put("hidden_norm.weight", plain_norm(H))
    for l in range(LAYERS):
        p = "layers.%d." % l
        put(p + "input_layernorm.weight", plain_norm(H))
        put(p + "attention_conv.base_kernel", normal((2, CONV_KERNEL, H), 0.3))
        put(p + "attention_conv.kernel_projection.weight", matrix(2 * CONV_KERNEL * groups, H))
        put(p + "self_attn.q_proj.weight", matrix(HEADS * hd, H))
        put(p + "self_attn.k_proj.weight", matrix(KV_HEADS * hd, H))
        put(p + "self_attn.v_proj.weight", matrix(KV_HEADS * hd, H))
        put(p + "self_attn.o_proj.weight", matrix(H, HEADS * hd))
        put(p + "self_attn.q_norm.weight", plain_norm(hd))
        put(p + "self_attn.k_norm.weight", plain_norm(hd))
        put(p + "post_attention_layernorm.weight", plain_norm(H))
        put(p + "mlp_conv.base_kernel", normal((2, CONV_KERNEL, H), 0.3))
        put(p + "mlp_conv.kernel_projection.weight", matrix(2 * CONV_KERNEL * groups, H))
        put(p + "mlp.gate_proj.weight", matrix(I, H))
        put(p + "mlp.up_proj.weight", matrix(I, H))
        put(p + "mlp.down_proj.weight", matrix(H, I))
    put("norm.weight", plain_norm(H))
    put("candidate_selector.hidden_projection.weight", matrix(SEL_RANK, H))
    put("candidate_selector.predecessor_codebook", normal((VOCAB, SEL_RANK), 0.5))
    put("candidate_selector.successor_codebook", normal((VOCAB, SEL_RANK), 0.5))
    return out


def write_fixture(root: Path) -> Path:
    d = root / NAME
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        if old.is_file():
            old.unlink()
    write_json(d / "config.json", config())
    write_safetensors(d / "model.safetensors", make_weights())
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "build" / "fixtures")
    ap.add_argument("--verify", type=Path, metavar="GOLDEN_DIR",
                    help="fail unless every written file has the sha256 recorded in "
                         "GOLDEN_DIR/tiny-dflash2.json")
    args = ap.parse_args()
    folder = write_fixture(args.out)
    if args.verify and not verify_fixture(folder, args.verify / (NAME + ".json"),
                                          "tests/goldens/dflash2/README.md"):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
