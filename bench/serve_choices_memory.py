"""The memory of the n choices of one long prompt (issue 14): `megadecode serve --max-batch N`
answers one completions request with a ~1,100-token prompt (default model) and n=N; prints the
prompt's length, the server's peak RSS (VmHWM) before and after the request, its RSS after, and
the KV block pool's peak from /metrics. Run by `bench/serve_load.sh --choices [model] [n]
[serve flags...]` (default: the default model, n=8)."""
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from conftest import Server, metric  # noqa: E402


def memory_mib(server, field):
    with open(f"/proc/{server.proc.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".models/SmolLM2-135M-Instruct.Q4_1.gguf")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    server = Server("--max-batch", str(n), *sys.argv[3:], model=model)
    try:
        warm = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2},
                          timeout=60)
        assert warm.status_code == 200, warm.text
        peak_before = memory_mib(server, "VmHWM")
        body = {"prompt": " ".join(f"item {i}," for i in range(200)), "max_tokens": 16, "n": n,
                "temperature": 1.0, "seed": 1}
        start = time.monotonic()
        r = httpx.post(server.url + "/v1/completions", json=body, timeout=1200)
        seconds = time.monotonic() - start
        assert r.status_code == 200, r.text
        peak_after, rss_after = memory_mib(server, "VmHWM"), memory_mib(server, "VmRSS")
        pool_peak = metric(httpx.get(server.url + "/metrics").text, "megadecode_kv_pool_peak_bytes")
    finally:
        server.stop()
    print(f"prompt {r.json()['usage']['prompt_tokens']} tokens, n={n}, {seconds:.1f} s: peak RSS "
          f"{peak_before:.1f} -> {peak_after:.1f} MiB (+{peak_after - peak_before:.1f}), RSS after "
          f"{rss_after:.1f} MiB, KV pool peak {pool_peak / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
