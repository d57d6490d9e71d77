#!/usr/bin/env bash
# Runs the megadecode binary as a user would and checks exit codes and output streams.
# Usage: cli_end_to_end.sh BINARY QWEN3_TOKENIZER_DIR SOURCE_DIR
set -u
bin="$1"; tok="$2"; source_dir="$3"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
# A sanitized build (MD_SANITIZED=1) skips the bench runs that repeat figures other runs print
# (each takes seconds there); their code runs in the bench checks it keeps.
sanitized="${MD_SANITIZED:-}"

check help 0 'Subcommands:' '' -- "$bin" --help
for sub in run chat serve bench pack tokenize info; do
  check "help-$sub" 0 'Usage: .*'"$sub" '' -- "$bin" "$sub" --help
done
# serve's test seam (the --test-* hooks of server_testing.h) is no user option: --help hides it.
! "$bin" serve --help 2>&1 | grep -q -- '--test-'
expect serve-help-hides-test-hooks $? 'serve --help lists a --test-* option'
check no-subcommand 2 '' 'subcommand' -- "$bin"
check unknown-flag 2 '' 'tokenize-me' -- "$bin" tokenize --model x --tokenize-me
check chat-without-model 2 '' 'no model given.*|--model' -- env MEGADECODE_MODEL= MEGADECODE_ROOT="$work" "$bin" chat
check pack-without-out 2 '' '--out' -- "$bin" pack
# serve: refusals before it listens (a running server is tested in tests/e2e).
check serve-without-model 1 '' 'no --model given.*default model' -- env MEGADECODE_MODEL= MEGADECODE_ROOT="$work" "$bin" serve --port 0
check serve-bad-port 2 '' 'port' -- "$bin" serve --port 70000
check serve-bad-tool-format 2 '' 'tool-call-format' -- "$bin" serve --tool-call-format yaml
check serve-bad-spec-max-rows 2 '' 'spec-max-rows' -- "$bin" serve --spec-max-rows -1

# bench: a bounded run on the built-in cache-resident shape, human and machine output.
check bench-table 0 'bandwidth .* GB/s read.*' '' -- "$bin" bench --synthetic qwen38-tiny --rows 1,2 --seconds 0.05 --prefill-tokens 8 -t 2
check bench-json 0 '"fraction_of_bandwidth"' '' -- "$bin" bench --synthetic qwen38-tiny --rows 1 --executors mega,ops,reference --seconds 0.05 --prefill-tokens 8 --json
[ -n "$sanitized" ] || check bench-header 0 'kernels +(avx512|avx2|scalar) path \((prefetch|hardware) weight walk(; FP4 on (avx2|scalar))?\), weights bf16; executors mega' '' -- "$bin" bench --synthetic qwen38-tiny --rows 1 --executors mega --seconds 0.05 --prefill-tokens 8
check bench-profile 0 'gate_up_silu +norm>gate\|up\+silu +8 +64 .*' '' -- "$bin" bench --synthetic qwen38-tiny --rows 1 --executors mega,ops --seconds 0.05 --prefill-tokens 8 --profile
check bench-verbose 0 'delta_net +L0\.delta_net +2 +0 +#2 per task' '' -- "$bin" bench --synthetic qwen38-tiny --rows 1 --executors mega --seconds 0.05 --prefill-tokens 8 -v
check bench-prefill-executor 0 'prefill +\(chunks of 256 tokens, as the engine runs a prompt; reference\)' '' -- "$bin" bench --synthetic qwen38-tiny --rows 1 --executors mega --seconds 0.05 --prefill-tokens 8 --prefill-executor reference
check bench-prefill-executor-bad 2 '' 'prefill-executor' -- "$bin" bench --synthetic qwen38-tiny --prefill-executor fast
# Issue 19's many-row figures: rows vs one row, a verify step vs a decode step, the tiles' share of
# the fma peak measured in the same run (text and JSON; one run of each).
if [ -z "$sanitized" ]; then
  "$bin" bench --synthetic qwen38-tiny --rows 1,2 --executors mega --seconds 0.05 --prefill-tokens 8 -t 2 >"$work/many" 2>&1
  for re in '2 rows / 1 row \(mega\): [0-9.]+x the tokens/s' \
            'verify +8 rows of one sequence: [0-9.]+ ms a step = [0-9.]+x a 1-row decode step' \
            'tiles +bf16 [0-9]+ x [0-9]+ \(the largest layer matrix\) x 256 rows: [0-9.]+ GFLOP/s = [0-9]+% of the f32 fma peak'; do
    grep -Eq -- "$re" "$work/many"; expect "bench-many-rows /$re/" $? "$(cat "$work/many")"
  done
  "$bin" bench --synthetic qwen38-tiny --rows 1,2 --executors mega --seconds 0.05 --prefill-tokens 8 --json >"$work/many.json" 2>&1
  for key in fraction_of_peak one_row_decode_step_seconds tokens_per_s_vs_one_row; do
    grep -Eq "\"$key\": [0-9]" "$work/many.json"; expect "bench-json-$key" $? "$(cat "$work/many.json")"
  done
