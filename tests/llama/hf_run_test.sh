#!/usr/bin/env bash
# `megadecode run -m DIR` on a Hugging Face Llama directory (the tiny-llama fixture: random weights,
# so the text is noise; the logits themselves are checked against transformers by
# llama_hf_test.cpp): the chat template and tokenizer come from the directory, generation runs to
# the length asked, and a damaged checkpoint is refused naming the tensor.
# Usage: hf_run_test.sh BINARY MODEL_DIR
set -u
bin="$1"; model="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli/check_lib.sh"
check chat-template 0 '' 'decode 16 tok.*finish length' -- "$bin" run -m "$model" -p "Hello there" --greedy -n 16
check raw 0 '' 'prompt [0-9]+ tok.*finish length' -- "$bin" run -m "$model" --raw -p "The quick brown fox" --greedy -n 8
# Two greedy runs of the same prompt give the same text.
"$bin" run -m "$model" --raw -p "The quick brown fox" --greedy -n 8 >"$work/a" 2>/dev/null
"$bin" run -m "$model" --raw -p "The quick brown fox" --greedy -n 8 >"$work/b" 2>/dev/null
cmp -s "$work/a" "$work/b"; expect deterministic $? "two greedy runs differ"
cp -r "$model" "$work/no-weights"; rm "$work/no-weights/model.safetensors"
check no-weights 1 '' 'no-weights' -- "$bin" run -m "$work/no-weights" -p hi
report
