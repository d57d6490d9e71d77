#!/usr/bin/env python3
"""Scaled-down DSpark drafters (RedHat speculators layout) for megadecode's tests.

The drafters of the Kimi K3 fixtures that tools/make_kimi_fixtures.py writes and of the Muse
Spark fixtures that tools/make_musespark_fixtures.py writes (spec: docs/models/kimi-k3-dspark.md
§13; DSpark for Muse Spark has the same structure on Muse's target: the drafter has its own
embedding and lm_head, and only the target's hidden size, vocabulary and layer count (tap ids in
2…L−1) constrain it). Each fixture is a folder with
  config.json        the speculators layout that src/models/drafters/dspark_config.cpp accepts:
                     speculators_model_type "dspark", markov_head_type "vanilla", the layer's
                     fields nested under transformer_layer_config (every layer
                     "sliding_attention", is_causal true, rope_parameters of rope_type "default"),
                     aux_hidden_state_layer_ids (target layers entered, 2…L−1), mask_token_id,
                     markov_rank, block_size, draft_vocab_size = the target vocabulary, the
                     confidence head's two switches; speculators_config.verifier names the target
                     fixture and its architecture (Kimi K3 or Muse Spark; the parser does not
                     read it)
  model.safetensors  every tensor of §13.2 at these sizes, all BF16, no prefix (the confidence
                     head's proj.weight [1, H (+ rank)] and proj.bias [1] where it is enabled)

Fixtures:
  dspark-kimi-k3-tiny   target kimi-k3-tiny (hidden 256, vocab 512, 10 layers): §15's drafter
                        exactly: 2 layers, heads 8 / kv 2 / head_dim 32, intermediate 512, window
                        16, theta 1e4, eps 1e-5, taps [4, 6, 9], mask 509, Markov rank 8, block 8,
                        confidence head over [hidden ; markov_w1[prev]] ([1, 264] + bias)
  dspark-kimi-k3-small  target kimi-k3-small (hidden 192, vocab 512, 6 layers), other widths so
                        that nothing is tuned to one shape: 3 layers, heads 6 / kv 3 / head_dim 16,
                        intermediate 256, window 8, theta 5e4, eps 1e-5, taps [2, 4, 5], mask 509,
                        Markov rank 8, block 6, no confidence head
  dspark-muse-spark-tiny   target muse-spark-tiny (hidden 512, vocab 1024, 6 layers): 2 layers,
                        heads 4 / kv 1 / head_dim 16, intermediate 160, window 6, theta 2e4,
                        eps 1e-5, taps [2, 3, 5], mask 495, Markov rank 12, block 8,
                        confidence head over [hidden ; markov_w1[prev]]
  dspark-muse-spark-small  target muse-spark-small (hidden 192, vocab 512, 5 layers): 3 layers,
                        heads 2 / kv 2 / head_dim 24, intermediate 200, window 10, theta 1e4,
                        eps 1e-5, taps [2, 3, 4] (every layer 2…L−1), mask 492, Markov rank 8,
                        block 5, confidence head over the hidden state alone
  dspark-kimi-k3-draftvocab  target kimi-k3-tiny, laid out as speculators saves a drafter with a
                        reduced draft vocabulary: draft_vocab_size 320 of 512 with d2t (int64
                        offsets: draft id d is target id d + d2t[d]) and t2d (bool [512]), no
                        embed_tokens (the target's table embeds), its own lm_head [320, 256] and
                        markov_w2 [320, rank] (markov_w1 keeps the target's 512 rows); 2 layers,
                        heads 4 / kv 1 / head_dim 32, intermediate 256, window 12, theta 1e4,
                        taps [3, 7], mask 509, Markov rank 8, block 6, confidence head with the
                        Markov code
The Muse masks are the highest ordinary (byte or merge) ids of the fixture tokenizers: above them
sit reserved and named special tokens (<|eot|> etc.) and, on the tiny fixture, untrained ids.
The Kimi mask (509) is a reserved/special id of the Kimi fixture tokenizers.

Weights (numpy default_rng, float32 draws rounded to bf16 with round-to-nearest-even), drawn in
the fixed order of make_weights, scaled so that activations stay O(1) and both parts of the
drafted logits matter:
  embed_tokens                         N(0, 1)              (rows of rms 1, like a normed input)
  fc                                   N(0, (taps·H)^-1/2)  (hidden_norm renormalises anyway)
  q/k/v_proj, gate/up_proj, lm_head    N(0, H^-1/2)         (inputs are RMS-normed: outputs ~1)
  o_proj, down_proj                    N(0, in^-1/2)
  norms (hidden_norm, norm, input/post_attention_layernorm, q/k_norm)   1 + N(0, 0.1)
  markov_w1                            N(0, 1)
  markov_w2                            N(0, rank^-1/2)      (bias = w2·w1[prev] has std ~1,
                                                             like the base logits lm_head·hid)
  confidence_head.proj.weight          N(0, in^-1/2)        (the logit has std ~1: confidences
  confidence_head.proj.bias            N(0, 0.5)             spread over (0, 1))

Numpy only, deterministic (fixed seeds), well under a second. Usage:
  make_dspark_fixtures.py --out DIR [--only NAME] [--verify GOLDEN_DIR]
--verify fails unless every written file has the sha256 recorded in GOLDEN_DIR/<fixture>.json
(tests/goldens/dspark, written by tools/dspark_reference.py from the files its goldens came from).
"""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_kimi_fixtures import TINY_CONFIG, small_config  # noqa: E402
import make_musespark_fixtures as musespark  # noqa: E402
from make_qwen38_fixtures import (fixture_arguments, tensor_bytes, verify_fixture,  # noqa: E402
                                  write_json, write_safetensors)

