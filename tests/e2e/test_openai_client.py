"""The server through the official `openai` Python client (docs/openai-api.md §13): chat and
completions, streaming and not, usage, stops across token boundaries, n, logprobs, echo, tools,
reasoning and seeds. The fixture model is a tiny random Qwen3.8-style model, so the tests check
protocol behaviour and consistency, not the sense of the text."""
import json
import re

import pytest

MESSAGES = [{"role": "user", "content": "Tell me about the weather in Paris."}]
PROMPTS = ["Hello", "The capital of France is", "1, 2, 3,", "Once upon a time", "def f(x):",
           "Weather report:", "Q: why?\nA:", "λ calculus", "东京", "Emoji 🎉 test"]


def chat(client, **kw):
    kw.setdefault("model", "tiny-qwen38")
    kw.setdefault("messages", MESSAGES)
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 16)
    return client.chat.completions.create(**kw)


def collect_chat_stream(stream):
    chunks = list(stream)
    by_index = {}
    for c in chunks:
        for choice in c.choices:
            entry = by_index.setdefault(choice.index, {"content": "", "reasoning": "", "finish": None,
                                                       "roles": 0, "tool_calls": [], "logprobs": []})
            d = choice.delta
            if d.role:
                entry["roles"] += 1
            entry["content"] += d.content or ""
            entry["reasoning"] += getattr(d, "reasoning_content", None) or ""
            entry["tool_calls"] += d.tool_calls or []
            if choice.logprobs and choice.logprobs.content:
                entry["logprobs"] += choice.logprobs.content
            if choice.finish_reason:
                entry["finish"] = choice.finish_reason
    return chunks, by_index


def test_chat_non_streaming_shape_and_usage(client):
    r = chat(client)
    assert r.object == "chat.completion"
    assert re.fullmatch(r"chatcmpl-[A-Za-z0-9]{24}", r.id)
    assert r.system_fingerprint.startswith("fp_")
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 16
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_matches_non_streaming(client):
    for prompt in PROMPTS:
        messages = [{"role": "user", "content": prompt}]
        full = chat(client, messages=messages, max_tokens=24)
        chunks, by_index = collect_chat_stream(
            chat(client, messages=messages, max_tokens=24, stream=True,
                 stream_options={"include_usage": True}))
        got = by_index[0]
        message = full.choices[0].message
        assert got["content"] == (message.content or ""), prompt
        assert got["reasoning"] == (getattr(message, "reasoning_content", None) or ""), prompt
        assert got["finish"] == full.choices[0].finish_reason
        assert chunks[0].choices[0].delta.role == "assistant"
        assert chunks[0].choices[0].delta.content == ""
        # The stream's prompt resumes from the first request's in the prefix cache.
        assert chunks[-1].choices == []
        assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (
            full.usage.prompt_tokens, full.usage.completion_tokens)
        assert (chunks[-1].usage.prompt_tokens_details.cached_tokens
                >= full.usage.prompt_tokens_details.cached_tokens)
        assert chunks[-2].choices[0].finish_reason is not None
        assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
        assert all(c.usage is None for c in chunks[:-1])


def test_completions_stream_matches_non_streaming(client):
    for prompt in PROMPTS:
        full = client.completions.create(model="tiny-qwen38", prompt=prompt, max_tokens=20,
                                         temperature=0)
        assert full.object == "text_completion"
        assert re.fullmatch(r"cmpl-[A-Za-z0-9]{24}", full.id)
        stream = list(client.completions.create(model="tiny-qwen38", prompt=prompt, max_tokens=20,
                                                temperature=0, stream=True))
        assert all(c.object == "text_completion" for c in stream)
        assert "".join(c.choices[0].text for c in stream if c.choices) == full.choices[0].text
        assert stream[-1].choices[0].finish_reason == full.choices[0].finish_reason


def token_texts(client, prompt, n):
    """The greedy continuation's tokens, each with its text."""
    r = client.completions.create(model="tiny-qwen38", prompt=prompt, max_tokens=n, temperature=0,
                                  extra_body={"return_token_ids": True, "skip_special_tokens": True})
    ids = r.choices[0].model_extra["token_ids"]
    return r.choices[0].text, ids


def test_stop_string_spanning_two_tokens(client, http):
    prompt = "The capital of France is"
    text, ids = token_texts(client, prompt, 40)
    # Find two adjacent tokens with plain ASCII text and build a stop string across them.
    pieces = [http.post("/detokenize", json={"tokens": [i]}).json()["prompt"] for i in ids]
    offset, stop = 0, None
    for a, b in zip(pieces, pieces[1:]):
        if len(a) >= 2 and b and a.isascii() and b.isascii() and a[-2:] + b[0] not in text[:offset]:
            stop = a[-2:] + b[0]
            break
        offset += len(a)
    assert stop is not None, pieces
    cut = text.index(stop)
    r = client.completions.create(model="tiny-qwen38", prompt=prompt, max_tokens=40, temperature=0,
                                  stop=[stop])
    assert r.choices[0].text == text[:cut]
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].model_extra["stop_reason"] == stop
    # Streaming: no event ever shows the stop string's first part.
    events = [c.choices[0].text for c in client.completions.create(
        model="tiny-qwen38", prompt=prompt, max_tokens=40, temperature=0, stop=[stop], stream=True)
        if c.choices]
    assert "".join(events) == text[:cut]
    kept = client.completions.create(model="tiny-qwen38", prompt=prompt, max_tokens=40,
                                     temperature=0, stop=[stop],
                                     extra_body={"include_stop_str_in_output": True})
    assert kept.choices[0].text == text[:cut] + stop


