#!/usr/bin/env bash
# `megadecode run` on the default model answers simple instructions as transformers' greedy
# decoding does (tests/goldens/smollm2/smollm2.json holds transformers' answers).
# Usage: smollm2_run_test.sh BINARY MODEL_FILE        (exit 77 = skipped: model absent)
set -u
bin="$1"; model="$2"
[ -f "$model" ] || { echo "skipped: $model is absent (scripts/setup fetches it)"; exit 77; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli/check_lib.sh"
check capital 0 'The capital of France is Paris\.' 'finish stop' -- "$bin" run -m "$model" -p "What is the capital of France?" --greedy -n 24
check haiku 0 '^The waves of the sea, a silent beauty,' '' -- "$bin" run -m "$model" -p "Write a haiku about the sea." --greedy -n 12
check raw-continuation 0 'is a classic example of a pun' '' -- "$bin" run -m "$model" --raw -p "The quick brown fox jumps over the lazy dog. The quick brown fox" --greedy -n 10
check bad-model-file 1 '' 'not-a-model\.gguf' -- "$bin" run -m "$work/not-a-model.gguf" -p hi
printf 'GGUF' > "$work/short.gguf"
check truncated-gguf 1 '' 'short\.gguf' -- "$bin" run -m "$work/short.gguf" -p hi
# The default model: chat and run without --model (the repository root comes from the binary's
# location or MEGADECODE_ROOT).
root="$(cd "$(dirname "$model")/.." && pwd)"
printf 'What is the capital of France?\n' | MEGADECODE_MODEL= MEGADECODE_ROOT="$root" "$bin" chat --greedy -n 24 >"$work/chat" 2>"$work/chat-err"
grep -q 'The capital of France is Paris' "$work/chat"; expect default-chat $? "chat without --model did not answer: $(head -c 300 "$work/chat") $(head -c 300 "$work/chat-err")"
check default-run 0 'Paris' '' -- env MEGADECODE_MODEL= MEGADECODE_ROOT="$root" "$bin" run -p "What is the capital of France?" --greedy -n 24
check env-model 0 'Paris' '' -- env MEGADECODE_MODEL="$model" MEGADECODE_ROOT=/nonexistent "$bin" run -p "What is the capital of France?" --greedy -n 24
report
