"""Speculative decoding in the server (`serve --draft`, tiny-dflash2 drafting for tiny-qwen38):
/props names the method, greedy output equals the server without a drafter, seeded sampling is
reproducible, streaming carries the same text, and /metrics' spec-decode families obey the
consistency rules of docs/openai-api.md §1.5 (and move with the requests)."""
import json
import os
import re
import subprocess

import httpx
import pytest

from conftest import BIN, MODEL_DIR, ROOT, Server, metric

DRAFT_DIR = os.environ.get("MD_E2E_DRAFT_DIR", str(ROOT / "build/fixtures/tiny-dflash2"))
PROMPT = "The quick brown fox jumps over the lazy dog. Then the dog"


@pytest.fixture(scope="module")
def spec_server():
    s = Server("--max-batch", "2", "--draft", DRAFT_DIR)
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="module")
def spec(spec_server):
    with httpx.Client(base_url=spec_server.url, timeout=120) as c:
        yield c


def complete(client, **fields):
    body = {"prompt": PROMPT, "max_tokens": 48, "temperature": 0, "ignore_eos": True, **fields}
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def spec_metrics(client):
    text = client.get("/metrics").text
    drafts = metric(text, "megadecode_spec_decode_num_drafts_total")
    per_pos = [metric(text, "megadecode_spec_decode_num_accepted_tokens_per_pos_total",
                      {"position": str(i)}) for i in range(7)]
    return {
        "drafts": drafts,
        "draft_tokens": metric(text, "megadecode_spec_decode_num_draft_tokens_total"),
        "accepted": metric(text, "megadecode_spec_decode_num_accepted_tokens_total"),
        "per_pos": per_pos,
        "mean": metric(text, "megadecode_spec_decode_mean_acceptance_length"),
        "hist_count": metric(text, "megadecode_spec_decode_acceptance_length_count"),
        "hist_sum": metric(text, "megadecode_spec_decode_acceptance_length_sum"),
        "generated": metric(text, "megadecode_generation_tokens_total"),
        "text": text,
    }


def test_props_name_the_method(spec):
    props = spec.get("/props").json()
    assert props["speculative"] == {"method": "dflash2", "num_draft_tokens": 7}


def test_greedy_output_equals_the_server_without_a_drafter(spec, http):
    for max_tokens in (1, 7, 48):
        got = complete(spec, max_tokens=max_tokens)
        expected = complete(http, max_tokens=max_tokens)
        assert got["choices"][0]["text"] == expected["choices"][0]["text"]
        # The same prompt again on the plain server resumes from its prefix cache (off with a
        # drafter): everything else in usage is the same.
        got_usage, expected_usage = dict(got["usage"]), dict(expected["usage"])
        assert got_usage.pop("prompt_tokens_details") == {"cached_tokens": 0}
        expected_usage.pop("prompt_tokens_details")
        assert got_usage == expected_usage
        assert got["choices"][0]["finish_reason"] == expected["choices"][0]["finish_reason"]
    assert got["system_fingerprint"] != expected["system_fingerprint"]


def test_seeded_sampling_is_reproducible(spec):
    fields = {"temperature": 0.9, "seed": 1234, "n": 2}
    first = complete(spec, **fields)
    second = complete(spec, **fields)
    texts = [c["text"] for c in first["choices"]]
    assert texts == [c["text"] for c in second["choices"]]
    assert texts[0] != texts[1]
    assert first["usage"]["completion_tokens"] == 2 * 48


def test_streaming_carries_the_same_text(spec):
    expected = complete(spec)["choices"][0]["text"]
    text = ""
    with spec.stream("POST", "/v1/completions",
                     json={"prompt": PROMPT, "max_tokens": 48, "temperature": 0,
                           "ignore_eos": True, "stream": True}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[len("data: "):])
                if chunk["choices"]:
                    text += chunk["choices"][0]["text"]
    assert text == expected


def test_metrics_follow_the_rounds_and_obey_the_consistency_rules(spec):
    before = spec_metrics(spec)
    usage = complete(spec, max_tokens=40)["usage"]
    after = spec_metrics(spec)
    assert after["generated"] - before["generated"] == usage["completion_tokens"]
    # 40 tokens: the first comes from the prefill, the rest from rounds of 1..8 tokens.
    rounds = after["drafts"] - before["drafts"]
    assert 39 / 8 <= rounds <= 39
    assert after["draft_tokens"] == 7 * after["drafts"]
    assert after["accepted"] == sum(after["per_pos"])
    assert all(a >= b for a, b in zip(after["per_pos"], after["per_pos"][1:]))
    assert after["mean"] == pytest.approx(1 + after["accepted"] / after["drafts"], rel=1e-9)
    assert after["hist_count"] == after["drafts"]
    assert after["hist_sum"] == after["drafts"] + after["accepted"]
    bounds = re.findall(r'^megadecode_spec_decode_acceptance_length_bucket{[^}]*le="([^"]+)"',
                        after["text"], re.M)
    assert bounds[-1] == "+Inf"
    assert [float(b) for b in bounds[:-1]] == [float(n) for n in range(1, 9)]


def test_force_accept_is_refused_by_serve():
    r = subprocess.run([BIN, "serve", "-m", MODEL_DIR, "--port", "0", "--draft", DRAFT_DIR,
                        "--force-accept", "3"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "--force-accept is for benchmarks" in r.stderr
