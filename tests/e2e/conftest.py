"""Shared fixtures for the server's end-to-end tests: a `megadecode serve` process on a free
loopback port, a base URL, and an OpenAI client pointed at it.

Environment (set by ctest; defaults suit a developer's checkout):
  MEGADECODE_BIN     the megadecode binary      (build/release/bin/megadecode)
  MD_E2E_MODEL_DIR   the fixture model          (build/fixtures/tiny-qwen38)
"""
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("MEGADECODE_BIN", str(ROOT / "build/release/bin/megadecode"))
MODEL_DIR = os.environ.get("MD_E2E_MODEL_DIR", str(ROOT / "build/fixtures/tiny-qwen38"))


class Server:
    """A running `megadecode serve`; stop() sends SIGTERM and returns the exit code."""

    def __init__(self, *args, model=None, wait_ready=True, timeout=120, threads=1):
        cmd = [BIN, "serve", "-m", model or MODEL_DIR, "--port", "0", "--threads", str(threads),
               *args]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"md-e2e-{os.getpid()}-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self._wait_for(r"listening on http://127\.0\.0\.1:(\d+)", timeout)
        self.url = f"http://127.0.0.1:{self.port}"
        if wait_ready:
            self._wait_for(r"megadecode serve: ready", timeout)

    def _wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_text()
            match = re.search(pattern, text)
            if match:
                return int(match.group(1)) if match.groups() else True
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}):\n{text}")
            time.sleep(0.02)
        raise TimeoutError(f"server did not print {pattern!r}:\n{self.log_path.read_text()}")

    def output(self):
        return self.log_path.read_text()

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="session")
def server():
    s = Server("--max-batch", "4")
    yield s
    code = s.stop()
    assert code == 0, s.output()


@pytest.fixture(scope="session")
def base_url(server):
    return server.url


@pytest.fixture(scope="session")
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def http(server):
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def metric(text, name, labels=None):
    """The value of one Prometheus series (labels: a dict that must be contained)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, value = line.rsplit(" ", 1)
        if series.split("{", 1)[0] != name:
            continue
        if labels and not all(f'{k}="{v}"' in series for k, v in labels.items()):
            continue
        return float(value)
    raise KeyError(f"{name} {labels or ''} not in metrics")


def assert_structured_answer(client, model, messages):
    """A json_schema response format on a model whose format opens the answer in the prompt
    before the grammar applies (Muse's header, Kimi K3's response section): no reasoning, and the
    content is the JSON, or its prefix when the tokens ran out inside it."""
    import json
    r = client.chat.completions.create(
        model=model, messages=messages, max_tokens=60, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "strict": True,
                                                                "schema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
            "additionalProperties": False}}})
    choice = r.choices[0]
    assert not getattr(choice.message, "reasoning_content", None)
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content)["n"], int)
    else:
        assert choice.message.content.startswith("{")


def assert_speculating_server(spec_url, plain_url, prompt, method, draft_tokens):
    """A server with a drafter against the same model's server without one: /props names the
    method; greedy completions are the same text; /metrics counts the rounds (acceptances per
    draft position never increase and sum to the accepted drafts); a seeded sampled completion is
    the same alone and beside other requests (each row speculates with its own drafter)."""
    from concurrent.futures import ThreadPoolExecutor

    def complete(client, **fields):
        body = {"prompt": prompt, "max_tokens": 24, "temperature": 0, "ignore_eos": True,
                **fields}
        r = client.post("/v1/completions", json=body)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]

    with httpx.Client(base_url=spec_url, timeout=180) as spec, \
            httpx.Client(base_url=plain_url, timeout=180) as plain:
        assert spec.get("/props").json()["speculative"] == {
            "method": method, "num_draft_tokens": draft_tokens}
        for max_tokens in (1, 9, 24):
            assert complete(spec, max_tokens=max_tokens) == complete(plain, max_tokens=max_tokens)
        text = spec.get("/metrics").text
        accepted = metric(text, "megadecode_spec_decode_num_accepted_tokens_total")
        per_pos = [metric(text, "megadecode_spec_decode_num_accepted_tokens_per_pos_total",
                          {"position": str(i)}) for i in range(draft_tokens)]
        assert metric(text, "megadecode_spec_decode_num_drafts_total") > 0
        assert accepted == sum(per_pos)
        assert all(a >= b for a, b in zip(per_pos, per_pos[1:]))
        sampled = {"temperature": 0.9, "seed": 4321, "max_tokens": 16}
        alone = complete(spec, **sampled)
        with ThreadPoolExecutor(3) as pool:
            beside = [pool.submit(complete, spec, **sampled),
                      pool.submit(complete, spec, temperature=0.7, seed=9, max_tokens=20),
                      pool.submit(complete, spec, max_tokens=12)]
            assert beside[0].result() == alone
            beside[1].result(), beside[2].result()


def run_cli(*args, timeout=120):
    """`megadecode ARGS` without a terminal: the completed process."""
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def assert_lossless_run(model, prompt, tokens, draft, *extra):
    """Greedy `run` with the drafter `draft` (and `extra` flags) writes what the target alone
    writes; returns both runs (their stderr has the round statistics)."""
    args = ["run", "-m", str(model), "-p", prompt, "-n", str(tokens), "--greedy", "--ignore-eos"]
    alone = run_cli(*args)
    spec = run_cli(*args, "--draft", str(draft), *extra)
    assert alone.returncode == 0 and spec.returncode == 0, alone.stderr + spec.stderr
    assert spec.stdout == alone.stdout
    assert "rounds" in spec.stderr, spec.stderr
    return alone, spec
