"""A burst of streaming clients against `megadecode serve` on loopback (issue 14): N clients open
a connection each and stream one greedy chat reply at once, while a prober asks /health every
50 ms. Prints one JSON line: requests/s, time to first token p50/p99, the worst inter-token gap
seen by any stream, /health latency p50/max, errors, requests lost, and the server's RSS before
and after. Run by `bench/serve_load.sh --burst N`.

usage: serve_burst.py CLIENTS [serve flags...]   (default flags: --max-batch 4; -m MODEL picks
the model, default the tiny Qwen3.8 fixture)"""
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests/e2e"))
from conftest import Server  # noqa: E402
from raw_http import delta_text, read_chunks, read_head, request_bytes  # noqa: E402

CHAT = "/v1/chat/completions"
BODY = {"messages": [{"role": "user", "content": "Tell me about the sea."}], "max_tokens": 32,
        "ignore_eos": True, "temperature": 0, "stream": True}


async def one_stream(port):
    """(status, seconds to first token, event arrival times, text)."""
    start = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_bytes("POST", CHAT, BODY))
    status, headers = await read_head(reader)
    arrivals, text, pending = [], "", b""
    if status == 200:
        async for chunk in read_chunks(reader):
            pending += chunk
            while b"\n\n" in pending:
                event, pending = pending.split(b"\n\n", 1)
                if not event.startswith(b"data: {"):
                    continue
                for choice in json.loads(event[6:])["choices"]:
                    if piece := delta_text(choice):
                        arrivals.append(time.monotonic())
                        text += piece
    writer.close()
    first = arrivals[0] - start if arrivals else None
    return status, first, arrivals, text


async def probe(port, stop, out):
    while not stop.is_set():
        start = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request_bytes("GET", "/health", extra="Connection: close\r\n"))
        await read_head(reader)
        out.append(time.monotonic() - start)
        writer.close()
        await asyncio.sleep(0.05)


async def burst(port, clients):
    stop = asyncio.Event()
    probes = []
    prober = asyncio.create_task(probe(port, stop, probes))
    started = time.monotonic()
    results = await asyncio.gather(*(one_stream(port) for _ in range(clients)),
                                   return_exceptions=True)
    elapsed = time.monotonic() - started
    stop.set()
    await prober
    return results, elapsed, probes


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    flags = sys.argv[2:] or ["--max-batch", "4"]
    model = None
    if "-m" in flags:  # the model goes to Server, which passes its own -m
        at = flags.index("-m")
        model = flags[at + 1]
        flags = flags[:at] + flags[at + 2:]
    server = Server(*flags, "--max-queue", str(clients), model=model)
    try:
        asyncio.run(burst(server.port, 8))  # warm-up
        rss_before = server.rss_bytes()
        results, elapsed, probes = asyncio.run(burst(server.port, clients))
        rss_after = server.rss_bytes()
    finally:
        server.stop()
    ok = [r for r in results if not isinstance(r, BaseException) and r[0] == 200]
    texts = {r[3] for r in ok}
    gaps = [b - a for r in ok for a, b in zip(r[2], r[2][1:])]
    ttft = [r[1] for r in ok if r[1] is not None]
    print(json.dumps({
        "clients": clients, "flags": " ".join(flags), "seconds": round(elapsed, 2),
        "requests_per_second": round(len(ok) / elapsed, 2),
        "errors": sum(1 for r in results if not isinstance(r, BaseException) and r[0] != 200),
        "lost": sum(1 for r in results if isinstance(r, BaseException)),
        "distinct_texts": len(texts),
        "ttft_p50_ms": round(1e3 * statistics.median(ttft), 1),
        "ttft_p99_ms": round(1e3 * percentile(ttft, 0.99), 1),
        "worst_inter_token_gap_ms": round(1e3 * max(gaps), 1) if gaps else None,
        "health_p50_ms": round(1e3 * statistics.median(probes), 1),
        "health_max_ms": round(1e3 * max(probes), 1),
        "rss_before_mib": round(rss_before / 2**20, 1),
        "rss_after_mib": round(rss_after / 2**20, 1),
    }))


if __name__ == "__main__":
    main()
