"""What one long prompt does to a running stream: shared by the stall test
(test_robustness.py) and its bench (bench/serve_stall.py)."""
import threading
import time
from dataclasses import dataclass

import httpx

from conftest import metric


@dataclass
class Stall:
    before: list          # gaps between the stream's events before the long prompt came, s
    during: list          # gaps while it was prefilled (until its response came), s
    server_gap: float     # the server's worst gap between decode steps since start, s
    long_response: httpx.Response
    long_seconds: float


def stream_beside_a_long_prompt(url, stream_body, long_prompt, events_before=3):
    """Streams `stream_body` (a chat request with "stream": true) and, after `events_before` of
    its events, sends `long_prompt` as a one-token completions request; times the stream's events
    until that request is answered."""
    with httpx.stream("POST", url + "/v1/chat/completions", json=stream_body, timeout=600) as r:
        lines = r.iter_lines()
        arrivals = []
        for line in lines:
            if line.startswith("data: {"):
                arrivals.append(time.monotonic())
            if len(arrivals) == events_before:
                break
        result = {}

        def long_request():
            start = time.monotonic()
            result["r"] = httpx.post(url + "/v1/completions", timeout=600,
                                     json={"prompt": long_prompt, "max_tokens": 1})
            result["seconds"] = time.monotonic() - start

        other = threading.Thread(target=long_request)
        other.start()
        while other.is_alive():
            line = next(lines)
            if line.startswith("data: {"):
                arrivals.append(time.monotonic())
        other.join()
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    server_gap = metric(httpx.get(url + "/metrics").text, "megadecode_decode_gap_max_seconds")
    return Stall(gaps[:events_before - 1], gaps[events_before:], server_gap, result["r"],
                 result["seconds"])
