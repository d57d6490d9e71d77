#!/usr/bin/env bash
# The server under load on loopback, against `megadecode serve` on the tiny Qwen3.8 fixture.
#   bench/serve_load.sh [clients] [requests per client]      (default 16 200)
#     C clients × R requests each (mixed chat/completions, streaming and not, 16 output tokens,
#     seeded sampling) with 8 rows. Prints requests/s, client-side time to first token
#     (p50/p99), aggregate output tokens/s and the server's RSS before/after.
#   bench/serve_load.sh --burst [clients] [serve flags...]   (default 512, --max-batch 4)
#     That many streaming greedy chat requests at once, each on its own connection, with /health
#     probed every 50 ms. Prints requests/s, TTFT p50/p99, the worst inter-token gap of any
#     stream, /health latency, errors, lost requests, distinct replies (1: all identical) and
#     the server's RSS before/after.
#   bench/serve_load.sh --stall [model] [serve flags...]     (default: the default model)
#     A stream runs while a ~2,600-token prompt arrives: the stream's inter-token gap before and
#     during that prefill (mean, worst) and the server's worst gap between decode steps.
#   bench/serve_load.sh --prefix [model] [requests] [serve flags...] (default: the default
#     model, 16) Chat requests sharing a ~1,500-token system prompt, alternating between a server
#     with the prefix cache and one without: TTFT p50/p90 of each, their ratio, the hit ratio.
#   bench/serve_load.sh --choices [model] [n] [serve flags...] (default: the default model, 8)
#     One request with n choices of a ~1,100-token prompt: the server's peak RSS growth, its RSS
#     after, and the KV block pool's peak.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [[ "${1:-}" == "--burst" ]]; then
  shift
  exec .venv/bin/python bench/serve_burst.py "$@"
fi
if [[ "${1:-}" == "--choices" ]]; then
  shift
  exec .venv/bin/python bench/serve_choices_memory.py "$@"
fi
if [[ "${1:-}" == "--prefix" ]]; then
  shift
  exec .venv/bin/python bench/serve_prefix.py "$@"
fi
if [[ "${1:-}" == "--stall" ]]; then
  shift
  exec .venv/bin/python bench/serve_stall.py "$@"
fi
report="$(mktemp)"
MD_LOAD_CLIENTS="${1:-16}" MD_LOAD_REQUESTS="${2:-200}" MD_LOAD_REPORT="$report" \
  .venv/bin/python -m pytest tests/e2e/test_load.py -q -p no:cacheprovider >&2
cat "$report"; echo
rm -f "$report"
