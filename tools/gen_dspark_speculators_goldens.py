#!/usr/bin/env python3
"""DSpark goldens from `speculators` (vLLM project), the independent reference of issue 17.

speculators' DSparkDraftModel is a training model: DFlash's anchored-block backbone
(speculators/models/dflash/core.py `_backbone_forward`: context = fc(taps) → hidden_norm, keys and
values of the context without the layer's input norm, the block [anchor, mask, …] at positions
anchor … anchor + B − 1 seeing the context positions [anchor − W, anchor) and, the layers being
"sliding_attention" with sliding_window_non_causal false, the block rows up to its own), then
DSpark's MarkovHead (vanilla: bias = markov_w2(markov_w1[prev])) and ConfidenceHead
(proj([hidden ; markov_w1[prev]]) or proj(hidden)), all unmodified and in float32. Its
training forward teacher-forces `prev` with the ground-truth block tokens; inference walks the
chain left to right instead (each draft is the argmax of its row and the next row's `prev`).
This script runs that walk over speculators' own modules: for slot k it asks
MarkovHead.block_bias for the bias of prev_k, takes the first maximum of logits_k + bias, and
asks ConfidenceHead for slot k's logit (σ of it is the confidence, as speculators' loss reads it).

A reduced draft vocabulary (dspark-kimi-k3-draftvocab) goes through speculators' own d2t/t2d
buffers and reduced lm_head; its argmax is a draft id d, the draft the target id d + d2t[d]
(speculators' offset convention, as its xpress drafter maps ids). speculators embeds with the
verifier's table (it never saves embed_tokens): a fixture without one gets its target fixture's.

The only glue written here: the chain loop, the single anchor (loss_mask 1 at the anchor only and
max_anchors = 1, so speculators' random anchor choice has one candidate), the taps (the formula of
tests/goldens/dspark/README.md for every context position) and loading the fixture's
safetensors into the model. Attention is speculators' "eager" path (its float mask), the one
that runs on a CPU without compiling flex attention.

Runs in .venv-golden (torch, transformers) with `speculators` 0.9.0 installed there without its
pinned dependencies (pip install --no-deps speculators==0.9.0 datasets openai hs-connectors): it
pins transformers <= 5.19, and the modules used here work with the golden venv's 5.24.

  .venv-golden/bin/python tools/gen_dspark_speculators_goldens.py --fixtures build/fixtures \\
      --out tests/goldens/dspark/speculators
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dspark_reference import CASES, dumps, f32, make_taps, target_embedding  # noqa: E402

from speculators.models.dspark import DSparkDraftModel  # noqa: E402
from speculators.models.dspark.config import DSparkSpeculatorConfig  # noqa: E402


def load_model(folder: Path) -> DSparkDraftModel:
    raw = json.loads((folder / "config.json").read_text())
    target = folder.parent / raw["speculators_config"]["verifier"]["name_or_path"]
    # No verifier to fetch: the fixture's own embed_tokens and lm_head are loaded below.
    raw["speculators_config"]["verifier"]["name_or_path"] = None
    raw["transformer_layer_config"]["_attn_implementation"] = "eager"
    config = DSparkSpeculatorConfig.model_validate(raw)
    config.transformer_layer_config._attn_implementation = "eager"  # noqa: SLF001
    model = DSparkDraftModel(config).float().eval()
    weights = {k: v if k in ("d2t", "t2d") else v.float()
               for k, v in load_file(str(folder / "model.safetensors")).items()}
    if "embed_tokens.weight" not in weights:
        weights["embed_tokens.weight"] = torch.from_numpy(target_embedding(target)).float()
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"verifier_lm_head.weight", "verifier_norm.weight"}, missing
    return model


@torch.no_grad()
def compute_case(fixtures: Path, name: str) -> dict:
    case = CASES[name]
    folder = fixtures / name
    model = load_model(folder)
    config = model.config
    block, n, anchor = config.block_size, case["context_length"], case["anchor"]
    hidden = config.transformer_layer_config.hidden_size
    taps_count = len(config.aux_hidden_state_layer_ids)
    # One anchor at position n: a sequence long enough that n is a valid anchor (speculators
    # excludes the last block_size positions) and a loss mask that allows only n.
    total = n + block + 1
    taps = make_taps(total, taps_count, hidden).reshape(1, total, taps_count * hidden)
    input_ids = torch.zeros(1, total, dtype=torch.long)
    input_ids[0, n] = anchor
    loss_mask = torch.zeros(1, total, dtype=torch.long)
    loss_mask[0, n] = 1
    hidden_rows, base, *_ = model._backbone_forward(  # noqa: SLF001
        torch.from_numpy(taps).float(), input_ids, loss_mask, torch.zeros(1, total, hidden),
        torch.zeros(1, total, dtype=torch.long), max_anchors=1)
    hidden_rows, base = hidden_rows[0], base[0]  # [block, H], [block, V]

    prev, drafts, logits, confidences = anchor, [], [], []
    for k in range(block - 1):
        prev_ids = torch.tensor([[prev]])
        bias = model.markov_head.block_bias(prev_token_ids=prev_ids,
                                            hidden_states=hidden_rows[k].view(1, 1, -1))
        row = base[k] + bias.view(-1)
        if model.confidence_head is not None:
            features = hidden_rows[k].view(1, 1, -1)
            if config.confidence_head_with_markov:
                features = torch.cat([features, model.markov_head.prev_embeddings(prev_ids)], -1)
            confidences.append(float(torch.sigmoid(model.confidence_head(features)).item()))
        prev = int(torch.argmax(row).item())  # the first maximum
        if model.d2t is not None:
            prev += int(model.d2t[prev].item())
        drafts.append(prev)
        logits.append(row.numpy())
    logits = np.array(logits)
    return {
        "fixture": name,
        "generator": "tools/gen_dspark_speculators_goldens.py",
        "reference": "speculators 0.9.0 DSparkDraftModel (_backbone_forward, MarkovHead, "
                     "ConfidenceHead), float32, eager attention; the inference chain walked "
                     "over its modules",
        "torch": torch.__version__,
        "fixture_sha256": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                           for p in sorted(folder.iterdir()) if p.is_file()},
        "context_length": n,
        "anchor": anchor,
        "drafts": drafts,
        "confidences": [f32(c) for c in confidences] if confidences else None,
        "max_abs_logit": f32(np.abs(logits).max()),
        "logits": [[f32(v) for v in row] for row in logits],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in CASES:
        g = compute_case(args.fixtures, name)
        ours = json.loads((Path(__file__).resolve().parent.parent / "tests" / "goldens" /
                           "dspark" / f"{name}.json").read_text())
        diff = np.abs(np.array(g["logits"]) - np.array(ours["logits"])).max()
        (args.out / f"{name}.json").write_text(dumps(g) + "\n")
        print(f"{name}: drafts {g['drafts']} (float64 transcription: {ours['drafts']}), "
              f"logits differ from it by {diff:.3g} ({diff / g['max_abs_logit']:.3g} of max), "
              f"confidences {g['confidences']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
