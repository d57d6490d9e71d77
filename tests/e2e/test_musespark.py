"""`megadecode serve` on the scaled-down Muse Spark fixture (tools/make_musespark_fixtures.py:
NVFP4 and bf16 experts, Muse's chat format) through the official openai client: the prompt is
rendered and tokenized as Hugging Face's jinja2 and `tokenizers` do it, the message headers never
reach the client (they split reasoning from the answer), and a streamed answer is the same as the
whole one."""
import json
from pathlib import Path

import pytest

from conftest import (MODEL_DIR, Server, assert_lossless_run, assert_speculating_server,
                      assert_structured_answer, run_cli)

FIXTURE = Path(MODEL_DIR).parent.parent / "musespark" / "muse-spark-tiny"
MARKERS = ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>", "<|reserved", "<|begin_of_text|>")
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2? <|eot|>"}]


@pytest.fixture(scope="module")
def muse():
    openai = pytest.importorskip("openai")
    if not FIXTURE.exists():
        pytest.skip("the Muse Spark fixture is not built")
    server = Server(model=str(FIXTURE))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                           timeout=120)
    yield client
    assert server.stop() == 0, server.output()


def expected_prompt_tokens():
    """The template rendered by jinja2 as transformers sets it up, encoded by `tokenizers`."""
    import sys
    from tokenizers import Tokenizer
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    from gen_template_goldens import make_environment
    config = json.loads((FIXTURE / "tokenizer_config.json").read_text())
    text = make_environment().from_string(config["chat_template"]).render(
        messages=MESSAGES, add_generation_prompt=True)
    return len(Tokenizer.from_file(str(FIXTURE / "tokenizer.json")).encode(
        text, add_special_tokens=False).ids)


def test_the_prompt_is_rendered_and_tokenized_as_transformers_does(muse):
    r = muse.chat.completions.create(model=muse.models.list().data[0].id, messages=MESSAGES,
                                     max_tokens=1, temperature=0)
    assert r.usage.prompt_tokens == expected_prompt_tokens()


def test_headers_never_reach_the_client_and_streaming_agrees(muse):
    model = muse.models.list().data[0].id
    whole = muse.chat.completions.create(model=model, messages=MESSAGES, max_tokens=24,
                                         temperature=0)
    message = whole.choices[0].message
    content = message.content or ""
    reasoning = getattr(message, "reasoning_content", None) or ""
    for marker in MARKERS:
        assert marker not in content and marker not in reasoning, (marker, content, reasoning)
    assert whole.choices[0].finish_reason in ("stop", "length")
    assert 1 <= whole.usage.completion_tokens <= 24

    streamed_content, streamed_reasoning = "", ""
    for chunk in muse.chat.completions.create(model=model, messages=MESSAGES, max_tokens=24,
                                              temperature=0, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        streamed_content += delta.content or ""
        streamed_reasoning += getattr(delta, "reasoning_content", None) or ""
    assert (streamed_content, streamed_reasoning) == (content, reasoning)


def test_completions_take_a_raw_prompt(muse):
    r = muse.completions.create(model=muse.models.list().data[0].id, prompt="The quick brown fox",
                                max_tokens=8, temperature=0)
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens >= 1


def test_structured_output_shapes_the_answer_message(muse):
    """The answer header is opened before the grammar applies: the body is the JSON."""
    assert_structured_answer(muse, muse.models.list().data[0].id, MESSAGES)


def test_muse_reasoning_efforts(muse):
    import openai
    model = muse.models.list().data[0].id
    for effort in ("minimal", "high", "xhigh", "max", "none"):
        muse.chat.completions.create(model=model, messages=MESSAGES, max_tokens=1,
                                     reasoning_effort=effort)
    muse.chat.completions.create(model=model, messages=MESSAGES, max_tokens=1,
                                 extra_body={"chat_template_kwargs": {"reasoning_effort": "high"}})
    with pytest.raises(openai.BadRequestError) as error:
        muse.chat.completions.create(model=model, messages=MESSAGES, max_tokens=1,
                                     extra_body={"chat_template_kwargs": {"reasoning_effort": "max"}})
    assert "minimal" in str(error.value)


def test_tools_are_refused_because_the_muse_template_renders_none(muse):
    """Muse's chat template (and spec §9) has no tool format: a request whose tools the model
    would never see is refused by name instead of answered as if they were offered; without
    tools (or with tool_choice "none") the same request is served."""
    import openai
    model = muse.models.list().data[0].id
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    for choice in ("auto", "required"):
        with pytest.raises(openai.BadRequestError) as error:
            muse.chat.completions.create(model=model, messages=MESSAGES, max_tokens=1,
                                         tools=tools, tool_choice=choice)
        assert error.value.status_code == 400
        assert error.value.body["param"] == "tools", error.value.body
        assert "does not use tools" in error.value.body["message"]
    r = muse.chat.completions.create(model=model, messages=MESSAGES, max_tokens=1, tools=tools,
                                     tool_choice="none")
    assert r.choices[0].message.tool_calls is None


def test_int8_dense_weights_run_and_other_families_refuse_them():
    if not FIXTURE.exists():
        pytest.skip("the Muse Spark fixture is not built")
    done = run_cli("run", "-m", str(FIXTURE), "--dense-weights", "int8", "-p", "2+2?", "-n", "4",
                   "--temperature", "0", "-t", "1")
    assert done.returncode == 0, done.stderr
    assert "decode 4 tok" in done.stderr or "decode 4 tok" in done.stdout
    refused = run_cli("run", "-m", MODEL_DIR, "--dense-weights", "int8", "-p", "hi", "-n", "1")
    assert refused.returncode != 0
    assert "--dense-weights int8 is implemented for muse_spark models only" in refused.stderr
    bad = run_cli("run", "-m", str(FIXTURE), "--dense-weights", "int4", "-p", "hi")
    assert bad.returncode == 2 and "--dense-weights" in bad.stderr


# The DSpark drafters are written beside the Kimi K3 fixtures (tests/kimi/CMakeLists.txt).
DRAFT = Path(MODEL_DIR).parent.parent / "kimi" / "dspark-muse-spark-tiny"


def test_run_with_the_dspark_drafter_is_lossless():
    """DSpark drafts for Muse Spark too: greedy `run --draft` writes what the target alone
    writes, and the rounds are reported."""
    if not DRAFT.exists():
        pytest.skip("the DSpark fixture is not built")
    _, spec = assert_lossless_run(FIXTURE, "The quick brown fox jumps over the lazy dog.", 24,
                                  DRAFT)
    assert "(dspark, block 8)" in spec.stderr


def test_serve_with_the_dspark_drafter(muse):
    """`serve --draft` on Muse Spark: DSpark in /props, greedy completions equal the server
    without it, /metrics counts the rounds, seeded sampling is batch invariant."""
    if not DRAFT.exists():
        pytest.skip("the DSpark fixture is not built")
    server = Server("--draft", str(DRAFT), "--max-batch", "4", model=str(FIXTURE))
    try:
        assert_speculating_server(server.url, str(muse.base_url).removesuffix("/v1/"),
                                  "The quick brown fox jumps over the lazy dog.", "dspark", 7)
    finally:
        assert server.stop() == 0, server.output()
