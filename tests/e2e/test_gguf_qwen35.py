"""`megadecode serve` on a qwen35 GGUF file (tools/make_qwen35_gguf.py: a transformers-golden
fixture in llama.cpp's layout) answers through the openai client exactly as the same model's
safetensors directory does: same greedy text, same usage, its tokenizer and chat template taken
from the GGUF metadata."""
from pathlib import Path

import pytest

from conftest import MODEL_DIR, Server

FIXTURES = Path(MODEL_DIR).parent          # …/goldens/qwen38
DIRECTORY = FIXTURES / "tiny-qwen35-tied"  # value heads in transformers' order: bitwise equal
GGUF = FIXTURES.parent / "qwen35-gguf" / "tiny-qwen35-tied.BF16.gguf"


def greedy_answer(model):
    openai = pytest.importorskip("openai")
    server = Server(model=str(model))
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        r = client.chat.completions.create(
            model=client.models.list().data[0].id, temperature=0, max_tokens=16,
            messages=[{"role": "user", "content": "Tell me about the weather."}])
        choice = r.choices[0]
        return choice.message.content, getattr(choice.message, "reasoning_content", None), \
            r.usage.prompt_tokens, r.usage.completion_tokens
    finally:
        assert server.stop() == 0


@pytest.mark.skipif(not GGUF.exists(), reason="the qwen35 GGUF fixtures are not built")
def test_a_qwen35_gguf_serves_what_its_directory_serves():
    from_gguf = greedy_answer(GGUF)
    from_directory = greedy_answer(DIRECTORY)
    assert from_gguf == from_directory
    assert from_gguf[2] > 10 and from_gguf[3] == 16
