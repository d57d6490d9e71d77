#!/usr/bin/env python3
"""Writes safetensors fixtures with the reference `safetensors` library, for the C++ io tests.

Outputs, under OUT/io/:
  reference/single/model.safetensors    every dtype megadecode reads, written by safetensors
  reference/sharded/                    shards split by huggingface_hub + model.safetensors.index.json
  reference/manifest.json               what each tensor must read back as (dtype, shape, bytes)
  differential.json                     mutated files with the reference library's verdict on each

Nothing here is megadecode code: the expected values come from numpy and the reference library,
so the C++ reader is compared with an implementation no one on this project wrote.
"""

import argparse
import json
import random
import struct
from pathlib import Path

import numpy as np
from safetensors import deserialize, serialize
from safetensors.numpy import save_file
from safetensors import _safetensors_rust as rust

SEED = 20260125
DIFFERENTIAL_CASES = 3000

# Narrow float formats numpy lacks: the raw bit patterns are stored through the low-level API.
RAW_DTYPES = {"BF16": ("bfloat16", 2), "F8_E4M3": ("float8_e4m3fn", 1),
              "F8_E5M2": ("float8_e5m2", 1)}


def numpy_tensors(rng: np.random.Generator) -> dict:
    return {
        "f16": rng.standard_normal((3, 5)).astype(np.float16),
        "f32": rng.standard_normal((4, 3)).astype(np.float32),
        "f64": rng.standard_normal((2,)).astype(np.float64),
        "i8": rng.integers(-128, 128, (7,), dtype=np.int8),
        "i16": rng.integers(-30000, 30000, (2, 2), dtype=np.int16),
        "i32": rng.integers(-(2**31), 2**31, (3,), dtype=np.int32),
        "i64": rng.integers(-(2**62), 2**62, (2, 1, 2), dtype=np.int64),
        "u8": rng.integers(0, 256, (9,), dtype=np.uint8),
        "bool": rng.integers(0, 2, (5,)).astype(np.bool_),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }


def raw_tensors(rng: np.random.Generator) -> dict:
    """name -> (safetensors dtype, shape, raw little-endian bytes)."""
    out = {}
    for name, shape in (("BF16", (4, 6)), ("F8_E4M3", (3, 8)), ("F8_E5M2", (5,))):
        _, size = RAW_DTYPES[name]
        count = int(np.prod(shape)) * size
        out[name.lower()] = (name, list(shape), rng.integers(0, 256, count, dtype=np.uint8).tobytes())
    return out


def write_single(directory: Path, rng: np.random.Generator) -> dict:
    """One file mixing numpy-backed and raw dtypes, serialized by the Rust core in one call."""
    tensors = {k: np.ascontiguousarray(v) for k, v in numpy_tensors(rng).items()}
    raws = raw_tensors(rng)
    keep_alive = []
    specs = {}
    for name, array in tensors.items():
        specs[name] = rust.TensorSpec(dtype=array.dtype.name, shape=list(array.shape),
                                      data_ptr=array.ctypes.data, data_len=array.nbytes)
    for name, (dtype, shape, data) in raws.items():
        buffer = np.frombuffer(data, dtype=np.uint8).copy()
        keep_alive.append(buffer)
        specs[name] = rust.TensorSpec(dtype=RAW_DTYPES[dtype][0], shape=shape,
                                      data_ptr=buffer.ctypes.data, data_len=buffer.nbytes)
    metadata = {"format": "np", "producer": "tools/make_safetensors_reference.py"}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.safetensors").write_bytes(rust.serialize(specs, metadata))
    del keep_alive

    # Read back with the reference reader: this is what the C++ reader must reproduce.
    return describe(deserialize((directory / "model.safetensors").read_bytes()), metadata)


def describe(entries, metadata) -> dict:
    return {"metadata": metadata,
            "tensors": {name: {"dtype": t["dtype"], "shape": list(t["shape"]),
                               "hex": bytes(t["data"]).hex()} for name, t in entries}}


def write_sharded(directory: Path, rng: np.random.Generator) -> dict:
    """Shards as huggingface_hub splits them (a small max size forces several files)."""
    state = {f"model.layers.{i}.mlp.down_proj.weight": rng.standard_normal((8, 4)).astype(np.float32)
             for i in range(5)}
    state["model.embed_tokens.weight"] = rng.integers(0, 256, (16, 8), dtype=np.uint8)
    state["lm_head.weight"] = rng.standard_normal((6, 4)).astype(np.float16)
    filename_to_tensors, total_size = split_into_shards(state, max_shard_size=300)
    assert len(filename_to_tensors) >= 3
    directory.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    for filename, names in filename_to_tensors.items():
        save_file({n: state[n] for n in names}, str(directory / filename), metadata={"format": "np"})
        weight_map.update({n: filename for n in names})
    index = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    entries = []
    for filename in filename_to_tensors:
        entries += deserialize((directory / filename).read_bytes())
    result = describe(entries, {"format": "np"})
    result["files"] = sorted(filename_to_tensors)
    return result