KIMI = "KimiK3ForConditionalGeneration"
MUSE = "MuseSparkForConditionalGeneration"


def kimi_text_config(target_config):
    """The Kimi target's text_config, built exactly as make_kimi_fixtures.py builds it."""
    return lambda: target_config(json.loads(TINY_CONFIG.read_text()))["text_config"]


def muse_text_config(target: str):
    """The Muse target's text_config, built exactly as make_musespark_fixtures.py builds it."""
    return lambda: musespark.text_config(musespark.FIXTURES[target])


# The drafter's own shape; hidden and vocabulary come from the target fixture's config.
FIXTURES = {
    "dspark-kimi-k3-tiny": dict(
        target="kimi-k3-tiny", target_text_config=kimi_text_config(lambda tiny: tiny),
        verifier=KIMI, seed=20261301, layers=2,
        heads=8, kv_heads=2, head_dim=32, intermediate=512, window=16, theta=10000.0, eps=1e-5,
        taps=[4, 6, 9], mask=509, rank=8, block=8, confidence="with_markov"),
    "dspark-kimi-k3-small": dict(
        target="kimi-k3-small", target_text_config=kimi_text_config(small_config),
        verifier=KIMI, seed=20261302, layers=3,
        heads=6, kv_heads=3, head_dim=16, intermediate=256, window=8, theta=50000.0, eps=1e-5,
        taps=[2, 4, 5], mask=509, rank=8, block=6, confidence=None),
    # Muse targets: 6 and 5 layers, so taps in 2..5 and 2..4. The masks are the top ordinary ids
    # (make_musespark_fixtures.py: 256 bytes + 240 merges on tiny, 256 + 237 on small).
    "dspark-muse-spark-tiny": dict(
        target="muse-spark-tiny", target_text_config=muse_text_config("muse-spark-tiny"),
        verifier=MUSE, seed=20261303, layers=2,
        heads=4, kv_heads=1, head_dim=16, intermediate=160, window=6, theta=20000.0, eps=1e-5,
        taps=[2, 3, 5], mask=495, rank=12, block=8, confidence="with_markov"),
    "dspark-muse-spark-small": dict(
        target="muse-spark-small", target_text_config=muse_text_config("muse-spark-small"),
        verifier=MUSE, seed=20261304, layers=3,
        heads=2, kv_heads=2, head_dim=24, intermediate=200, window=10, theta=10000.0, eps=1e-5,
        taps=[2, 3, 4], mask=492, rank=8, block=5, confidence="hidden_only"),
    "dspark-kimi-k3-draftvocab": dict(
        target="kimi-k3-tiny", target_text_config=kimi_text_config(lambda tiny: tiny),
        verifier=KIMI, seed=20261305, layers=2,
        heads=4, kv_heads=1, head_dim=32, intermediate=256, window=12, theta=10000.0, eps=1e-5,
        taps=[3, 7], mask=509, rank=8, block=6, confidence="with_markov",
        draft_vocab=320, own_embedding=False),
}


