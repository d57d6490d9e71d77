#!/usr/bin/env python3
"""Reference logits and greedy continuations for the scaled-down Muse Spark fixtures, computed by
Hugging Face transformers' own `muse_spark` implementation (float32, eager attention), so that
megadecode's C++ forward is compared against code no one on this project wrote.

The NVFP4 experts are dequantised independently of megadecode and of the fixture script: the
nibbles by compressed-tensors' `unpack_fp4_from_uint8`, the block scales by torch's own
float8_e4m3fn, times the per-half global scale (`_weight_scale_2`). The result must equal the
fixture script's own dequantisation bit for bit (checked here).

Runs only in .venv-golden (tools/setup-golden-venv); CI never runs it, it reads the committed
outputs. For each fixture made by tools/make_musespark_fixtures.py:

  <out>/<fixture>.safetensors
      p{i}.ids            I32 [L]          prompt i: random trained ids of lengths 1, 7, 40, 300
                                           (longer than the window; longer than a prefill chunk)
      p{i}.logits         F32 [L, vocab]   softcapped logits of every position, one forward, no
                                           cache (HF does not mask the untrained tail)
      p{i}.greedy         I32 [32]         greedy continuation over the trained ids (p0..p2)
      p{i}.greedy_margin  F32 [32]         top-1 minus top-2 trained logit of each greedy choice
      nvfp4.layer{l}.gate_up / .up / .down  F32 [4, K]   (NVFP4 fixtures) rows 0..3 of expert
                                           0's dequantised gate half, up half and down of each
                                           NVFP4 layer
  <out>/<fixture>.json  versions, sha256 of the fixture files, prompt lengths, max |logit| and
                        minimum greedy margin per prompt, HF's loading report.
  <out>/muse-spark-tiny-int8.safetensors (+ .json)
      the int8-dense twin (§7): the same fixture with q, k, v, gate, o, pre_expert_proj,
      post_expert_proj and lm_head quantised to int8 per output row by this script's own
      transcription of §7 (numpy, f32 reciprocal multiplied, round half to even) and loaded into
      transformers as scale · code in f32; prompts p0..p2 (lengths 1, 7, 40) with logits and
      greedy continuations as above, and for layer 0's matrices and lm_head:
      int8.<matrix>.scales F32 [rows] and int8.<matrix>.codes I8 [8, cols] (rows 0..7), so that
      megadecode's quantiser is checked bit for bit.

Usage: gen_musespark_goldens.py --fixtures DIR --out tests/goldens/musespark [--only NAME]
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

import compressed_tensors  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import MuseSparkConfig, MuseSparkForConditionalGeneration  # noqa: E402

import make_musespark_fixtures as fixtures  # noqa: E402

PROMPT_SEED = 20261206
PROMPT_LENGTHS = (1, 7, 40, 300)
GREEDY_PROMPTS = 3
GREEDY_STEPS = 32
TEXT_PREFIX = "model.language_model."


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_tensors(folder: Path) -> dict:
    """Every tensor as numpy: BF16 widened to f32, F8_E4M3 as its bytes."""
    tensors = {}
    for file in sorted(folder.glob("*.safetensors")):
        for name, value in load_file(str(file)).items():
            if value.dtype == torch.bfloat16:
                value = value.to(torch.float32)
            elif value.dtype == torch.float8_e4m3fn:
                value = value.view(torch.uint8)
            tensors[name] = value.numpy()
    return tensors


def dequantize_independently(codes: np.ndarray, scales: np.ndarray, global_scales) -> np.ndarray:
    """One expert's [rows, K/2] packed codes, [rows, K/16] e4m3 bytes and per-row global scale."""
    rows, k = codes.shape[0], codes.shape[1] * 2
    values = unpack_fp4_from_uint8(torch.from_numpy(codes.copy()), rows, k, dtype=torch.float32)
    block = torch.from_numpy(scales.copy()).view(torch.float8_e4m3fn).to(torch.float32)
    block = block.repeat_interleave(16, dim=1)
    g = torch.from_numpy(np.asarray(global_scales, np.float32).reshape(rows, 1))
    return ((values * block) * g).numpy()


