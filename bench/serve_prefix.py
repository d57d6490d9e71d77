"""What the prefix cache buys (issue 21): time to first token of chat requests that share a long
system prompt (about 1,500 tokens) and differ in the question, on a server with the prefix cache
and on one without (--no-prefix-cache), requests alternating between the two so that both see the
same machine. Prints TTFT p50 and p90 of each, their ratio, and the warm server's prefix-cache
hit ratio and tokens reused. Run by `bench/serve_load.sh --prefix [model] [requests] [serve
flags...]` (default: the default model, 16 requests per server)."""
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from conftest import Server, metric  # noqa: E402

SYSTEM = " ".join(f"Rule {i}: answer questions about item {i} of the catalogue politely and "
                  f"briefly, and say so when item {i} is out of stock." for i in range(60))


def first_token_seconds(url, question):
    body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            "max_tokens": 4, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    start = time.monotonic()
    first, usage = None, None
    with httpx.Client(timeout=600) as c, c.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if first is None and any(ch["delta"].get("content") or ch["delta"].get("reasoning_content")
                                     for ch in event["choices"]):
                first = time.monotonic() - start
            usage = event.get("usage") or usage
    return first, usage


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".models/SmolLM2-135M-Instruct.Q4_1.gguf")
    requests = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    flags = sys.argv[3:]
    warm = Server("--max-batch", "2", *flags, model=model)
    cold = Server("--max-batch", "2", "--no-prefix-cache", *flags, model=model)
    ttft = {"warm": [], "cold": []}
    prompt_tokens = 0
    try:
        first_token_seconds(warm.url, "Warm-up: which items exist?")  # leaves the system prompt
        first_token_seconds(cold.url, "Warm-up: which items exist?")
        for i in range(requests):
            question = f"Question {i}: is item {(7 * i) % 60} in stock?"
            for name, server in (("warm", warm), ("cold", cold)) if i % 2 else (("cold", cold), ("warm", warm)):
                seconds, usage = first_token_seconds(server.url, question)
                ttft[name].append(seconds)
                prompt_tokens = usage["prompt_tokens"]
        text = httpx.get(warm.url + "/metrics").text
    finally:
        warm.stop()
        cold.stop()
    p50 = {k: statistics.median(v) for k, v in ttft.items()}
    print(f"model {Path(model).name}; {requests} requests per server, prompts of ~{prompt_tokens} "
          f"tokens sharing a system prompt; flags: {' '.join(flags) or '(defaults)'}")
    for name in ("cold", "warm"):
        print(f"  {name}: TTFT p50 {1e3 * p50[name]:.0f} ms, p90 {1e3 * percentile(ttft[name], 0.9):.0f} ms")
    print(f"  cold/warm TTFT p50: {p50['cold'] / p50['warm']:.1f}x; warm server: hit ratio "
          f"{metric(text, 'megadecode_prefix_cache_hit_ratio'):.2f}, tokens reused "
          f"{metric(text, 'megadecode_prefix_cache_token_hit_ratio'):.2f} of those looked up, "
          f"{metric(text, 'megadecode_prefix_cache_bytes') / 2**20:.1f} MiB held")


if __name__ == "__main__":
    main()