def draft_vocabulary(f: dict) -> np.ndarray:
    """The target ids of the draft vocabulary, ascending (speculators' order): a fixed random
    subset (the mask token need not be in it: the block embeds it, the head never predicts it)."""
    vocab = target_text_config(f)["vocab_size"]
    rng = np.random.default_rng(f["seed"] + 1)
    return np.sort(rng.choice(vocab, size=f["draft_vocab"], replace=False))


def target_text_config(f: dict) -> dict:
    """The target fixture's text_config (hidden_size, vocab_size, num_hidden_layers)."""
    return f["target_text_config"]()


def config(f: dict) -> dict:
    """The speculators layout of §13.1 (the field set of tests/data/configs/kimi-k3-dspark)."""
    t = target_text_config(f)
    hidden, vocab, target_layers = t["hidden_size"], t["vocab_size"], t["num_hidden_layers"]
    taps = f["taps"]
    # The rules dspark_config.cpp enforces, so that a typo here fails here.
    assert len(set(taps)) == len(taps) and all(2 <= i <= target_layers - 1 for i in taps), taps
    assert f["heads"] % f["kv_heads"] == 0 and f["head_dim"] % 2 == 0
    assert 0 <= f["mask"] < vocab and f["block"] >= 2
    if f["verifier"] == MUSE:   # not one of Muse's named special tokens at the top of the ids
        assert f["mask"] < t["vocab_used"] - len(musespark.SPECIAL_TOKENS), f["mask"]
    return {
        "architectures": ["DSparkSpeculator"],
        "speculators_model_type": "dspark",
        "speculators_config": {
            "algorithm": "dspark",
            "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy",
                                  "speculative_tokens": f["block"] - 1}],
            "verifier": {"name_or_path": f["target"],
                         "architectures": [f["verifier"]]},
        },
        "block_size": f["block"],
        "markov_rank": f["rank"],
        "markov_head_type": "vanilla",
        "enable_confidence_head": f["confidence"] is not None,
        "confidence_head_with_markov": f["confidence"] == "with_markov",
        "draft_vocab_size": f.get("draft_vocab", vocab),
        "mask_token_id": f["mask"],
        "tie_word_embeddings": False,
        "aux_hidden_state_layer_ids": taps,
        "transformer_layer_config": {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "dtype": "bfloat16",
            "num_hidden_layers": f["layers"],
            "hidden_size": hidden,
            "num_attention_heads": f["heads"],
            "num_key_value_heads": f["kv_heads"],
            "head_dim": f["head_dim"],
            "intermediate_size": f["intermediate"],
            "hidden_act": "silu",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "is_causal": True,
            "rms_norm_eps": f["eps"],
            "vocab_size": vocab,
            "max_position_embeddings": 4096,
            "sliding_window": f["window"],
            "use_sliding_window": True,
            "layer_types": ["sliding_attention"] * f["layers"],
            "rope_parameters": {"rope_theta": f["theta"], "rope_type": "default"},
            "tie_word_embeddings": False,
        },
    }


