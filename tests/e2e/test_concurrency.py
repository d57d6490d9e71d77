"""Continuous batching under concurrency (issue 5): 32 streaming clients against 4 rows all
complete with the same output they get alone (batch invariance), rows never leak, and clients
that disconnect are cancelled (running or queued)."""
import concurrent.futures as futures
import json
import socket
import time

import httpx

from conftest import metric

PROMPTS = [f"Request number {i}: tell me something about {w}."
           for i, w in enumerate(["cats", "dogs", "rain", "code", "tea", "maps", "jazz", "salt"] * 4)]


def stream_chat(url, prompt, seed=None, max_tokens=24):
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}}
    body.update({"temperature": 1.0, "seed": seed} if seed is not None else {"temperature": 0})
    text, reasoning, usage = "", "", None
    with httpx.Client(timeout=300) as c, c.stream("POST", url + "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            assert "error" not in event, event
            for choice in event["choices"]:
                text += choice["delta"].get("content") or ""
                reasoning += choice["delta"].get("reasoning_content") or ""
            if event.get("usage"):
                usage = event["usage"]
    return reasoning, text, usage["completion_tokens"]


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def gauges(http):
    text = http.get("/metrics").text
    return (metric(text, "megadecode_num_requests_running"),
            metric(text, "megadecode_num_requests_waiting"))


def test_32_streams_on_4_rows_match_their_solo_runs(server, http):
    seeds = [None if i % 3 else 1000 + i for i in range(len(PROMPTS))]
    alone = [stream_chat(server.url, p, s) for p, s in zip(PROMPTS, seeds)]
    with futures.ThreadPoolExecutor(max_workers=len(PROMPTS)) as pool:
        together = list(pool.map(lambda a: stream_chat(server.url, *a), zip(PROMPTS, seeds)))
    for i, (a, t) in enumerate(zip(alone, together)):
        assert t == a, f"request {i} differs when batched"
    assert wait_for(lambda: gauges(http) == (0.0, 0.0)), gauges(http)


def open_stream(port, body):
    """A raw streaming request; returns the socket after the first content event arrived."""
    sock = socket.create_connection(("127.0.0.1", port))
    payload = json.dumps(body).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return sock


LONG = {"messages": [{"role": "user", "content": "go"}], "max_tokens": 3000, "ignore_eos": True,
        "temperature": 0, "stream": True}


def test_disconnected_stream_is_cancelled(server, http):
    aborts = metric(http.get("/metrics").text, "megadecode_requests_finished_total",
                    {"finished_reason": "abort"})
    sock = open_stream(server.port, LONG)
    received = b""
    while received.count(b"data: ") < 3:
        received += sock.recv(65536)
    assert gauges(http)[0] == 1.0
    sock.close()
    assert wait_for(lambda: gauges(http)[0] == 0.0, 2.0), "the row was not freed"
    after = metric(http.get("/metrics").text, "megadecode_requests_finished_total",
                   {"finished_reason": "abort"})
    assert after == aborts + 1


def test_disconnected_queued_request_leaves_the_queue(server, http):
    busy = [open_stream(server.port, LONG) for _ in range(4)]
    assert wait_for(lambda: gauges(http)[0] == 4.0)
    queued = open_stream(server.port, dict(LONG, stream=False))
    assert wait_for(lambda: gauges(http)[1] == 1.0)
    queued.close()
    assert wait_for(lambda: gauges(http)[1] == 0.0, 2.0), "the queued request stayed queued"
    for s in busy:
        s.close()
    assert wait_for(lambda: gauges(http) == (0.0, 0.0), 5.0)
