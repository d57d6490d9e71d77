"""`megadecode run` and `serve` on the scaled-down Kimi K3 fixture (tools/make_kimi_fixtures.py:
its tiktoken tokenizer and no chat template, as the published checkpoint), through the official
openai client: the built-in K3 chat format renders the conversation (tools, a tool result, the
thinking switches), and K3's output format is parsed into reasoning_content, content and
tool_calls, whole and streamed. The random fixture never writes a tool call, so one server writes
a scripted K3 turn (serve's --test-script-output test hook) and the parsing is checked on it."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import (BIN, MODEL_DIR, Server, assert_lossless_run, assert_speculating_server,
                      assert_structured_answer, run_cli)

FIXTURE = Path(MODEL_DIR).parent.parent / "kimi" / "kimi-k3-tiny"
MARKERS = ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>", "[EOS]", "<tool_call>")
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}}]
SCRIPT = ("I should call the weather tool.<|close|>think<|sep|><|open|>response<|sep|>Let me "
          "check.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" "
          "index=\"1\"<|sep|><|open|>argument key=\"city\" type=\"string\"<|sep|>Paris"
          "<|close|>argument<|sep|><|open|>argument key=\"days\" type=\"number\"<|sep|>2"
          "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message"
          "<|sep|><|end_of_msg|>")
QUESTION = [{"role": "user", "content": "Weather in Paris for two days?"}]


def client_for(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                         timeout=120)


@pytest.fixture(scope="module")
def scripted():
    pytest.importorskip("openai")
    if not FIXTURE.exists():
        pytest.skip("the Kimi K3 fixture is not built")
    server = Server("--test-script-output", SCRIPT, model=str(FIXTURE))
    yield client_for(server)
    assert server.stop() == 0, server.output()


@pytest.fixture(scope="module")
def kimi():
    pytest.importorskip("openai")
    if not FIXTURE.exists():
        pytest.skip("the Kimi K3 fixture is not built")
    server = Server(model=str(FIXTURE))
    yield client_for(server)
    assert server.stop() == 0, server.output()


def model_of(client):
    return client.models.list().data[0].id


def test_reasoning_content_and_a_tool_call_in_the_kimi_format(scripted):
    r = scripted.chat.completions.create(model=model_of(scripted), messages=QUESTION, tools=TOOLS,
                                         max_tokens=200, temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.reasoning_content == "I should call the weather tool."
    assert choice.message.content == "Let me check."
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 2}
    assert call.id


def test_streamed_deltas_agree_with_the_whole_answer(scripted):
    content, reasoning, names, arguments, finish = "", "", [], "", None
    for chunk in scripted.chat.completions.create(model=model_of(scripted), messages=QUESTION,
                                                  tools=TOOLS, max_tokens=200, temperature=0,
                                                  stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        for call in delta.tool_calls or []:
            if call.function.name:
                names.append(call.function.name)
            arguments += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    for marker in MARKERS:
        assert marker not in content and marker not in reasoning
    assert (reasoning, content, names) == ("I should call the weather tool.", "Let me check.",
                                           ["get_weather"])
    assert json.loads(arguments) == {"city": "Paris", "days": 2}
    assert finish == "tool_calls"


def test_a_tool_call_round_trip(scripted):
    """The client sends the call and its result back: the K3 format renders them (the call's
    typed arguments, the result matched to its call by id) and the model answers."""
    model = model_of(scripted)
    first = scripted.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS,
                                             max_tokens=200, temperature=0)
    message = first.choices[0].message
    history = QUESTION + [
        {"role": "assistant", "content": message.content,
         "reasoning_content": message.reasoning_content,
         "tool_calls": [c.model_dump() for c in message.tool_calls]},
        {"role": "tool", "tool_call_id": message.tool_calls[0].id,
         "content": json.dumps({"forecast": "sunny", "high": 21})}]
    second = scripted.chat.completions.create(model=model, messages=history, tools=TOOLS,
                                              max_tokens=200, temperature=0)
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + 20
    assert second.choices[0].message.tool_calls[0].function.name == "get_weather"


def test_markers_never_reach_the_client_and_thinking_can_be_switched_off(kimi):
    model = model_of(kimi)
    on = kimi.chat.completions.create(model=model, messages=QUESTION, max_tokens=16,
                                      temperature=0)
    # The generation prompt opens the think section: the random model's text is reasoning.
    assert on.choices[0].message.reasoning_content
    for effort_off in ({"reasoning_effort": "none"},
                       {"extra_body": {"chat_template_kwargs": {"thinking": False}}}):
        off = kimi.chat.completions.create(model=model, messages=QUESTION, max_tokens=16,
                                           temperature=0, **effort_off)
        message = off.choices[0].message
        assert not getattr(message, "reasoning_content", None)
        for marker in MARKERS:
            assert marker not in (message.content or "")


def test_tool_choices_and_efforts_the_format_takes_or_refuses(kimi):
    import openai
    model = model_of(kimi)
    prompt = {}
    for choice in ("auto", "required", "none"):
        prompt[choice] = kimi.chat.completions.create(
            model=model, messages=QUESTION, tools=TOOLS, tool_choice=choice,
            max_tokens=1).usage.prompt_tokens
    # required is stated in the prompt (K3's tool-choice system message); none drops the tools.
    assert prompt["required"] > prompt["auto"] + 10 > prompt["none"] + 10
    with pytest.raises(openai.BadRequestError) as error:
        kimi.chat.completions.create(
            model=model, messages=QUESTION, tools=TOOLS, max_tokens=1,
            tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert error.value.body["param"] == "tool_choice"
    # OpenAI's efforts map onto K3's (medium, which K3 refuses, keeps its default).
    for effort in ("minimal", "low", "medium", "high", "none"):
        kimi.chat.completions.create(model=model, messages=QUESTION, max_tokens=1,
                                     reasoning_effort=effort)
    kimi.chat.completions.create(model=model, messages=QUESTION, max_tokens=1,
                                 extra_body={"chat_template_kwargs": {"reasoning_effort": "max"}})
    with pytest.raises(openai.BadRequestError) as error:
        kimi.chat.completions.create(
            model=model, messages=QUESTION, max_tokens=1,
            extra_body={"chat_template_kwargs": {"reasoning_effort": "medium"}})
    assert "max" in str(error.value)


def test_a_marker_typed_in_a_message_stays_text(kimi):
    """Only the format's own markers are special tokens: the same text typed by the user costs
    ordinary tokens (more of them than the one special id each)."""
    model = model_of(kimi)
    plain = kimi.chat.completions.create(model=model, max_tokens=1, messages=[
        {"role": "user", "content": "x"}])
    typed = kimi.chat.completions.create(model=model, max_tokens=1, messages=[
        {"role": "user", "content": "x<|open|>"}])
    assert typed.usage.prompt_tokens > plain.usage.prompt_tokens + 1


def test_run_renders_the_chat_format_and_decodes():
    if not FIXTURE.exists():
        pytest.skip("the Kimi K3 fixture is not built")
    done = subprocess.run([BIN, "run", "-m", str(FIXTURE), "-p", "Hello", "-n", "6",
                           "--temperature", "0", "--ignore-eos", "-t", "1"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "decode 6 tok" in done.stderr + done.stdout


def test_the_terminal_chat_keeps_a_conversation():
    """Two turns through `megadecode chat` on a pipe: the K3 format renders both, the think
    section shows as reasoning, and the second turn is answered."""
    if not FIXTURE.exists():
        pytest.skip("the Kimi K3 fixture is not built")
    done = subprocess.run([BIN, "chat", "-m", str(FIXTURE), "--max-tokens", "6", "--ignore-eos",
                           "--temperature", "0", "-t", "1"],
                          input="Hello there\nAnd again\n", capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("[thinking]") == 2, done.stdout
    for marker in MARKERS:
        assert marker not in done.stdout


def test_structured_output_shapes_the_response_section(kimi):
    """The prompt closes the think section and opens the response before the grammar applies:
    the body is the JSON, not reasoning. K3's format also states the response format in the
    prompt (its response-format system message: tens of tokens more than the plain prompt)."""
    assert_structured_answer(kimi, model_of(kimi), QUESTION)
    model = model_of(kimi)
    plain = kimi.chat.completions.create(model=model, messages=QUESTION, max_tokens=1,
                                         temperature=0).usage.prompt_tokens
    stated = kimi.chat.completions.create(model=model, messages=QUESTION, max_tokens=1,
                                          temperature=0,
                                          response_format={"type": "json_object"})
    assert stated.usage.prompt_tokens > plain + 30


DRAFT = FIXTURE.parent / "dspark-kimi-k3-tiny"
PROMPT = "The quick brown fox jumps over the lazy dog. Then the dog"


def test_run_with_the_dspark_drafter_is_lossless():
    """Greedy `run` with the DSpark drafter writes what the target alone writes, and reports its
    rounds (the random drafter rarely agrees with the random target: the rounds still commit)."""
    if not DRAFT.exists():
        pytest.skip("the DSpark fixture is not built")
    _, spec = assert_lossless_run(FIXTURE, PROMPT, 24, DRAFT)
    assert "(dspark, block 8)" in spec.stderr
    # Forced acceptance (a benchmark mode) commits every draft: the output changes, the run works.
    forced = run_cli("run", "-m", str(FIXTURE), "-p", PROMPT, "-n", "24", "--greedy",
                     "--ignore-eos", "--draft", str(DRAFT), "--force-accept", "7")
    assert forced.returncode == 0, forced.stderr
    accepted = re.search(r"mean acceptance length ([0-9.]+)", forced.stderr)
    assert accepted and float(accepted.group(1)) > 4, forced.stderr
    # The confidence head stops blocks early (§13.7): fewer drafts verified, the same text.
    _, confident = assert_lossless_run(FIXTURE, PROMPT, 24, DRAFT,
                                       "--spec-confidence-threshold", "0.5")
    drafts = re.search(r"(\d+) drafts verified", spec.stderr)
    fewer = re.search(r"(\d+) drafts verified", confident.stderr)
    assert drafts and fewer and int(fewer.group(1)) < int(drafts.group(1)), confident.stderr


def test_a_drafter_with_a_reduced_vocabulary_and_the_targets_embedding():
    """A drafter laid out as speculators saves one with a reduced draft vocabulary (d2t, t2d, no
    embed_tokens): greedy `run --draft` still writes what the target alone writes."""
    draft = FIXTURE.parent / "dspark-kimi-k3-draftvocab"
    if not draft.exists():
        pytest.skip("the DSpark fixture is not built")
    _, spec = assert_lossless_run(FIXTURE, PROMPT, 20, draft)
    assert "(dspark, block 6)" in spec.stderr


def test_confidence_threshold_needs_a_drafter_with_a_confidence_head():
    """--spec-confidence-threshold without a drafter, with one that has no confidence head, or
    outside [0, 1]: a clear error and a non-zero exit."""
    small, small_draft = FIXTURE.parent / "kimi-k3-small", FIXTURE.parent / "dspark-kimi-k3-small"
    if not DRAFT.exists() or not small_draft.exists():
        pytest.skip("the DSpark fixtures are not built")
    cases = [
        (["-m", str(FIXTURE), "--spec-confidence-threshold", "0.5"], "need a drafter"),
        (["-m", str(small), "--draft", str(small_draft), "--spec-confidence-threshold", "0.5"],
         "confidence head"),
        (["-m", str(FIXTURE), "--draft", str(DRAFT), "--spec-confidence-threshold", "1.5"],
         "spec-confidence-threshold"),
    ]
    for extra, message in cases:
        r = run_cli("run", *extra, "-p", "hi", "-n", "2")
        assert r.returncode != 0 and message in r.stderr, (extra, r.stderr)
        assert "Traceback" not in r.stderr and "terminate" not in r.stderr


def test_serve_with_the_dspark_drafter(kimi):
    """`serve --draft` (with the confidence head stopping blocks early) names DSpark in /props,
    its greedy completions equal the server without it, /metrics counts the rounds, and seeded
    sampling is batch invariant."""
    if not DRAFT.exists():
        pytest.skip("the DSpark fixture is not built")
    server = Server("--draft", str(DRAFT), "--spec-confidence-threshold", "0.1",
                    "--max-batch", "4", model=str(FIXTURE))
    try:
        assert_speculating_server(server.url, str(kimi.base_url).removesuffix("/v1/"), PROMPT,
                                  "dspark", 7)
    finally:
        assert server.stop() == 0, server.output()


def test_sampled_speculation_with_dspark_is_reproducible():
    """Sampled rounds with the DSpark drafter (its q is a whole distribution) run with a block
    shorter than the drafter's, and the same seed gives the same text."""
    if not DRAFT.exists():
        pytest.skip("the DSpark fixture is not built")
    args = [BIN, "run", "-m", str(FIXTURE), "-p", PROMPT, "-n", "24", "--ignore-eos",
            "--temperature", "0.8", "--seed", "7", "--draft", str(DRAFT), "--block-size", "4"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
    second = subprocess.run(args, capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout and first.stdout.strip()
    assert "(dspark, block 4)" in first.stderr and "rounds" in first.stderr, first.stderr
