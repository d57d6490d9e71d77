"""The Responses API (docs/openai-api.md §14) through the official `openai` client: plain and
streamed responses, the typed event sequence, reasoning items, function calls and their results,
previous_response_id, retrieval and deletion, and refusals. The fixture model is a tiny random
Qwen3.8-style model, so the checks compare the Responses API with the chat route on the same
conversation (same prompt tokens, same greedy text) rather than the text's sense."""
import json
import re

import pytest

from conftest import Server

MODEL = "tiny-qwen38"
NO_THINK_CLOSE = {"503": -100}   # never </think>: the answer stays in reasoning
FORCE_CLOSE = {"505": 100}       # </tool_call>: a forced call closes at once
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]
CHAT_TOOLS = [{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}]


def create(client, **kw):
    kw.setdefault("model", MODEL)
    kw.setdefault("temperature", 0)
    kw.setdefault("max_output_tokens", 24)
    return client.responses.create(**kw)


def chat(client, messages, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages, temperature=0, **kw)


def texts(response):
    reasoning = "".join(c.text for o in response.output if o.type == "reasoning"
                        for c in (o.content or []))
    return reasoning, response.output_text


def test_plain_response_equals_the_chat_answer(client):
    for prompt in ["Hello", "The capital of France is", "东京", "Emoji 🎉 test"]:
        r = create(client, input=prompt, instructions="Answer briefly.")
        assert re.fullmatch(r"resp_[A-Za-z0-9]{24}", r.id)
        assert r.object == "response" and r.model == MODEL
        assert r.status in ("completed", "incomplete")
        c = chat(client, [{"role": "system", "content": "Answer briefly."},
                          {"role": "user", "content": prompt}], max_tokens=24)
        message = c.choices[0].message
        assert r.usage.input_tokens == c.usage.prompt_tokens
        assert r.usage.output_tokens == c.usage.completion_tokens
        assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
        assert r.usage.output_tokens_details.reasoning_tokens == \
            c.usage.completion_tokens_details.reasoning_tokens
        reasoning, text = texts(r)
        assert reasoning == (message.model_extra.get("reasoning_content") or "")
        assert text == (message.content or "")
        assert (r.status == "incomplete") == (c.choices[0].finish_reason == "length")
        assert all(re.fullmatch(r"(rs|msg)_[A-Za-z0-9]{24}", o.id) for o in r.output)
        if r.status == "completed":
            assert r.output[-1].type == "message" and r.output[-1].status == "completed"
        else:  # the item the limit cut
            assert r.output[-1].status == "incomplete"
            assert all(o.status == "completed" for o in r.output[:-1])


def test_length_is_incomplete_with_the_reason(client):
    r = create(client, input="Hello", max_output_tokens=5, extra_body={"logit_bias": NO_THINK_CLOSE})
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 5
    assert r.max_output_tokens == 5
    assert r.output[0].type == "reasoning" and r.output[0].content[0].text
    # Cut while reasoning: the reasoning item is incomplete and no message follows.
    assert [(o.type, o.status) for o in r.output] == [("reasoning", "incomplete")]


def collect_events(stream):
    events = list(stream)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    return events


def test_stream_events_build_the_same_response(client):
    seen = set()
    for prompt in ["Hello there", "Hello", "The capital of France is"]:
        full = create(client, input=prompt, max_output_tokens=32)
        with client.responses.stream(model=MODEL, input=prompt, temperature=0,
                                     max_output_tokens=32) as stream:
            events = collect_events(stream)
            final = stream.get_final_response() if full.status == "completed" else None
        types = [e.type for e in events]
        assert types[:2] == ["response.created", "response.in_progress"]
        assert types[-1] == ("response.completed" if full.status == "completed"
                             else "response.incomplete")
        assert events[0].response.status == "in_progress" and events[0].response.output == []
        # Per item: added, its part, deltas, done events, in output order.
        deltas = {"reasoning": "", "message": ""}
        kind_at = {}
        for e in events:
            if e.type == "response.output_item.added":
                kind_at[e.output_index] = e.item.type
                assert e.item.status == "in_progress"
            elif e.type == "response.reasoning_text.delta":
                deltas["reasoning"] += e.delta
            elif e.type == "response.output_text.delta":
                deltas["message"] += e.delta
            elif e.type == "response.output_item.done":
                assert e.item.status == full.output[e.output_index].status
                assert kind_at[e.output_index] == e.item.type
        assert sorted(kind_at) == list(range(len(full.output)))
        assert [kind_at[i] for i in sorted(kind_at)] == [o.type for o in full.output]
        reasoning, text = texts(full)
        assert deltas == {"reasoning": reasoning, "message": text}
        last = events[-1].response
        assert last.id == events[0].response.id
        assert texts(last) == (reasoning, text)
        assert last.usage.output_tokens == full.usage.output_tokens
        if final is not None:
            assert final.output_text == text
        seen.add(full.status)
        seen.add("text" if text else "no text")
    # The prompts cover a completed response (get_final_response) and streamed answer text.
    assert {"completed", "incomplete", "text"} <= seen, seen


