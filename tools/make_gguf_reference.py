#!/usr/bin/env python3
"""Writes GGUF fixtures with the reference `gguf` package (gguf-py, from llama.cpp) for the C++ tests.

Outputs, under OUT/io/gguf/:
  reference.gguf    metadata of every value type and tensors of every type megadecode dequantises
  aligned64.gguf    the same tensors with general.alignment = 64
  manifest.json     what the reader must see: metadata values, tensor types, dims (ggml order),
                    data offsets, raw bytes (hex) and the values gguf-py dequantises them to

Nothing here is megadecode code: the file layout comes from gguf.GGUFWriter and the expected
values from gguf.quants (quantize where gguf-py has it, dequantize always).
"""

import argparse
import json
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType as Q, quants

SEED = 20260207


def k_quant_blocks(rng, qtype, n_blocks):
    """Random super-blocks with small, finite f16 scales (gguf-py only dequantises k-quants)."""
    block_elems, block_bytes = quants.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    scales = rng.uniform(0.001, 0.05, (n_blocks, 2)).astype(np.float16).view(np.uint8)
    if qtype in (Q.Q4_K, Q.Q5_K):
        raw[:, 0:4] = scales  # d, dmin
    else:  # Q6_K keeps d last
        raw[:, block_bytes - 2:] = scales[:, 0:2]
    return raw


def tensors(rng):
    """name -> (ggml type, numpy shape (rows, row length), raw uint8 bytes)."""
    out = {}
    out["plain.f32"] = (Q.F32, (3, 8), rng.standard_normal((3, 8)).astype(np.float32))
    out["plain.f16"] = (Q.F16, (2, 16), rng.standard_normal((2, 16)).astype(np.float16))
    values = rng.standard_normal((4, 64)).astype(np.float32)
    for name, qtype in (("bf16", Q.BF16), ("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_1", Q.Q4_1),
                        ("q5_0", Q.Q5_0)):
        out[f"quant.{name}"] = (qtype, values.shape, quants.quantize(values, qtype))
    out["quant.q4_k"] = (Q.Q4_K, (2, 512), k_quant_blocks(rng, Q.Q4_K, 4).reshape(2, -1))
    out["quant.q6_k"] = (Q.Q6_K, (3, 256), k_quant_blocks(rng, Q.Q6_K, 3).reshape(3, -1))
    out["quant.q5_k"] = (Q.Q5_K, (2, 256), k_quant_blocks(rng, Q.Q5_K, 2).reshape(2, -1))
    out["ints.i32"] = (Q.I32, (5,), rng.integers(-1000, 1000, (5,), dtype=np.int32))
    return out


def metadata(writer):
    writer.add_uint8("t.u8", 200)
    writer.add_int8("t.i8", -100)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -30000)
    writer.add_uint32("t.u32", 4000000000)
    writer.add_int32("t.i32", -2000000000)
    writer.add_float32("t.f32", 1.5)
    writer.add_bool("t.bool", True)
    writer.add_string("t.string", "héllo GGUF")
    writer.add_uint64("t.u64", 2**63 + 5)
    writer.add_int64("t.i64", -(2**62))
    writer.add_float64("t.f64", 3.141592653589793)
    writer.add_array("t.ints", [1, 2, 3])
    writer.add_array("t.strings", ["a", "bc", ""])
    writer.add_array("t.nested", [[1, 2], [3]])


def write(path, alignment, rng_seed):
    rng = np.random.default_rng(rng_seed)
    writer = GGUFWriter(path, "megadecode-test")
    if alignment:
        writer.add_custom_alignment(alignment)
    metadata(writer)
    entries = tensors(rng)
    for name, (qtype, shape, raw) in entries.items():
        writer.add_tensor(name, raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return entries


def describe(path, entries):
    """What the C++ reader must report, as seen by gguf-py's own reader."""
    reader = GGUFReader(path)
    out = {"alignment": int(reader.alignment), "data_offset": int(reader.data_offset),
           "tensors": {}}
    for t in reader.tensors:
        qtype, shape, _ = entries[t.name]
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        out["tensors"][t.name] = {
            "type": qtype.name,
            "dims": [int(d) for d in t.shape],
            "offset": int(t.data_offset),
            "hex": raw.tobytes().hex(),
        }
        if qtype != Q.I32:  # integer tensors are not dequantised
            values = quants.dequantize(np.asarray(t.data), qtype).astype(np.float32).reshape(-1)
            out["tensors"][t.name]["values"] = [float(v) for v in values]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    directory = args.out / "io" / "gguf"
    directory.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, alignment in (("reference", None), ("aligned64", 64)):
        path = directory / f"{name}.gguf"
        entries = write(path, alignment, SEED)
        manifest[name] = describe(path, entries)
    (directory / "manifest.json").write_text(json.dumps(manifest))


if __name__ == "__main__":
    main()
