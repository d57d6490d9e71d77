#!/usr/bin/env python3
"""Latent attention (MLA without RoPE) goldens from Hugging Face transformers' own
`kimi_linear` module (`KimiLinearAttention`, float32, eager attention): the non-absorbed form,
which expands every cached latent into per-head keys and values (kv_b_proj) before attending.
megadecode's absorbed decode (src/kernels/latent_attention.h, docs/models/kimi-k3-dspark.md §7.3)
is compared with it.

Runs only in .venv-golden (tools/setup-golden-venv); CI never runs it, it reads the committed
output <out>/mla-kimi-linear.safetensors (float32), one layer of §15's MLA widths (hidden 256,
4 heads, q_lora 64, kv_lora 32, nope 32, shared key 16, value 32) over T = 9 causal tokens:
  kv_b_proj.weight  [H·(nope+v), kv_lora]  the layer's key/value up-projection
  query             [T, H, nope+shared]   q_b_proj's output (the query path, before attention)
  latent            [T, kv_lora]          kv_a_layernorm's output c_t (what the absorbed cache keeps)
  shared_key        [T, shared]           the unrotated shared key part s_t
  attention         [T, H·v]              the attention output (o_proj's input)
  config            scale etc. in the metadata

Usage: gen_mla_goldens.py --out tests/goldens/kimi
"""

import argparse
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformers.models.kimi_linear.configuration_kimi_linear import KimiLinearConfig
from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention

SEED = 20261204
T = 9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args().out
    torch.manual_seed(SEED)
    config = KimiLinearConfig(hidden_size=256, num_attention_heads=4, num_key_value_heads=4,
                              q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32,
                              qk_rope_head_dim=16, v_head_dim=32, attention_bias=False)
    config._attn_implementation = "eager"
    layer = KimiLinearAttention(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * (0.2 if p.dim() == 2 else 1.0) + (1.0 if p.dim() == 1 else 0.0))
    captured = {}
    layer.q_b_proj.register_forward_hook(lambda m, i, o: captured.__setitem__("query", o))
    layer.kv_a_layernorm.register_forward_hook(lambda m, i, o: captured.__setitem__("latent", o))
    layer.kv_a_proj_with_mqa.register_forward_hook(
        lambda m, i, o: captured.__setitem__("shared_key", o[..., config.kv_lora_rank:]))
    layer.o_proj.register_forward_pre_hook(lambda m, i: captured.__setitem__("attention", i[0]))
    x = torch.randn(1, T, config.hidden_size)
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        layer(x, attention_mask=mask)
    heads, qk = config.num_attention_heads, config.qk_nope_head_dim + config.qk_rope_head_dim
    tensors = {"kv_b_proj.weight": layer.kv_b_proj.weight.detach(),
               "query": captured["query"][0].reshape(T, heads, qk),
               "latent": captured["latent"][0], "shared_key": captured["shared_key"][0],
               "attention": captured["attention"][0]}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "mla-kimi-linear.safetensors"
    save_file({k: v.contiguous().float() for k, v in tensors.items()}, str(path),
              metadata={"transformers": transformers.__version__, "torch": torch.__version__,
                        "seed": str(SEED), "scale": repr(layer.scaling)})
    print(f"wrote {path}: scale {layer.scaling}")


if __name__ == "__main__":
    main()