def split_into_shards(state: dict, max_shard_size: int):
    """huggingface_hub's split (what save_pretrained uses) when available; a greedy one if not."""
    try:
        from huggingface_hub import split_state_dict_into_shards_factory
    except ImportError:
        split_state_dict_into_shards_factory = None
    if split_state_dict_into_shards_factory is not None:
        split = split_state_dict_into_shards_factory(
            state, get_storage_size=lambda t: t.nbytes,
            filename_pattern="model{suffix}.safetensors", max_shard_size=max_shard_size)
        return split.filename_to_tensors, split.metadata["total_size"]
    shards, current, size = [], [], 0
    for name, tensor in state.items():
        if current and size + tensor.nbytes > max_shard_size:
            shards.append(current)
            current, size = [], 0
        current.append(name)
        size += tensor.nbytes
    shards.append(current)
    names = {f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors": s for i, s in enumerate(shards)}
    return names, sum(t.nbytes for t in state.values())


# ---- differential cases: mutate valid files, record what the reference library says ----

def seed_files(rng: np.random.Generator) -> list:
    seeds = []
    for _ in range(4):
        tensors = {f"t{i}": rng.integers(0, 256, int(rng.integers(0, 9)), dtype=np.uint8)
                   .view(np.uint8) for i in range(int(rng.integers(1, 4)))}
        tensors["w"] = rng.standard_normal((2, 3)).astype(np.float32)
        tensors["h"] = rng.standard_normal((3,)).astype(np.float16)
        tensors["z"] = np.zeros((0, 2), dtype=np.int32)
        seeds.append(serialize_numpy(tensors, {"k": "v"} if rng.integers(0, 2) else None))
    return seeds


def serialize_numpy(tensors, metadata) -> bytes:
    from safetensors.numpy import save
    return save(tensors, metadata=metadata)


def split_file(data: bytes):
    if len(data) < 8:
        return None
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        return None
    try:
        header = json.loads(data[8:8 + n])
    except (ValueError, UnicodeDecodeError):
        return None
    return (header, data[8 + n:]) if isinstance(header, dict) else None


def pack(header, body: bytes, text: str = None) -> bytes:
    text = json.dumps(header, separators=(",", ":")) if text is None else text
    raw = text.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(raw)) + raw + body


TRICKY = [0, 1, 2, 3, 7, 8, 16, 255, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1]


def mutate(data: bytes, r: random.Random) -> bytes:
    try:
        return mutate_once(data, r)
    except (KeyError, TypeError, IndexError, AttributeError):
        return data  # an earlier mutation already broke the structure this one edits


def mutate_once(data: bytes, r: random.Random) -> bytes:
    kind = r.randrange(12)
    parts = split_file(data)
    if kind == 0 and data:  # bit flips
        b = bytearray(data)
        for _ in range(r.randint(1, 6)):
            b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        return bytes(b)
    if kind == 1:  # truncation
        return data[:r.randrange(len(data) + 1)]
    if kind == 2:  # the length field lies
        (n,) = struct.unpack("<Q", data[:8])
        lie = n + r.randint(-8, 8) if r.random() < 0.7 else r.choice(TRICKY) % 2**64
        return struct.pack("<Q", lie % 2**64) + data[8:]
    if kind == 3:  # trailing or missing data bytes
        return data + bytes(r.randrange(1, 9)) if r.random() < 0.5 else data[:-r.randint(1, 4)]
    if parts is None:
        return data
    header, body = parts
    names = [k for k in header if k != "__metadata__"]
    name = r.choice(names)
    entry = header[name]
    if kind == 4:
        entry["data_offsets"] = [r.choice(TRICKY + [len(body)]), r.choice(TRICKY + [len(body)])]
    elif kind == 5:  # nudge an end offset: size mismatch, overlap or gap
        entry["data_offsets"][1] += r.randint(-3, 3)
    elif kind == 6:
        entry["shape"] = [r.choice(TRICKY) for _ in range(r.randint(0, 3))]
    elif kind == 7:
        entry["dtype"] = r.choice(["BF16", "F16", "F32", "F64", "I8", "U8", "I16", "I32", "I64",
                                   "BOOL", "F8_E4M3", "F8_E5M2", "bf16", "", "F4", "U16"])
    elif kind == 8:  # move a tensor to open a gap, shrinking nothing
        entry["data_offsets"] = [o + r.randint(1, 4) for o in entry["data_offsets"]]
        body += bytes(4)
    elif kind == 9:  # duplicated tensor name, kept textually
        text = json.dumps(header, separators=(",", ":"))
        dup = json.dumps({name: entry}, separators=(",", ":"))[1:-1]
        return pack(header, body, text[:-1] + "," + dup + "}")
    elif kind == 10:  # textual garbage inside the header
        text = json.dumps(header, separators=(",", ":"))
        at = r.randrange(len(text) + 1)
        token = r.choice(["{", "}", "[", "]", ",", ":", "\"", "-", "1e3", "-0", "0.0", "null",
                          "\\u0000", " ", "\u00e9"])
        return pack(header, body, text[:at] + token + text[at:])
    else:
        header["__metadata__"] = r.choice([{"a": 1}, [], {"a": "b"}, "x", None])
    return pack(header, body)


def verdict(data: bytes) -> dict:
    try:
        entries = deserialize(data)
    except Exception as error:  # the reference says no
        return {"accepted": False, "error": str(error)[:200]}
    return {"accepted": True,
            "tensors": {name: {"dtype": t["dtype"], "shape": list(t["shape"]),
                               "hex": bytes(t["data"]).hex()} for name, t in entries}}


def write_differential(path: Path, rng: np.random.Generator) -> None:
    r = random.Random(SEED)
    seeds = seed_files(rng)
    cases = []
    for i in range(DIFFERENTIAL_CASES):
        data = seeds[i % len(seeds)]
        for _ in range(r.randint(1, 2)):
            data = mutate(data, r)
        cases.append({"hex": data.hex(), **verdict(data)})
    path.write_text(json.dumps({"seed": SEED, "cases": cases}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    out = args.out / "io"
    rng = np.random.default_rng(SEED)
    manifest = {"single": write_single(out / "reference" / "single", rng),
                "sharded": write_sharded(out / "reference" / "sharded", rng)}
    (out / "reference" / "manifest.json").write_text(json.dumps(manifest, indent=1))
    write_differential(out / "differential.json", rng)


if __name__ == "__main__":
    main()