def test_n_choices_non_streaming_and_streaming(client):
    r = chat(client, n=3, temperature=1, seed=3, max_tokens=8)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == 24
    single = chat(client, n=1, temperature=1, seed=3, max_tokens=8)
    assert single.usage.prompt_tokens == r.usage.prompt_tokens
    assert r.choices[0].message.content == single.choices[0].message.content
    assert r.choices[0].message.model_extra.get("reasoning_content") == \
        single.choices[0].message.model_extra.get("reasoning_content")
    _, by_index = collect_chat_stream(chat(client, n=2, max_tokens=6, stream=True))
    assert sorted(by_index) == [0, 1]
    assert all(v["roles"] == 1 and v["finish"] == "length" for v in by_index.values())


def test_seeded_sampling_is_reproducible(client):
    def sample(seed):
        r = client.completions.create(model="tiny-qwen38", prompt="Once", max_tokens=64,
                                      temperature=1, seed=seed)
        return r.choices[0].text
    assert sample(7) == sample(7)
    assert sample(7) != sample(8)


def test_chat_logprobs(client):
    r = chat(client, logprobs=True, top_logprobs=2, max_tokens=8)
    entries = r.choices[0].logprobs.content
    assert len(entries) == 8
    for e in entries:
        assert e.logprob <= 0
        assert len(e.top_logprobs) == 2
        assert e.logprob == pytest.approx(max(t.logprob for t in e.top_logprobs), abs=1e-6)
        assert isinstance(e.bytes, list)


def test_completions_logprobs_and_echo(client):
    r = client.completions.create(model="tiny-qwen38", prompt="Hello there", max_tokens=6,
                                  temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) <= 4 and top[token] == value
    assert lp.text_offset == sorted(lp.text_offset)
    scored = client.completions.create(model="tiny-qwen38", prompt="Hello there", max_tokens=0,
                                       echo=True, logprobs=1)
    c = scored.choices[0]
    assert c.text == "Hello there"
    assert c.logprobs.token_logprobs[0] is None
    assert len(c.logprobs.tokens) == scored.usage.prompt_tokens
    assert c.finish_reason == "length"
    assert scored.usage.completion_tokens == 0


def test_reasoning_is_split_and_switchable(client, http):
    r = chat(client, max_tokens=48)
    message = r.choices[0].message
    reasoning = message.model_extra.get("reasoning_content") or ""
    assert reasoning
    for field in (reasoning, message.content or ""):
        assert "<think>" not in field and "</think>" not in field
    assert r.usage.completion_tokens_details.reasoning_tokens > 0
    off = chat(client, max_tokens=16, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert off.choices[0].message.model_extra.get("reasoning_content") is None
    ids = http.post("/tokenize", json={"messages": MESSAGES,
                                       "chat_template_kwargs": {"enable_thinking": False}}).json()
    rendered = http.post("/detokenize", json={"tokens": ids["tokens"]}).json()["prompt"]
    assert rendered.endswith("<think>\n\n</think>\n\n")


def test_length_while_reasoning(client):
    r = chat(client, max_tokens=4, logit_bias={"503": -100})  # never close </think>
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content == ""
    assert r.choices[0].message.model_extra.get("reasoning_content")


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
FORCE_CLOSE = {"505": 100}  # </tool_call>: the random model closes the forced call at once


def test_tool_call_round_trip(client):
    r = chat(client, tools=TOOLS, logit_bias=FORCE_CLOSE, parallel_tool_calls=False,
             tool_choice={"type": "function", "function": {"name": "get_weather"}})
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    call = choice.message.tool_calls[0]
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", call.id)
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {}
    assert r.usage.completion_tokens == 1
    # The client sends the call and its result back; the template renders both.
    follow = chat(client, tools=TOOLS, messages=MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'}])
    assert follow.usage.prompt_tokens > r.usage.prompt_tokens
    # Streaming: one complete tool-call delta, then the finish chunk.
    chunks, by_index = collect_chat_stream(chat(
        client, tools=TOOLS, logit_bias=FORCE_CLOSE, parallel_tool_calls=False, stream=True,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    calls = by_index[0]["tool_calls"]
    assert len(calls) == 1 and calls[0].index == 0 and calls[0].function.name == "get_weather"
    assert by_index[0]["finish"] == "tool_calls"
    finish_at = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].finish_reason)
    assert chunks[finish_at - 1].choices[0].delta.tool_calls


def test_tool_choice_naming_an_absent_function_is_refused(client):
    import openai
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})
    assert e.value.status_code == 400
