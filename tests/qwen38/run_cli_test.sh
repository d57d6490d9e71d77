#!/usr/bin/env bash
# `megadecode run` on the fixture models as a user runs it: streaming output, stats, flags,
# reproducibility, --logits-out, and clear errors with non-zero exits for bad input.
# Usage: run_cli_test.sh BINARY FIXTURES_DIR PYTHON
set -u
bin="$1"; fixtures="$2"; python="$3"
model="$fixtures/tiny-qwen38"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli/check_lib.sh"

stats='prompt [0-9]+ tok \([0-9]+ reused\) \| prefill .* tok/s\) \| first token .* ms \| decode [0-9]+ tok at .* tok/s \| total .* ms \| finish'
check run-basic 0 '.' "$stats" -- "$bin" run --model "$model" --prompt Hello --max-tokens 8 --seed 1
check run-max-tokens 0 '' 'decode 5 tok .*finish length' -- "$bin" run -m "$model" -p Hello -n 5 --ignore-eos --seed 2
check run-raw 0 '' 'prompt 1 tok' -- "$bin" run -m "$model" --raw -p a -n 3 --ignore-eos
for model_name in tiny-qwen38-hd256 tiny-qwen38-text; do
  check "run-$model_name" 0 '' "$stats" -- "$bin" run -m "$fixtures/$model_name" -p Hello -n 4 --ignore-eos
done

# --matmul-inputs bf16 where the CPU has AVX512-BF16 (tests/cli/cli_end_to_end.sh checks the
# refusals).
if grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then
  check run-matmul-inputs-bf16 0 '.' "$stats" -- "$bin" run -m "$model" -p Hello -n 8 --ignore-eos --greedy --matmul-inputs bf16
fi

# Reproducible sampling with a seed; greedy is deterministic.
for i in 1 2; do
  "$bin" run -m "$model" -p Hello -n 24 --ignore-eos --seed 7 --temperature 0.9 --top-p 0.95 -q >"$work/seeded$i" 2>/dev/null
  "$bin" run -m "$model" -p Hello -n 24 --ignore-eos --temperature 0 -q >"$work/greedy$i" 2>/dev/null
done
"$bin" run -m "$model" -p Hello -n 24 --ignore-eos --seed 8 --temperature 0.9 --top-p 0.95 -q >"$work/seeded3" 2>/dev/null
cmp -s "$work/seeded1" "$work/seeded2"; expect seed-reproducible $? "same seed gave different text"
cmp -s "$work/greedy1" "$work/greedy2"; expect greedy-deterministic $? "greedy runs differ"
! cmp -s "$work/seeded1" "$work/seeded3"; expect seed-matters $? "different seeds gave identical text"

# Prompt from stdin and from a file give the same answer as --prompt.
"$bin" run -m "$model" -p "Hi there" -n 6 --ignore-eos --greedy -q >"$work/arg" 2>/dev/null
echo -n "Hi there" | "$bin" run -m "$model" -n 6 --ignore-eos --greedy -q >"$work/stdin" 2>/dev/null
echo -n "Hi there" >"$work/prompt.txt"
"$bin" run -m "$model" -f "$work/prompt.txt" -n 6 --ignore-eos --greedy -q >"$work/file" 2>/dev/null
cmp -s "$work/arg" "$work/stdin"; expect prompt-stdin $? "stdin prompt differs from --prompt"
cmp -s "$work/arg" "$work/file"; expect prompt-file $? "--prompt-file differs from --prompt"

# --logits-out: prompt log-probabilities and the generated tokens' top-k, consistent with greedy.
check logits-out 0 '' "$stats" -- "$bin" run -m "$model" -p Hello -n 6 --ignore-eos --greedy --logits-out "$work/logits.json"
"$python" - "$work/logits.json" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
assert len(d["prompt_logprobs"]) == len(d["prompt_tokens"]), "one entry per prompt token"
assert d["prompt_logprobs"][0] is None
assert all(lp <= 0 for lp in d["prompt_logprobs"][1:])
assert len(d["generated"]) == 6 and d["finish_reason"] == "length"
for g in d["generated"]:
    top = g["top_logprobs"]
    assert len(top) == 5
    assert all(top[i]["logprob"] >= top[i + 1]["logprob"] for i in range(4))
    assert top[0]["id"] == g["id"], "greedy picks the most likely token"
    assert math.isclose(top[0]["logprob"], g["logprob"], abs_tol=1e-6)
    assert sum(math.exp(t["logprob"]) for t in top) <= 1 + 1e-5
PY
expect logits-json $? "--logits-out JSON is inconsistent"