def test_function_call_round_trip(client):
    kw = dict(tools=TOOLS, tool_choice={"type": "function", "name": "get_weather"},
              parallel_tool_calls=False, extra_body={"logit_bias": FORCE_CLOSE})
    r = create(client, input="Weather in Paris?", **kw)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and r.status == "completed"
    call = calls[0]
    assert call.name == "get_weather" and json.loads(call.arguments) == {}
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", call.call_id)
    assert re.fullmatch(r"fc_[A-Za-z0-9]{24}", call.id)
    assert not any(o.type == "message" for o in r.output)
    # The result goes back as a function_call_output: by previous_response_id, or by resending
    # the items; both are the chat conversation with the call and a tool message.
    result = {"type": "function_call_output", "call_id": call.call_id, "output": '{"t": 21}'}
    by_id = create(client, input=[result], previous_response_id=r.id, tools=TOOLS)
    resent = create(client, tools=TOOLS, input=[
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name,
         "arguments": call.arguments}, result])
    c = chat(client, [{"role": "user", "content": "Weather in Paris?"},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": call.call_id, "type": "function",
                           "function": {"name": call.name, "arguments": call.arguments}}]},
                      {"role": "tool", "tool_call_id": call.call_id, "content": '{"t": 21}'}],
             tools=CHAT_TOOLS, max_tokens=24)
    assert by_id.usage.input_tokens == resent.usage.input_tokens == c.usage.prompt_tokens
    assert texts(by_id) == texts(resent)
    # Streamed: the call's item, its arguments, done.
    with client.responses.stream(model=MODEL, input="Weather in Paris?", temperature=0,
                                 max_output_tokens=24, **kw) as stream:
        events = collect_events(stream)
        final = stream.get_final_response()
    types = [e.type for e in events]
    at = types.index("response.function_call_arguments.delta")
    assert types[at - 1] == "response.output_item.added"
    assert types[at + 1:at + 3] == ["response.function_call_arguments.done",
                                    "response.output_item.done"]
    assert events[at + 1].arguments == call.arguments and events[at + 1].name == "get_weather"
    assert [o.type for o in final.output] == [o.type for o in r.output]


def test_previous_response_id_continues_the_conversation(client, http):
    def prompt_tokens(messages):
        return http.post("/tokenize", json={"messages": messages,
                                            "add_generation_prompt": True}).json()["count"]

    messages = []
    previous = None
    for turn in ["The capital of France is", "And then?", "Why?"]:
        r = create(client, input=turn, previous_response_id=previous, max_output_tokens=64)
        assert r.previous_response_id == previous
        messages.append({"role": "user", "content": turn})
        assert r.usage.input_tokens == prompt_tokens(messages)
        c = chat(client, messages, max_tokens=64)
        reasoning, text = texts(r)
        assert text == (c.choices[0].message.content or "")
        messages.append({"role": "assistant", "content": text, "reasoning_content": reasoning})
        previous = r.id
    assert any(m["content"] for m in messages if m["role"] == "assistant"), "an answer to carry"


def test_resending_the_output_items_equals_previous_response_id(client):
    """Clients that keep the history themselves send the previous output back as input items
    (as the SDK returns them, nulls included)."""
    first = create(client, input="The capital of France is", max_output_tokens=64)
    items = [{"role": "user", "content": "The capital of France is"}]
    items += [o.model_dump() for o in first.output]
    items.append({"role": "user", "content": "And then?"})
    resent = create(client, input=items, store=False)
    chained = create(client, input="And then?", previous_response_id=first.id)
    assert resent.usage.input_tokens == chained.usage.input_tokens
    assert texts(resent) == texts(chained)


def test_retrieve_and_delete(client, http):
    r = create(client, input="Hello", metadata={"k": "v"})
    got = client.responses.retrieve(r.id)
    assert got.model_dump() == r.model_dump()
    assert got.metadata == {"k": "v"}
    client.responses.delete(r.id)
    import openai
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    not_kept = create(client, input="Hello", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(not_kept.id)
    with pytest.raises(openai.BadRequestError) as e:
        create(client, input="x", previous_response_id=not_kept.id)
    assert e.value.body["param"] == "previous_response_id"
    bad = http.post(f"/v1/responses/{r.id}", json={})
    assert bad.status_code == 405 and bad.headers["Allow"] == "GET, DELETE"


@pytest.mark.parametrize("body,param", [
    ({"model": MODEL}, "input"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "s",
                                        "schema": {"oneOf": []}}}},
     "text.format.schema"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "background": True}, "background"),
])
def test_refusals_name_the_field(http, body, param):
    r = http.post("/v1/responses", json=body)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == param


def test_the_oldest_responses_are_forgotten_beyond_the_limit():
    import openai
    server = Server("--responses-kept", "2")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        ids = [create(client, input=f"Hello {i}", max_output_tokens=2).id for i in range(3)]
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(ids[0])
        assert [client.responses.retrieve(i).id for i in ids[1:]] == ids[1:]
    finally:
        assert server.stop() == 0, server.output()


def test_a_fault_mid_stream_is_an_error_event_then_failed():
    import httpx
    server = Server("--test-fault-after-tokens", "3")
    try:
        r = httpx.post(server.url + "/v1/responses", timeout=30, json={
            "model": MODEL, "input": "Hello", "stream": True, "max_output_tokens": 20,
            "logit_bias": NO_THINK_CLOSE})
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        blocks = [b for b in r.text.split("\n\n") if b and b != ": ping"]
        events = []
        for block in blocks:
            head, data = block.split("\n", 1)
            assert head.startswith("event: ") and data.startswith("data: ")
            payload = json.loads(data[len("data: "):])
            assert payload["type"] == head[len("event: "):]
            events.append(payload)
        assert "[DONE]" not in r.text
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
        assert events[-2]["code"] == "internal_error"
        failed = events[-1]["response"]
        assert failed["status"] == "failed" and failed["error"]["code"] == "internal_error"
        assert not any(e["type"] == "response.completed" for e in events)
        plain = httpx.post(server.url + "/v1/responses", timeout=30,
                           json={"model": MODEL, "input": "Hello", "max_output_tokens": 20,
                                 "logit_bias": NO_THINK_CLOSE})
        assert plain.status_code == 500
    finally:
        assert server.stop() == 0, server.output()
