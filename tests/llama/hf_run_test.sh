#!/usr/bin/env bash
# `megadecode run -m DIR` on a Hugging Face Llama directory (the tiny-llama fixture: random weights,
# so the text is noise; the logits themselves are checked against transformers by
# llama_hf_test.cpp): the chat template and tokenizer come from the directory, generation runs to
# the length asked, a weight pack runs as the checkpoint does, and a damaged checkpoint is refused
# naming the tensor.
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
# A weight pack for two ranks (megadecode pack): written with a line per rank off a terminal,
# then run from with --weights and from $QWEN_PACKED_WEIGHTS, the same text as the ranks cutting
# their slices at load; refused for another TP size, for a model it was not made from, and when
# its directory is not empty.
check pack 0 'packed tiny-llama for --tp 2 into .*: [0-9]+ slices' 'rank 2 of 2 written' -- "$bin" pack -m "$model" --tp 2 --out "$work/pack"
"$bin" run -m "$model" --tp 2 --raw -p "The quick brown fox" --greedy -n 8 >"$work/cut" 2>/dev/null
"$bin" run -m "$model" --tp 2 --weights "$work/pack" --raw -p "The quick brown fox" --greedy -n 8 >"$work/packed" 2>/dev/null
cmp -s "$work/cut" "$work/packed"; expect pack-same-text $? "the pack's run differs: $(cat "$work/cut") / $(cat "$work/packed")"
QWEN_PACKED_WEIGHTS="$work/pack" "$bin" run -m "$model" --tp 2 --raw -p "The quick brown fox" --greedy -n 8 >"$work/env" 2>/dev/null
cmp -s "$work/cut" "$work/env"; expect pack-from-env $? "QWEN_PACKED_WEIGHTS: $(cat "$work/env")"
check pack-bench 0 'slices from the pack .*' '' -- "$bin" bench -m "$model" --tp 2 --weights "$work/pack" --seconds 0.05 --rounds 1 --context 128 -t 2
check pack-wrong-tp 1 '' 'packed for --tp 2; this run has 4 ranks' -- "$bin" run -m "$model" --tp 4 --weights "$work/pack" -p hi -n 1
check pack-not-empty 1 '' 'is not empty' -- "$bin" pack -m "$model" --tp 2 --out "$work/pack"
check pack-one-rank 2 '' 'tp' -- "$bin" pack -m "$model" --tp 1 --out "$work/pack1"
check pack-no-out 2 '' 'out' -- "$bin" pack -m "$model" --tp 2
cp -r "$model" "$work/other"; printf ' ' >>"$work/other/config.json"
check pack-other-model 1 '' 'was packed from tiny-llama .* not from other' -- "$bin" run -m "$work/other" --tp 2 --weights "$work/pack" -p hi -n 1
cp -r "$model" "$work/no-weights"; rm "$work/no-weights/model.safetensors"
check no-weights 1 '' 'no-weights' -- "$bin" run -m "$work/no-weights" -p hi
report