def make_weights(f: dict) -> dict:
    """name -> ("BF16", float32 ndarray), §13.2's names. The draw order is part of the fixture:
    changing it changes every weight."""
    t = target_text_config(f)
    h, v = t["hidden_size"], t["vocab_size"]
    heads, kv, hd = f["heads"], f["kv_heads"], f["head_dim"]
    inter, rank = f["intermediate"], f["rank"]
    draft = f.get("draft_vocab", v)
    rng = np.random.default_rng(f["seed"])

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n):
        return (1.0 + normal((n,), 0.1)).astype(np.float32)

    w = {}

    def put(name, value):
        w[name] = ("BF16", value)

    embedding = normal((v, h), 1.0)
    if f.get("own_embedding", True):
        put("embed_tokens.weight", embedding)
    put("fc.weight", normal((h, len(f["taps"]) * h), (len(f["taps"]) * h) ** -0.5))
    put("hidden_norm.weight", norm(h))
    for layer in range(f["layers"]):
        p = f"layers.{layer}."
        put(p + "input_layernorm.weight", norm(h))
        put(p + "self_attn.q_proj.weight", normal((heads * hd, h), h ** -0.5))
        put(p + "self_attn.k_proj.weight", normal((kv * hd, h), h ** -0.5))
        put(p + "self_attn.v_proj.weight", normal((kv * hd, h), h ** -0.5))
        put(p + "self_attn.o_proj.weight", normal((h, heads * hd), (heads * hd) ** -0.5))
        put(p + "self_attn.q_norm.weight", norm(hd))
        put(p + "self_attn.k_norm.weight", norm(hd))
        put(p + "post_attention_layernorm.weight", norm(h))
        put(p + "mlp.gate_proj.weight", normal((inter, h), h ** -0.5))
        put(p + "mlp.up_proj.weight", normal((inter, h), h ** -0.5))
        put(p + "mlp.down_proj.weight", normal((h, inter), inter ** -0.5))
    put("norm.weight", norm(h))
    put("lm_head.weight", normal((draft, h), h ** -0.5))
    put("markov_head.markov_w1.weight", normal((v, rank), 1.0))
    put("markov_head.markov_w2.weight", normal((draft, rank), rank ** -0.5))
    if draft != v:
        ids = draft_vocabulary(f)
        w["d2t"] = ("I64", ids - np.arange(draft))
        t2d = np.zeros(v, dtype=np.uint8)
        t2d[ids] = 1
        w["t2d"] = ("BOOL", t2d)
    if f["confidence"] is not None:
        inputs = h + (rank if f["confidence"] == "with_markov" else 0)
        put("confidence_head.proj.weight", normal((1, inputs), inputs ** -0.5))
        put("confidence_head.proj.bias", normal((1,), 0.5))
    return w


def encode(value: np.ndarray, dtype: str) -> bytes:
    """Tensor bytes: speculators' integer maps as they are, weights by tensor_bytes."""
    if dtype == "I64":
        return value.astype("<i8").tobytes()
    if dtype == "BOOL":
        return value.astype(np.uint8).tobytes()
    return tensor_bytes(value, dtype)


def write_fixture(root: Path, name: str) -> Path:
    f = FIXTURES[name]
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        if old.is_file():
            old.unlink()
    write_json(d / "config.json", config(f))
    write_safetensors(d / "model.safetensors", make_weights(f), encode=encode)
    return d


def main() -> int:
    args = fixture_arguments(__doc__.split("\n")[0], FIXTURES)
    for name in FIXTURES:
        if args.only and name != args.only:
            continue
        folder = write_fixture(args.out, name)
        if args.verify and not verify_fixture(folder, args.verify / f"{name}.json",
                                              "tests/goldens/dspark/README.md"):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
