#!/usr/bin/env python3
"""Kimi Delta Attention goldens from fla-core's own naive KDA (`fla/ops/kda/naive.py`:
`naive_recurrent_kda`, the token-by-token rule, and `naive_chunk_kda`, the chunked WY form), so
that megadecode's KDA kernels (src/kernels/kda_rule.h) are compared with code no one on this
project wrote (docs/models/kimi-k3-dspark.md §6.2 step 4 and §6.3).

fla-core must not be installed into .venv-golden: it replaces transformers' pure-torch delta-rule
code that the Qwen goldens come from (tools/setup-golden-venv refuses it). Install it, with
einops, into a folder of its own and name that folder; only naive.py is loaded from it (pure
torch, no triton):

  .venv-golden/bin/python -m pip install --no-deps --target /tmp/fla fla-core==0.6.0 einops
  .venv-golden/bin/python tools/gen_kda_goldens.py --fla /tmp/fla --out tests/goldens/kimi

Output <out>/kda-fla.safetensors (float32; H = 2 heads, d = 32, T = 32 tokens, one sequence):
  q, k     [T, H, d]  L2-normalised keys and queries (q before fla's 1/sqrt(d) scale)
  v        [T, H, d]
  g        [T, H, d]  log-decay per key channel from the lower-bound gate, −5·σ(·) ∈ (−5, 0)
  beta     [T, H]
  state0   [H, d, d]  the initial state, fla's layout S[key][value]
  recurrent.o, recurrent.state   [T, H, d], [H, d, d]   naive_recurrent_kda
  chunk16.o, chunk16.state       the same from naive_chunk_kda with chunk_size 16
"""

import argparse
import importlib.util
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

SEED = 20261204
T, H, D = 32, 2, 32


def load_naive(fla_dir: Path):
    sys.path.insert(0, str(fla_dir))  # for einops
    spec = importlib.util.spec_from_file_location("fla_kda_naive",
                                                  fla_dir / "fla" / "ops" / "kda" / "naive.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fla", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    naive = load_naive(args.fla)
    gen = torch.Generator().manual_seed(SEED)
    q = torch.nn.functional.normalize(torch.randn(1, T, H, D, generator=gen), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(1, T, H, D, generator=gen), dim=-1)
    v = torch.randn(1, T, H, D, generator=gen)
    # The lower-bound gate's range, with some channels near −5 (fast decay) and some near 0.
    g = -5.0 * torch.sigmoid(3.0 * torch.randn(1, T, H, D, generator=gen))
    beta = torch.sigmoid(torch.randn(1, T, H, generator=gen))
    state0 = 0.5 * torch.randn(1, H, D, D, generator=gen)
    o_rec, s_rec = naive.naive_recurrent_kda(q, k, v, g, beta, initial_state=state0.clone(),
                                             output_final_state=True)
    o_chunk, s_chunk = naive.naive_chunk_kda(q, k, v, g, beta, initial_state=state0.clone(),
                                             output_final_state=True, chunk_size=16)
    tensors = {"q": q[0], "k": k[0], "v": v[0], "g": g[0], "beta": beta[0], "state0": state0[0],
               "recurrent.o": o_rec[0], "recurrent.state": s_rec[0],
               "chunk16.o": o_chunk[0], "chunk16.state": s_chunk[0]}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "kda-fla.safetensors"
    save_file({name: t.contiguous().float() for name, t in tensors.items()}, str(path),
              metadata={"fla_core": "0.6.0", "torch": torch.__version__, "seed": str(SEED)})
    print(f"wrote {path}; recurrent vs chunk max |Δo| {float((o_rec - o_chunk).abs().max()):.3g}")


if __name__ == "__main__":
    main()