def expert_weights(t: dict, prefix: str, f: dict, goldens: dict, layer: int) -> tuple:
    """Dense f32 [E, 2I, Hm] and [E, Hm, I] for HF, dequantised where the layer is NVFP4."""
    if prefix + "gate_up_proj_weight_scale" not in t:
        return t[prefix + "gate_up_proj"], t[prefix + "down_proj"]
    e, i = f["experts"], f["inter"]
    gu_codes, gu_scales = t[prefix + "gate_up_proj"], t[prefix + "gate_up_proj_weight_scale"]
    gu_ws2 = t[prefix + "gate_up_proj_weight_scale_2"].reshape(e, 2)
    d_codes, d_scales = t[prefix + "down_proj"], t[prefix + "down_proj_weight_scale"]
    d_ws2 = t[prefix + "down_proj_weight_scale_2"].reshape(e)
    gate_up, down = [], []
    for x in range(e):
        half = np.repeat(gu_ws2[x], i)  # rows < I: the gate half's scale; the rest: the up half's
        gate_up.append(dequantize_independently(gu_codes[x], gu_scales[x], half))
        down.append(dequantize_independently(d_codes[x], d_scales[x],
                                             np.full(d_codes.shape[1], d_ws2[x])))
        mine_gu = np.concatenate([
            fixtures.dequantize_nvfp4(unpack(gu_codes[x][:i]), gu_scales[x][:i], gu_ws2[x][0]),
            fixtures.dequantize_nvfp4(unpack(gu_codes[x][i:]), gu_scales[x][i:], gu_ws2[x][1])])
        mine_d = fixtures.dequantize_nvfp4(unpack(d_codes[x]), d_scales[x], d_ws2[x])
        assert np.array_equal(mine_gu.view(np.uint32), gate_up[-1].view(np.uint32)), (layer, x)
        assert np.array_equal(mine_d.view(np.uint32), down[-1].view(np.uint32)), (layer, x)
    goldens[f"nvfp4.layer{layer}.gate_up"] = torch.from_numpy(gate_up[0][:4].copy())
    goldens[f"nvfp4.layer{layer}.up"] = torch.from_numpy(gate_up[0][i:i + 4].copy())
    goldens[f"nvfp4.layer{layer}.down"] = torch.from_numpy(down[0][:4].copy())
    return np.stack(gate_up), np.stack(down)


def unpack(packed: np.ndarray) -> np.ndarray:
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), np.uint8)
    out[..., 0::2], out[..., 1::2] = packed & 0xF, packed >> 4
    return out


def state_dict(folder: Path, f: dict, goldens: dict) -> dict:
    t = load_tensors(folder)
    sd = {}
    for name, value in t.items():
        if ".mlp.experts." in name and not name.endswith("post_expert_norm.weight"):
            continue
        sd[name] = torch.from_numpy(np.asarray(value, np.float32).copy())
    for layer in range(f["layers"]):
        prefix = f"{TEXT_PREFIX}layers.{layer}.mlp.experts."
        gate_up, down = expert_weights(t, prefix, f, goldens, layer)
        sd[prefix + "gate_up_proj"] = torch.from_numpy(np.asarray(gate_up, np.float32).copy())
        sd[prefix + "down_proj"] = torch.from_numpy(np.asarray(down, np.float32).copy())
    return sd


INT8_SCOPE = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.gate_proj",
              "self_attn.o_proj", "mlp.pre_expert_proj", "mlp.post_expert_proj")
INT8_FIXTURE = "muse-spark-tiny"
INT8_PROMPTS = 3


def quantize_int8_rows(w: np.ndarray) -> tuple:
    """§7: per output row s = f32(amax · f32(1/127)) (1 for an all-zero row), q = clip(rint(w ·
    f32(1/s)), -127, 127) with the reciprocal multiplied; np.rint rounds half to even."""
    w = np.asarray(w, np.float32)
    amax = np.abs(w).max(axis=1)
    s = np.where(amax == 0, np.float32(1), amax * np.float32(1 / 127)).astype(np.float32)
    inverse = (np.float32(1) / s).astype(np.float32)
    q = np.clip(np.rint(w * inverse[:, None]), -127, 127).astype(np.int8)
    return q, s


def int8_names(f: dict) -> list:
    names = ["lm_head.weight"]
    for layer in range(f["layers"]):
        names += [f"{TEXT_PREFIX}layers.{layer}.{m}.weight" for m in INT8_SCOPE]
    return names