# The context fills: generation stops with finish length, no overrun. A context of prompt + 4
# holds prompt + output: 4 generated tokens, the last of which fills it (OpenAI's max_model_len).
prompt_len=$("$bin" run -m "$model" -p Hello -n 1 2>&1 >/dev/null | sed -E 's/^prompt ([0-9]+) tok.*/\1/')
check context-full 0 '' "decode 4 tok .*finish length" -- "$bin" run -m "$model" -p Hello --context $((prompt_len + 4)) --ignore-eos
check prompt-too-long 1 '' 'prompt has [0-9]+ tokens but the context holds 10' -- "$bin" run -m "$model" -p Hello --context 10
check context-over-max 1 '' 'exceeds the model.s maximum of 4096' -- "$bin" run -m "$model" -p Hello --context 99999
check bad-top-p 1 '' 'top_p' -- "$bin" run -m "$model" -p Hello --top-p 2
check bad-temperature 1 '' 'temperature' -- "$bin" run -m "$model" -p Hello --temperature -1
check chat-and-raw 1 '' 'exclude each other' -- "$bin" run -m "$model" -p Hello --chat --raw
check bad-kv-cache 2 '' 'kv-cache' -- "$bin" run -m "$model" -p Hello --kv-cache f16
check missing-model 1 '' 'nothing' -- "$bin" run -m "$work/nothing" -p Hello
check no-model-installed 1 '' 'default model is not installed' -- env MEGADECODE_MODEL= MEGADECODE_ROOT="$work" "$bin" run -p Hello

# A qwen35 GGUF of the same model (tools/make_qwen35_gguf.py, llama.cpp's layout) runs like the
# directory: the same greedy text through its own tokenizer and chat template; info counts its
# tensors in their formats.
gguf="$fixtures/../qwen35-gguf"
"$bin" run -m "$model" -p "Hi there" -n 12 --ignore-eos --greedy -q >"$work/dir_greedy" 2>/dev/null
"$bin" run -m "$gguf/tiny-qwen38.BF16.gguf" -p "Hi there" -n 12 --ignore-eos --greedy -q >"$work/gguf_greedy" 2>/dev/null
cmp -s "$work/dir_greedy" "$work/gguf_greedy"; expect gguf-run-same-text $? "the BF16 GGUF's greedy text differs from the directory's"
check gguf-run-quantised 0 '.' "$stats" -- "$bin" run -m "$gguf/tiny-qwen38.Q8_0.gguf" -p Hello -n 4 --ignore-eos
check gguf-info 0 'Q8_0 .*68\.00 KiB' '' -- "$bin" info -m "$gguf/tiny-qwen38.Q8_0.gguf"
check gguf-info-tied 0 'tied lm_head' '' -- "$bin" info -m "$gguf/tiny-qwen35-tied.BF16.gguf"
printf 'Hi\n/exit\n' >"$work/chat_in"
"$bin" chat -m "$gguf/tiny-qwen35-tied.BF16.gguf" --max-tokens 4 <"$work/chat_in" >"$work/chat_out" 2>"$work/chat_err"
expect gguf-chat $? "chat on a GGUF failed: $(head -c 300 "$work/chat_err")"
# Qwen3.5-MoE, as a directory and as a qwen35moe GGUF: the same greedy text; info shows the
# experts a token reads (4 of 16: a quarter of the stacks' bytes).
moe="$fixtures/tiny-qwen35-moe"
"$bin" run -m "$moe" -p "Hi there" -n 12 --ignore-eos --greedy -q >"$work/moe_dir" 2>/dev/null
"$bin" run -m "$gguf/tiny-qwen35-moe.BF16.gguf" -p "Hi there" -n 12 --ignore-eos --greedy -q >"$work/moe_gguf" 2>/dev/null
test -s "$work/moe_dir" && cmp -s "$work/moe_dir" "$work/moe_gguf"; expect moe-gguf-same-text $? "the MoE GGUF's greedy text differs from the directory's"
check moe-info 0 'MoE 16 experts top-4' '' -- "$bin" info -m "$moe"
check moe-gguf-info 0 'routed experts +Q8_0 .*408\.00 KiB +102\.00 KiB' '' -- "$bin" info -m "$gguf/tiny-qwen35-moe.Q8_0.gguf"
printf 'GGUF\3\0\0\0' >"$work/short.gguf"
check gguf-truncated 1 '' 'short\.gguf' -- "$bin" run -m "$work/short.gguf" -p Hello

# Damaged checkpoint: a precise message naming the file, exit 1.
cp -r "$model" "$work/broken"
truncate -s -1000 "$work/broken/model.safetensors"
check truncated-checkpoint 1 '' 'model\.safetensors' -- "$bin" run -m "$work/broken" -p Hello
printf '{"model_type": "qwen3_5", "text_config": ' >"$work/broken/config.json"
check corrupt-config 1 '' 'config\.json' -- "$bin" run -m "$work/broken" -p Hello

report
