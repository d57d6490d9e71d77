"""`megadecode serve` on qwen35 and qwen35moe GGUF files (tools/make_qwen35_gguf.py: a transformers-golden
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


MOE_GGUF = FIXTURES.parent / "qwen35-gguf" / "tiny-qwen35-moe.Q8_0.gguf"


@pytest.mark.skipif(not MOE_GGUF.exists(), reason="the qwen35moe GGUF fixtures are not built")
def test_a_qwen35moe_gguf_answers_the_same_batched_or_alone():
    """Concurrent requests share decode steps (and the experts their rows choose); each answer
    is still the one the request gets alone."""
    openai = pytest.importorskip("openai")
    from concurrent.futures import ThreadPoolExecutor
    server = Server(model=str(MOE_GGUF))
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        model = client.models.list().data[0].id
        questions = ["Tell me about the weather.", "What is 2 + 2?", "Name a colour.",
                     "Hello!", "Why is the sky blue?"]

        def ask(question):
            r = client.chat.completions.create(
                model=model, temperature=0, max_tokens=12,
                messages=[{"role": "user", "content": question}])
            message = r.choices[0].message
            # The template opens a think block: the text may all be reasoning.
            text = (message.content or "") + "|" + (getattr(message, "reasoning_content", None) or "")
            return text, r.usage.completion_tokens

        alone = [ask(q) for q in questions]
        with ThreadPoolExecutor(len(questions)) as pool:
            together = list(pool.map(ask, questions))
        assert together == alone
        assert all(tokens == 12 for _, tokens in alone)
        assert len({text for text, _ in alone}) > 1
    finally:
        assert server.stop() == 0
