#!/usr/bin/env python3
"""MXFP4 dequantisation goldens from compressed-tensors' own `mxfp4-pack-quantized` compressor
(`MXFP4PackedCompressor.decompress`: its nibble unpacking and its E8M0 scale decoding), so that
megadecode's MXFP4 decoder (src/kernels/mxfp4.h) is compared with code no one on this project
wrote. The Kimi K3 checkpoint's routed experts use this format (docs/models/kimi-k3-dspark.md §9).

Runs only in .venv-golden (tools/setup-golden-venv); CI never runs it, it reads the committed
output:

  <out>/mxfp4-compressed-tensors.safetensors
      weight_packed  U8  [16, 64]   random bytes: every code in both nibbles, −0 included
      weight_scale   U8  [16, 4]    random E8M0 bytes in 1…254 (0 and 255 are refused at load),
                                    with 1, 127, 128 and 254 present
      weight         F32 [16, 128]  compressed-tensors' dequantised weight (exact: at most two
                                    significant bits times a power of two), as float32

Usage: gen_mxfp4_goldens.py --out tests/goldens/kimi
"""

import argparse
from pathlib import Path

import compressed_tensors
import numpy as np
import torch
from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from safetensors.torch import save_file

SEED = 20261204
ROWS, COLS, GROUP = 16, 128, 32


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args().out
    rng = np.random.default_rng(SEED)
    packed = rng.integers(0, 256, size=(ROWS, COLS // 2), dtype=np.uint8)
    scale = rng.integers(1, 255, size=(ROWS, COLS // GROUP), dtype=np.uint8)
    scale[0, :4] = [1, 127, 128, 254]
    packed[0, 16:32] = np.arange(16, dtype=np.uint8) * 0x11  # group 1 of row 0: each code twice
    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(num_bits=4, type="float", strategy="group", group_size=GROUP,
                                 scale_dtype=torch.uint8))
    state = MXFP4PackedCompressor.decompress(
        {"weight_packed": torch.from_numpy(packed.copy()),
         "weight_scale": torch.from_numpy(scale.copy())}, scheme)
    weight = state["weight"].to(torch.float32)
    assert weight.shape == (ROWS, COLS), weight.shape
    out.mkdir(parents=True, exist_ok=True)
    save_file({"weight_packed": torch.from_numpy(packed), "weight_scale": torch.from_numpy(scale),
               "weight": weight.contiguous()},
              str(out / "mxfp4-compressed-tensors.safetensors"),
              metadata={"compressed_tensors": compressed_tensors.__version__,
                        "torch": torch.__version__, "seed": str(SEED)})
    print(f"wrote {out / 'mxfp4-compressed-tensors.safetensors'}: weight dtype from the "
          f"compressor {state['weight'].dtype}, {int(torch.isinf(weight).sum())} infinities")


if __name__ == "__main__":
    main()
