"""What one long prompt does to a running stream (issue 14): a chat stream runs on
`megadecode serve`, then a completions request with a prompt of ~2,600 tokens arrives; prints
the stream's inter-token gap before and while that prompt is prefilled (mean and worst), the
server's own worst gap between decode steps, and how long the long request took. Run by
`bench/serve_load.sh --stall [model] [serve flags...]` (default: the default model, with the
server's default --prefill-chunk and --prefill-budget-ms)."""
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from conftest import Server  # noqa: E402
from long_prompt_stall import stream_beside_a_long_prompt  # noqa: E402


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / ".models/SmolLM2-135M-Instruct.Q4_1.gguf")
    flags = sys.argv[2:]
    server = Server("--max-batch", "2", *flags, model=model)
    try:
        body = {"messages": [{"role": "user", "content": "Tell me a long story."}],
                "max_tokens": 4000, "ignore_eos": True, "stream": True}
        long_prompt = " ".join(f"item {i} of the list," for i in range(300))
        stall = stream_beside_a_long_prompt(server.url, body, long_prompt, events_before=10)
    finally:
        server.stop()
    print(f"flags: {' '.join(flags) or '(defaults)'}; long prompt "
          f"{stall.long_response.json()['usage']['prompt_tokens']} tokens in "
          f"{stall.long_seconds:.1f} s; stream gap before {1e3 * statistics.mean(stall.before):.0f} "
          f"ms, during: mean {1e3 * statistics.mean(stall.during):.0f} ms, worst "
          f"{1e3 * max(stall.during):.0f} ms; server's worst step gap {1e3 * stall.server_gap:.0f} ms")


if __name__ == "__main__":
    main()
