"""What one long prompt does to a running stream (issue 14): a chat stream runs on
`megadecode serve`, then a completions request with a prompt of ~2,600 tokens arrives; prints
the stream's inter-token gap before and while that prompt is prefilled (mean and worst), the
server's own worst gap between decode steps, and how long the long request took. Run by
`bench/serve_load.sh --stall [model] [serve flags...]` (default: the default model, with the
server's default --prefill-chunk and --prefill-budget-ms)."""
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from conftest import Server, metric  # noqa: E402


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".models/SmolLM2-135M-Instruct.Q4_1.gguf")
    flags = sys.argv[2:]
    server = Server("--max-batch", "2", *flags, model=model)
    try:
        body = {"messages": [{"role": "user", "content": "Tell me a long story."}],
                "max_tokens": 4000, "ignore_eos": True, "stream": True}
        long_prompt = " ".join(f"item {i} of the list," for i in range(300))
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body,
                          timeout=600) as r:
            lines = r.iter_lines()
            arrivals = []
            for line in lines:
                if line.startswith("data: {"):
                    arrivals.append(time.monotonic())
                if len(arrivals) == 10:
                    break
            result = {}

            def long_request():
                start = time.monotonic()
                result["r"] = httpx.post(server.url + "/v1/completions", timeout=600,
                                         json={"prompt": long_prompt, "max_tokens": 1})
                result["seconds"] = time.monotonic() - start

            other = threading.Thread(target=long_request)
            other.start()
            mark = len(arrivals)
            while other.is_alive():
                line = next(lines)
                if line.startswith("data: {"):
                    arrivals.append(time.monotonic())
        before = [b - a for a, b in zip(arrivals[:mark], arrivals[1:mark])]
        during = [b - a for a, b in zip(arrivals[mark:], arrivals[mark + 1:])]
        server_gap = metric(httpx.get(server.url + "/metrics").text,
                            "megadecode_decode_gap_max_seconds")
        print(f"flags: {' '.join(flags) or '(defaults)'}; long prompt "
              f"{result['r'].json()['usage']['prompt_tokens']} tokens in {result['seconds']:.1f} s; "
              f"stream gap before {1e3 * statistics.mean(before):.0f} ms, during: mean "
              f"{1e3 * statistics.mean(during):.0f} ms, worst {1e3 * max(during):.0f} ms; "
              f"server's worst step gap {1e3 * server_gap:.0f} ms")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
