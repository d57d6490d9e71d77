"""`megadecode serve` with no --model serves the default model (SmolLM2-135M-Instruct, installed
by scripts/setup) and answers sensibly through the openai client. Skipped when the model file is
absent and in sanitized builds (minutes of a 135M model under ASan add no coverage)."""
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BIN, ROOT, Server

MODEL = ROOT / ".models/SmolLM2-135M-Instruct.Q4_1.gguf"


class DefaultServer(Server):
    """A Server started without --model."""

    def __init__(self):
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"md-e2e-default-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "w+")
        env = dict(os.environ, MEGADECODE_ROOT=str(ROOT))
        self.proc = subprocess.Popen([BIN, "serve", "--port", "0", "--max-batch", "2"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.port = self._wait_for(r"listening on http://127\.0\.0\.1:(\d+)", 120)
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait_for(r"megadecode serve: ready", 120)


@pytest.mark.skipif(not MODEL.exists(), reason="the default model is not installed")
@pytest.mark.skipif(bool(os.environ.get("MD_E2E_SANITIZED")), reason="slow under sanitizers")
def test_serve_without_model_uses_the_default_and_answers():
    openai = pytest.importorskip("openai")
    env_model = os.environ.pop("MEGADECODE_MODEL", None)
    server = None
    try:
        server = DefaultServer()
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()] == ["smollm2-135m-instruct.q4_1"]
        r = client.chat.completions.create(
            model="smollm2-135m-instruct.q4_1", temperature=0, max_tokens=24,
            messages=[{"role": "user", "content": "What is the capital of France?"}])
        assert "Paris" in r.choices[0].message.content
        assert r.choices[0].finish_reason == "stop"
    finally:
        if server:
            assert server.stop() == 0, server.output()
        if env_model is not None:
            os.environ["MEGADECODE_MODEL"] = env_model
