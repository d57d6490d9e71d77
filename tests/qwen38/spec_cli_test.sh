#!/usr/bin/env bash
# Speculative decoding from the command line (issue 7): `run --draft` gives exactly the plain
# greedy output and reports the rounds; the controls (--no-spec, --block-size, --force-accept)
# work; a drafter that does not fit its target and bad values are refused with clear messages.
# Usage: spec_cli_test.sh BINARY QWEN38_FIXTURES DFLASH2_FIXTURES
set -u
bin="$1"; fixtures="$2"; drafts="$3"
model="$fixtures/tiny-qwen38"
draft="$drafts/tiny-dflash2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../cli/check_lib.sh"

prompt="The drafter proposes, the target verifies: a block of eight rows per round."
args=(run -m "$model" --raw -p "$prompt" -n 80 --ignore-eos --greedy -t 1)
"$bin" "${args[@]}" -q >"$work/plain" 2>/dev/null
"$bin" "${args[@]}" --draft "$draft" >"$work/spec" 2>"$work/spec.err"
cmp -s "$work/plain" "$work/spec"; expect spec-greedy-equals-plain $? "speculative output differs"
grep -Eq 'spec [0-9]+ rounds, mean acceptance length [0-9.]+, [0-9]+ drafts verified, accepted by draft position \[([0-9]+,){6}[0-9]+\], draft [0-9.]+ ms, verify [0-9.]+ ms' "$work/spec.err"
expect spec-stats $? "no speculation stats: $(cat "$work/spec.err")"
"$bin" "${args[@]}" --draft "$draft" --block-size 3 -q >"$work/spec3" 2>/dev/null
cmp -s "$work/plain" "$work/spec3"; expect spec-block-3 $? "--block-size 3 changed the output"
check spec-block-3-stats 0 '' 'accepted by draft position \[[0-9]+,[0-9]+\]' -- "$bin" "${args[@]}" --draft "$draft" --block-size 3
check no-spec 0 '' 'finish length$' -- "$bin" "${args[@]}" --draft "$draft" --no-spec
# 41 tokens: the first from the prefill, then ten rounds of exactly 4 (3 forced drafts + 1).
check force-accept 0 '' 'spec 10 rounds, mean acceptance length 4\.00' -- "$bin" run -m "$model" --raw -p "$prompt" -n 41 --ignore-eos --greedy -t 1 --draft "$draft" --force-accept 4
# Sampled speculation runs and is reproducible with a seed.
sampled=(run -m "$model" --raw -p "$prompt" -n 40 --ignore-eos --temperature 0.8 --top-p 0.9 --seed 3 -q --draft "$draft")
"$bin" "${sampled[@]}" >"$work/s1" 2>/dev/null; "$bin" "${sampled[@]}" >"$work/s2" 2>/dev/null
cmp -s "$work/s1" "$work/s2"; expect spec-sampled-reproducible $? "seeded speculative runs differ"

# Refusals.
check draft-target-mismatch 1 '' "num_target_layers = 8: must equal the target's 12" -- "$bin" run -m "$fixtures/tiny-qwen38-hd256" -p Hi -n 2 --draft "$draft"
check block-size-too-big 1 '' 'block-size must be between 2 and 8 \(the drafter.s 8, a verify step.s 8\), got 9' -- "$bin" "${args[@]}" --draft "$draft" --block-size 9
check force-accept-needs-draft 1 '' 'need a drafter' -- "$bin" "${args[@]}" --force-accept 2
check draft-missing 1 '' 'nope' -- "$bin" "${args[@]}" --draft "$work/nope"
report
