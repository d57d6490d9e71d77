#!/usr/bin/env python3
"""Hugging Face transformers goldens for the default model, SmolLM2-135M-Instruct (Q4_1 GGUF).

transformers loads the GGUF itself (dequantising every weight to float32) and its own Llama code
computes, in float32: the logits at two positions of each prompt (the middle and the last) and a
64-token greedy continuation with the top-2 margin of every step. Prompts are stored as token
ids from transformers' tokenizer, so the C++ test needs no tokenizer.

Runs only in the torch venv (tools/setup-golden-venv, plus gguf and accelerate):
  .venv-golden/bin/python tools/gen_smollm2_goldens.py --gguf .models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --out tests/goldens/smollm2
"""
import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

CHAT = ["What is the capital of France?", "Write a haiku about the sea.",
        "List three prime numbers."]
RAW = ["The quick brown fox jumps over the lazy dog. The quick brown fox"]
STEPS = 64


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    folder, name = str(args.gguf.parent), args.gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    texts = [tok.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True,
                                     tokenize=False) for c in CHAT] + RAW
    tensors, meta = {}, {"prompts": []}
    for i, text in enumerate(texts):
        ids = tok.encode(text)
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float().numpy()
        positions = [len(ids) // 2, len(ids) - 1]
        tensors[f"p{i}.ids"] = np.array(ids, dtype=np.int32)
        tensors[f"p{i}.positions"] = np.array(positions, dtype=np.int32)
        tensors[f"p{i}.logits"] = np.ascontiguousarray(logits[positions])
        seq, greedy, margins = list(ids), [], []
        with torch.no_grad():
            for _ in range(STEPS):
                last = model(torch.tensor([seq])).logits[0, -1].float()
                top = torch.topk(last, 2)
                greedy.append(int(top.indices[0]))
                margins.append(float(top.values[0] - top.values[1]))
                seq.append(greedy[-1])
        tensors[f"p{i}.greedy"] = np.array(greedy, dtype=np.int32)
        tensors[f"p{i}.greedy_margin"] = np.array(margins, dtype=np.float32)
        meta["prompts"].append({"text": text, "tokens": len(ids),
                                "answer": tok.decode(greedy, skip_special_tokens=False)})
    args.out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(args.out / "smollm2.safetensors"))
    meta.update({"gguf_sha256": hashlib.sha256(args.gguf.read_bytes()).hexdigest(),
                 "torch_version": torch.__version__,
                 "transformers_version": __import__("transformers").__version__,
                 "dtype": "float32"})
    (args.out / "smollm2.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
