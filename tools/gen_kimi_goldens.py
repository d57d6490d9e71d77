#!/usr/bin/env python3
"""Whole-model goldens for the scaled-down Kimi K3 fixtures from the float64 transcription of
§5–§9 (tools/kimi_reference.py, numpy only; its pieces are checked against fla-core,
transformers and compressed-tensors). For each fixture tools/make_kimi_fixtures.py writes:

  <out>/<fixture>-reference.safetensors
      p{i}.ids            I32 [L]        prompt i: random ids below 500 (the fixture's specials),
                                         lengths 1, 7 and 13 (past the conv history and a
                                         residual block of layers)
      p{i}.logits         F32 [L, 512]   the logits at every position, decoded token by token
      p{i}.greedy         I32 [8]        the greedy continuation of the prompt
      p{i}.greedy_margin  F32 [8]        top-1 minus top-2 logit of each greedy choice

Usage: gen_kimi_goldens.py --fixtures DIR --out tests/goldens/kimi
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dflash2_reference import write_safetensors  # noqa: E402
from kimi_reference import Model  # noqa: E402

SEED = 20261204
LENGTHS = (1, 7, 13)
GREEDY = 8


def goldens(folder: Path) -> dict:
    model = Model(folder)
    rng = np.random.default_rng(SEED)
    out = {}
    for i, length in enumerate(LENGTHS):
        ids = rng.integers(0, 500, size=length).astype(np.int32)
        state = model.new_state()
        logits = [model.step(int(t), state) for t in ids]
        greedy, margins, last = [], [], logits[-1]
        for _ in range(GREEDY):
            order = np.argsort(-last, kind="stable")
            greedy.append(int(order[0]))
            margins.append(float(last[order[0]] - last[order[1]]))
            last = model.step(greedy[-1], state)
        out[f"p{i}.ids"] = ids
        out[f"p{i}.logits"] = np.array(logits, dtype=np.float32)
        out[f"p{i}.greedy"] = np.array(greedy, dtype=np.int32)
        out[f"p{i}.greedy_margin"] = np.array(margins, dtype=np.float32)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    for name in ("kimi-k3-tiny", "kimi-k3-small"):
        write_safetensors(args.out / f"{name}-reference.safetensors", goldens(args.fixtures / name))
        print(f"wrote {args.out / f'{name}-reference.safetensors'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
