#!/usr/bin/env bash
# ctest's fuzz.* tests: replays a fuzzer's committed corpus once, then runs 2,000 inputs mutated
# from it with a fixed seed, in a scratch copy (libFuzzer adds new inputs to its first corpus
# directory, and the committed one must stay as it is).
#   run_fuzzer_smoke.sh FUZZER CORPUS_DIR [-dict=FILE]
set -euo pipefail
fuzzer="$1" corpus="$2"
shift 2
scratch="$(mktemp -d "${TMPDIR:-/tmp}/md_fuzz_smoke.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
cp -r "$corpus"/. "$scratch"/
"$fuzzer" "$@" -runs=0 "$scratch"
"$fuzzer" "$@" -seed=1 -runs=2000 -max_len=4096 "$scratch"
