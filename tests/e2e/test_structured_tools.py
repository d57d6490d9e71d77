"""Structured output beyond response_format: tool calls constrained by their functions'
`parameters` (strict tools, §12.5), the Responses API's text.format through the official SDK, and
structured output under speculative decoding (drafts outside the grammar are rejected by the
masked acceptance rule, so greedy output equals the plain server's).

The fixture model has random weights: whatever it writes under a grammar is the grammar's doing.
"""
import json
import os
from pathlib import Path

import httpx
import jsonschema
import pytest

from conftest import MODEL_DIR, ROOT, Server, metric

SANITIZED = bool(os.environ.get("MD_E2E_SANITIZED"))
DRAFT_DIR = os.environ.get("MD_E2E_DRAFT_DIR", str(ROOT / "build/fixtures/tiny-dflash2"))
SEEDS = range(3) if SANITIZED else range(8)
NO_THINKING = {"enable_thinking": False}

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 12},
                          "days": {"type": "integer", "minimum": 1, "maximum": 7},
                          "unit": {"type": "string", "enum": ["c", "f"]},
                          "hourly": {"type": "boolean"}},
           "required": ["city", "days"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "strict": True,
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "strict": True,
                                           "parameters": {"type": "object", "properties": {
                                               "zone": {"type": "string",
                                                        "enum": ["UTC", "CET"]}},
                                               "required": ["zone"],
                                               "additionalProperties": False}}}]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 10},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "role": {"enum": ["admin", "user"]}},
          "required": ["name", "age", "role"], "additionalProperties": False}


def chat(http, **fields):
    body = {"messages": [{"role": "user", "content": "Call a tool."}], "temperature": 1,
            "max_tokens": 300, **fields}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def check_calls(choice, names):
    calls = choice["message"].get("tool_calls") or []
    assert calls, choice
    for call in calls:
        name = call["function"]["name"]
        assert name in names, call
        jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[name])
    return calls


def test_required_calls_follow_the_strict_schemas(http):
    finished = 0
    for seed in SEEDS:
        choice = chat(http, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                      seed=seed)
        if choice["finish_reason"] == "length":
            continue  # a random model may write a long string; what it wrote is checked below
        assert choice["finish_reason"] == "tool_calls", choice
        assert len(check_calls(choice, SCHEMAS)) == 1
        finished += 1
    assert finished >= len(SEEDS) - 1


def test_named_call_follows_its_schema(http):
    for seed in SEEDS:
        choice = chat(http, tools=TOOLS, seed=seed,
                      tool_choice={"type": "function", "function": {"name": "get_time"}})
        assert choice["finish_reason"] == "tool_calls", choice
        calls = check_calls(choice, {"get_time"})
        assert json.loads(calls[0]["function"]["arguments"])["zone"] in ("UTC", "CET")


def test_negative_control_without_strict_arguments_are_free(http):
    # The same request with strict off and no forced call: nothing constrains the random model,
    # which (almost) never writes a valid call.
    loose = [{**t, "function": {**t["function"], "strict": False}} for t in TOOLS]
    valid = 0
    for seed in SEEDS:
        choice = chat(http, tools=loose, tool_choice="auto", seed=seed,
                      chat_template_kwargs=NO_THINKING, max_tokens=60)
        valid += bool(choice["message"].get("tool_calls"))
    assert valid == 0


def test_strict_tool_with_unsupported_schema_is_400(http):
    tools = [{"type": "function", "function": {
        "name": "f", "strict": True,
        "parameters": {"type": "object", "properties": {"a": {"not": {}}}}}}]
    r = http.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "x"}], "tools": tools,
        "tool_choice": "required"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "tools[0].function.parameters", error
    assert "'not'" in error["message"], error


def test_responses_text_format_through_the_sdk(client):
    outputs = []
    for seed in SEEDS:
        response = client.responses.create(
            model="tiny-qwen38", input="A person, as JSON.", temperature=1,
            max_output_tokens=200,
            text={"format": {"type": "json_schema", "name": "person", "schema": PERSON,
                             "strict": True}},
            extra_body={"seed": seed, "chat_template_kwargs": NO_THINKING})
        if response.status == "incomplete":
            continue
        jsonschema.validate(json.loads(response.output_text), PERSON)
        outputs.append(response.output_text)
    assert len(outputs) >= len(SEEDS) - 1
    assert len(set(outputs)) > 1  # seeds differ: the grammar does not pin one answer


@pytest.fixture(scope="module")
def spec_http():
    s = Server("--max-batch", "2", "--draft", DRAFT_DIR)
    with httpx.Client(base_url=s.url, timeout=120) as c:
        yield c
    assert s.stop() == 0, s.output()


def test_speculative_decoding_keeps_the_grammar(spec_http, http):
    fields = {"messages": [{"role": "user", "content": "A person."}], "max_tokens": 200,
              "chat_template_kwargs": NO_THINKING,
              "response_format": {"type": "json_schema",
                                  "json_schema": {"name": "p", "schema": PERSON}}}
    before = metric(spec_http.get("/metrics").text, "megadecode_spec_decode_num_drafts_total")
    # Greedy: lossless, so the drafted run writes exactly what the plain server writes.
    spec = spec_http.post("/v1/chat/completions", json={**fields, "temperature": 0}).json()
    plain = http.post("/v1/chat/completions", json={**fields, "temperature": 0}).json()
    assert spec["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    jsonschema.validate(json.loads(spec["choices"][0]["message"]["content"]), PERSON)
    # Sampled: every answer still validates.
    for seed in SEEDS:
        r = spec_http.post("/v1/chat/completions",
                           json={**fields, "temperature": 1, "seed": seed}).json()
        choice = r["choices"][0]
        if choice["finish_reason"] == "length":
            continue
        jsonschema.validate(json.loads(choice["message"]["content"]), PERSON)
    after = metric(spec_http.get("/metrics").text, "megadecode_spec_decode_num_drafts_total")
    assert after > before  # the drafter did run on these requests