def int8_state(sd: dict, f: dict, goldens: dict) -> None:
    """Replaces the §7 scope of a state dict by scale · code, recording layer 0's and lm_head's
    quantisation for the bitwise check."""
    for name in int8_names(f):
        q, s = quantize_int8_rows(sd[name].numpy())
        sd[name] = torch.from_numpy((s[:, None] * q.astype(np.float32)).astype(np.float32))
        if name == "lm_head.weight" or ".layers.0." in name:
            key = "lm_head" if name == "lm_head.weight" else name[len(TEXT_PREFIX + "layers.0."):-7]
            goldens[f"int8.{key}.scales"] = torch.from_numpy(s.copy())
            goldens[f"int8.{key}.codes"] = torch.from_numpy(q[:8].copy())


def hf_model(folder: Path, f: dict, goldens: dict, int8: bool = False) -> tuple:
    text = json.loads((folder / "config.json").read_text())["text_config"]
    text = {k: v for k, v in text.items() if k not in ("model_type", "vocab_used")}
    # The towers are not part of the text path; the smallest shapes keep the model quick to build.
    config = MuseSparkConfig(
        text_config=text,
        vision_config={"num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 32,
                       "num_attention_heads": 2},
        audio_config={"hidden_sizes": [8, 8, 8, 8], "depths": [1, 1, 1, 1],
                      "out_hidden_size": text["hidden_size"]},
        out_hidden_size=32, projector_hidden_size=32)
    config._attn_implementation = "eager"
    config.text_config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = MuseSparkForConditionalGeneration(config).to(torch.float32).eval()
    sd = state_dict(folder, f, goldens)
    if int8:
        int8_state(sd, f, goldens)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    text_missing = [m for m in missing if m.startswith(TEXT_PREFIX) or m == "lm_head.weight"]
    assert not unexpected, unexpected
    assert not text_missing, text_missing
    report = {"missing_outside_text_model": len(missing), "unexpected": len(unexpected)}
    return model, report


def logits_of(model, ids: list) -> torch.Tensor:
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0].to(torch.float32)


def greedy(model, ids: list, used: int) -> tuple:
    tokens, margins = [], []
    context = list(ids)
    for _ in range(GREEDY_STEPS):
        row = logits_of(model, context)[-1][:used]
        top = torch.topk(row, 2)
        token = int(torch.argmax(row))  # the lowest id among equal maxima
        tokens.append(token)
        margins.append(float(top.values[0] - top.values[1]))
        context.append(token)
    return tokens, margins


def generate(fixture_dir: Path, name: str, out: Path, int8: bool = False) -> None:
    f = fixtures.FIXTURES[name]
    folder = fixture_dir / name
    goldens = {}
    model, report = hf_model(folder, f, goldens, int8)
    golden_name = f"{name}-int8" if int8 else name
    rng = np.random.default_rng(PROMPT_SEED)
    summary = {"prompts": []}
    lengths = PROMPT_LENGTHS[:INT8_PROMPTS] if int8 else PROMPT_LENGTHS
    for p, length in enumerate(lengths):
        ids = rng.integers(f["vocab"] - f["vocab_used"], f["vocab_used"], length).tolist()
        logits = logits_of(model, ids)
        goldens[f"p{p}.ids"] = torch.tensor(ids, dtype=torch.int32)
        goldens[f"p{p}.logits"] = logits.contiguous()
        entry = {"length": length, "max_abs_logit": float(logits.abs().max())}
        if p < GREEDY_PROMPTS:
            tokens, margins = greedy(model, ids, f["vocab_used"])
            goldens[f"p{p}.greedy"] = torch.tensor(tokens, dtype=torch.int32)
            goldens[f"p{p}.greedy_margin"] = torch.tensor(margins, dtype=torch.float32)
            entry["min_greedy_margin"] = min(margins)
        summary["prompts"].append(entry)
    save_file(goldens, str(out / f"{golden_name}.safetensors"))
    summary.update({
        "fixture": name,
        "dense": "int8 per output row (§7)" if int8 else "as stored",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "compressed_tensors": compressed_tensors.__version__,
        "numpy": np.__version__,
        "loading": report,
        "fixture_sha256": {p.name: sha256(p) for p in sorted(folder.iterdir())},
    })
    (out / f"{golden_name}.json").write_text(json.dumps(summary, indent=2) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only", choices=sorted(fixtures.FIXTURES) + [INT8_FIXTURE + "-int8"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in fixtures.FIXTURES:
        if not args.only or name == args.only:
            generate(args.fixtures, name, args.out)
    if not args.only or args.only == INT8_FIXTURE + "-int8":
        generate(args.fixtures, INT8_FIXTURE, args.out, int8=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
