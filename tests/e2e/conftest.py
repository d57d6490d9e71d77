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