fi
check bench-bad-rows 1 '' 'outside 1..8' -- "$bin" bench --synthetic qwen38-tiny --rows 9
check bench-bad-shape 1 '' "unknown synthetic shape 'nope' .*muse-spark-layer" -- "$bin" bench --synthetic nope
# Muse Spark benches its fused program on both executors by default, and its reference forward
# when asked.
check bench-muse-default 0 '^ops +2 +[0-9]' '' -- "$bin" bench --synthetic muse-spark-tiny --rows 2 --seconds 0.05 --rounds 1 --prefill-tokens 8 -t 1
[ -n "$sanitized" ] || check bench-muse-reference 0 '^reference +1 +[0-9]' '' -- "$bin" bench --synthetic muse-spark-tiny --executors reference --rows 1 --seconds 0.05 --rounds 1 --prefill-tokens 8 -t 1
check bench-muse-verbose 0 'row_attention +L1\.attention +2 +0' '' -- "$bin" bench --synthetic muse-spark-tiny --rows 1 --executors mega --seconds 0.05 --rounds 1 --prefill-tokens 8 -v
[ -n "$sanitized" ] || check bench-muse-int8 0 '^dense +int8 \(quantised at load\)' '' -- "$bin" bench --synthetic muse-spark-tiny --dense-weights int8 --rows 1 --seconds 0.05 --rounds 1 --prefill-tokens 8 -t 1
# So does Kimi K3: its program lists a kda task per head and the latent attention.
check bench-kimi 0 '^ops +2 +[0-9]' '' -- "$bin" bench --synthetic kimi-k3-tiny --rows 2 --seconds 0.05 --rounds 1 --prefill-tokens 8 -t 1
[ -n "$sanitized" ] || check bench-kimi-reference 0 '^reference +1 +[0-9]' '' -- "$bin" bench --synthetic kimi-k3-tiny --executors reference --rows 1 --seconds 0.05 --rounds 1 --prefill-tokens 8 -t 1
check bench-kimi-verbose 0 'kda +L0\.kda +4 +0 .*per task' '' -- "$bin" bench --synthetic kimi-k3-tiny --rows 1 --executors mega --seconds 0.05 --rounds 1 --prefill-tokens 8 -v
check bench-int8-other-family 1 '' 'implemented for muse_spark models only' -- "$bin" bench --synthetic qwen38-tiny --dense-weights int8
# Speculative figures on a synthetic target need a synthetic drafter (forced τ 1..8, then the split).
check bench-spec-synthetic 0 '  8 +[0-9.]+ +[0-9.]+x +[0-9.]+ +[0-9.]+' '' -- "$bin" bench --synthetic qwen38-tiny --draft synthetic --rows 1 --executors mega --seconds 0.05 --prefill-tokens 8 --spec-tokens 8
# Kimi K3 drafts with a synthetic DSpark drafter shaped for it.
check bench-spec-kimi-synthetic 0 '  8 +[0-9.]+ +[0-9.]+x +[0-9.]+ +[0-9.]+' '' -- "$bin" bench --synthetic kimi-k3-tiny --draft synthetic --rows 1 --executors mega --seconds 0.05 --prefill-tokens 8 --spec-tokens 8
check bench-spec-needs-model 1 '' 'needs --model.*--draft synthetic' -- "$bin" bench --synthetic qwen38-tiny --draft /nonexistent --rows 1 --seconds 0.05
check bench-bad-executor 2 '' 'executors' -- "$bin" bench --synthetic qwen38-tiny --executors warp
# --matmul-inputs bf16 (vdpbf16ps) runs where the CPU has AVX512-BF16 and is refused (exit 1,
# before any model loads) where it does not, or where MEGADECODE_ISA forces a lower path.
check bench-bad-matmul-inputs 2 '' 'matmul-inputs' -- "$bin" bench --synthetic qwen38-tiny --matmul-inputs f16
if grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then
  check bench-matmul-inputs-bf16 0 'matmul +bf16 inputs' '' -- "$bin" bench --synthetic qwen38-tiny --rows 1,8 --executors mega --seconds 0.05 --prefill-tokens 8 --matmul-inputs bf16
