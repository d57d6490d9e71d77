#!/usr/bin/env python3
"""Goldens for megadecode's Hugging Face Llama loader (tests/llama/llama_hf_test.cpp).

Builds the tiny-llama fixture with make_llama_fixture.py, loads it with transformers'
LlamaForCausalLM in float32 (the bf16 weights widened exactly; eager attention), and writes to
tests/goldens/llama_hf/:
  tiny-llama.safetensors  logits_<i> [T_i, vocab] F32 for each prompt (every position)
  tiny-llama.json         prompts, the 24-token greedy continuation of the last prompt (full
                          recompute each step, no cache), the sha256 of every fixture file
Run with the golden venv (torch, transformers):
  .venv-golden/bin/python tools/gen_llama_goldens.py
"""

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import LlamaForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_llama_fixture as fixture  # noqa: E402
from make_qwen38_fixtures import write_json  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "goldens" / "llama_hf"
STEPS = 24


def prompts() -> list:
    rng = np.random.default_rng(7)
    # Ids below 500 (bytes and merges), away from the special tokens at the top.
    return [[int(t) for t in rng.integers(0, 500, size=n)] for n in (1, 9, 40)]


def main() -> int:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        d = fixture.write_fixture(Path(tmp))
        sha = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}
        model = LlamaForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    tensors, ps = {}, prompts()
    with torch.no_grad():
        for i, p in enumerate(ps):
            logits = model(torch.tensor([p])).logits[0].float().numpy()
            tensors[f"logits_{i}"] = logits
        seq, greedy, margins = list(ps[-1]), [], []
        for _ in range(STEPS):
            last = model(torch.tensor([seq])).logits[0, -1].float().numpy()
            top = np.argsort(last)[::-1]
            greedy.append(int(top[0]))
            margins.append(float(last[top[0]] - last[top[1]]))
            seq.append(int(top[0]))
    OUT.mkdir(parents=True, exist_ok=True)
    from safetensors.numpy import save_file
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()},
              str(OUT / f"{fixture.NAME}.safetensors"))
    write_json(OUT / f"{fixture.NAME}.json", {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "prompts": ps,
        "greedy_prompt": len(ps) - 1,
        "greedy": greedy,
        "greedy_margins": margins,
        "fixture_sha256": sha,
    })
    print("max |logit|", max(float(np.abs(v).max()) for v in tensors.values()),
          "min greedy margin", min(margins))
    return 0


if __name__ == "__main__":
    sys.exit(main())