else
  check bench-matmul-inputs-bf16 1 '' 'AVX512-BF16' -- "$bin" bench --synthetic qwen38-tiny --rows 1 --seconds 0.05 --matmul-inputs bf16
fi
check bench-matmul-inputs-forced-avx2 1 '' 'bf16 matmul inputs need' -- env MEGADECODE_ISA=avx2 "$bin" bench --synthetic qwen38-tiny --rows 1 --seconds 0.05 --matmul-inputs bf16
check run-matmul-inputs-forced-avx2 1 '' 'bf16 matmul inputs need' -- env MEGADECODE_ISA=avx2 "$bin" run --model "$work/none" --matmul-inputs bf16 --prompt hi

# tokenize: ids and pieces on stdout, nothing on stdout for errors.
check tokenize-table 0 '9707 +Hello' '' -- "$bin" tokenize --model "$tok" --text "Hello world"
check tokenize-ids 0 '^9707 1879$' '' -- "$bin" tokenize --model "$tok" --ids --text "Hello world"
check tokenize-special 0 '^151644 872$' '' -- "$bin" tokenize --model "$tok" --ids --text "<|im_start|>user"
check tokenize-no-special 0 '^27 91 318 4906 91 29 872$' '' -- "$bin" tokenize --model "$tok" --ids --no-special --text "<|im_start|>user"
check tokenize-json 0 '"ids":\[9707,1879\]' '' -- "$bin" tokenize --model "$tok" --json --text "Hello world"
check decode 0 '^Hello world$' '' -- "$bin" tokenize --model "$tok" --decode 9707,1879
check decode-bad-id 1 '' 'not a token id' -- "$bin" tokenize --model "$tok" --decode 12,abc
check decode-out-of-range 1 '' 'outside the vocabulary' -- "$bin" tokenize --model "$tok" --decode 99999999
check tokenize-missing-model 1 '' 'Tried:' -- env HF_HUB_CACHE="$work/empty-cache" "$bin" tokenize --model nobody/nothing --text hi
check tokenize-bad-spec 1 '' 'nobody/' -- "$bin" tokenize --model "nobody/../x" --text hi

# .env in the working directory: malformed lines are reported with their line number.
mkdir -p "$work/envdir"
printf 'GOOD=1\nthis line is wrong\n' >"$work/envdir/.env"
pushd "$work/envdir" >/dev/null; check dotenv-warning 0 '' '\.env:2: expected KEY=VALUE' -- "$bin" tokenize --model "$tok" --ids --text hi; popd >/dev/null

report
