"""The prefix cache end to end (issue 21, item 1), on the tiny Qwen3.8 fixture: a hybrid, whose
delta-rule states are kept at prefill-chunk boundaries (the chunked delta rule's bits depend on
where chunks fall, so a prompt resumes only where a cold prefill would also have cut it). A second
chat turn and requests sharing a system prompt resume from earlier requests' states; usage reports
exactly the tokens reused; every output is bitwise that of a server without the cache (greedy and
seeded); eviction holds the budget; /metrics reports hits and memory."""
import concurrent.futures as futures
import json

import httpx
import pytest

from conftest import Server, metric

CHUNK = 8  # serve's default --prefill-chunk; the states' grid on this hybrid
SYSTEM = ("You are the assistant of a small bakery. Answer in one or two sentences, mention the "
          "opening hours (eight to six) when asked about visits, and never invent prices that the "
          "menu does not list. The menu: bread, rolls, croissants, two cakes and coffee.")


def start(*args):
    return Server("--max-batch", "4", "--prefix-cache-interval", str(CHUNK), *args)


@pytest.fixture(scope="module")
def cold():
    s = start("--no-prefix-cache")
    yield s
    assert s.stop() == 0, s.output()


@pytest.fixture(scope="module")
def warm():
    s = start()
    yield s
    assert s.stop() == 0, s.output()


def chat(url, messages, seed=None, max_tokens=12, stream=False):
    """(content, reasoning, token logprobs, usage, prompt token ids) of one chat request."""
    body = {"messages": messages, "max_tokens": max_tokens, "logprobs": True,
            "return_token_ids": True, "stream": stream}
    body.update({"temperature": 1.0, "seed": seed} if seed is not None else {"temperature": 0})
    with httpx.Client(base_url=url, timeout=300) as c:
        if not stream:
            r = c.post("/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            out = r.json()
            message = out["choices"][0]["message"]
            logprobs = [t["logprob"] for t in out["choices"][0]["logprobs"]["content"]]
            return (message.get("content") or "", message.get("reasoning_content") or "",
                    logprobs, out["usage"], out["prompt_token_ids"])
        body["stream_options"] = {"include_usage": True}
        content, reasoning, logprobs, usage, ids = "", "", [], None, None
        with c.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                ids = event.get("prompt_token_ids", ids)
                for choice in event["choices"]:
                    content += choice["delta"].get("content") or ""
                    reasoning += choice["delta"].get("reasoning_content") or ""
                    for t in (choice.get("logprobs") or {}).get("content") or []:
                        logprobs.append(t["logprob"])
                usage = event.get("usage") or usage
        return content, reasoning, logprobs, usage, ids


def cached(usage):
    return usage["prompt_tokens_details"]["cached_tokens"]


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def grid(n):
    return n // CHUNK * CHUNK


def metrics(url):
    return httpx.get(url + "/metrics").text


def test_a_second_turn_resumes_from_the_first_exactly_as_far_as_the_model_allows(cold):
    server = start()  # its own: the expectation below counts on this conversation alone
    try:
        first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello!"}]
        content, reasoning, _, usage1, ids1 = chat(server.url, first)
        assert cached(usage1) == 0
        second = first + [{"role": "assistant", "content": content},
                          {"role": "user", "content": "When can I visit?"}]
        for seed in (None, 7):
            got = chat(server.url, second, seed=seed)
            want = chat(cold.url, second, seed=seed)
            assert got[:3] == want[:3], "a warm prompt's output differs from a cold one's"
            ids2 = got[4]
            if seed is None:
                # The first prompt left states at every chunk boundary; the second resumes from the
                # deepest one inside what the two prompts share, leaving one token at least to run.
                expected = grid(min(common_prefix(ids1, ids2), len(ids1), len(ids2) - 1))
                assert expected >= grid(len(ids1)) - CHUNK, "the turns should share the prompt"
            else:
                expected = grid(len(ids2) - 1)  # the same prompt again: its own states serve
            assert cached(got[3]) == expected
            assert cached(want[3]) == 0
    finally:
        assert server.stop() == 0, server.output()


def test_a_repeated_prompt_reports_its_reused_tokens_streaming_or_not(warm, cold):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Any bread?"}]
    ids = chat(warm.url, messages)[4]
    for stream in (False, True):
        got = chat(warm.url, messages, seed=3, stream=stream)
        assert got[:3] == chat(cold.url, messages, seed=3, stream=stream)[:3]
        assert cached(got[3]) == grid(len(ids) - 1), (len(ids), got[3])


def test_64_clients_sharing_a_system_prompt_resume_from_it(warm, cold):
    questions = [f"Question {i}: do you sell {w}?" for i, w in
                 enumerate(["rye bread", "baguettes", "muffins", "tea", "pies", "bagels", "juice",
                            "cookies"] * 8)]
    requests = [([{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}],
                 None if i % 2 else 500 + i) for i, q in enumerate(questions)]
    before = metric(metrics(warm.url), "megadecode_prompt_tokens_cached_total")
    first = chat(warm.url, requests[0][0], seed=requests[0][1])  # leaves the system prompt
    with futures.ThreadPoolExecutor(max_workers=64) as pool:
        together = list(pool.map(lambda r: chat(warm.url, *r), requests))
        alone = list(pool.map(lambda r: chat(cold.url, *r), requests))
    total = cached(first[3])
    for i, (got, want) in enumerate(zip(together, alone)):
        assert got[:3] == want[:3], f"request {i} differs from the cold server's"
        ids = got[4]
        reused = cached(got[3])
        total += reused
        assert reused % CHUNK == 0 and reused <= len(ids) - 1
        assert reused >= grid(min(common_prefix(first[4], ids), len(ids) - 1)), i
    text = metrics(warm.url)
    assert metric(text, "megadecode_prompt_tokens_cached_total") - before == total
    assert metric(text, "megadecode_prefix_cache_hits_total") >= 64
    assert 0 < metric(text, "megadecode_prefix_cache_hit_ratio") <= 1
    assert 0 < metric(text, "megadecode_prefix_cache_bytes") <= metric(
        text, "megadecode_prefix_cache_budget_bytes")
    assert metric(text, "megadecode_prefix_cache_states") > 0
    # With every row free, the KV pool holds only the cache's blocks (which it counts with the
    # recurrent states of its checkpoints).
    assert metric(text, "megadecode_num_requests_running") == 0
    assert 0 < metric(text, "megadecode_kv_pool_used_bytes") <= metric(
        text, "megadecode_prefix_cache_bytes")


def test_completions_count_each_prompts_reused_tokens_once(warm):
    prompts = [SYSTEM + " Q: bread?", SYSTEM + " Q: what about the two cakes, are they big?"]
    body = {"prompt": prompts, "n": 2, "max_tokens": 4, "temperature": 0.5, "seed": 1}
    lengths = [len(httpx.post(warm.url + "/tokenize", json={"prompt": p}).json()["tokens"])
               for p in prompts]
    httpx.post(warm.url + "/v1/completions", json=body, timeout=300).raise_for_status()
    usage = httpx.post(warm.url + "/v1/completions", json=body, timeout=300).json()["usage"]
    assert usage["prompt_tokens"] == sum(lengths)
    assert usage["prompt_tokens_details"]["cached_tokens"] == sum(grid(n - 1) for n in lengths)


def test_a_continued_response_reports_cached_input(warm):
    with httpx.Client(base_url=warm.url, timeout=300) as c:
        first = c.post("/v1/responses", json={"instructions": SYSTEM, "input": "Hi there",
                                              "max_output_tokens": 8, "temperature": 0}).json()
        second = c.post("/v1/responses", json={"instructions": SYSTEM, "input": "And cakes?",
                                               "previous_response_id": first["id"],
                                               "max_output_tokens": 8, "temperature": 0}).json()
    assert second["usage"]["input_tokens_details"]["cached_tokens"] >= grid(
        first["usage"]["input_tokens"]) - CHUNK


def complete(url, prompt, seed):
    body = {"prompt": prompt, "max_tokens": 6, "temperature": 1.0, "seed": seed, "logprobs": 0}
    out = httpx.post(url + "/v1/completions", json=body, timeout=300).json()
    return out["choices"][0]["text"], out["choices"][0]["logprobs"]["token_logprobs"]


def test_a_tiny_budget_evicts_and_keeps_the_bits(cold):
    server = start("--prefix-cache-memory", "1M")  # room for about nine states
    try:
        # Prompts that part at their first word: separate branches, each several states deep.
        words = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot"]
        for i, word in enumerate(words * 2):
            prompt = f"{word} is the word of this request, number {i % 6}, and it goes on a while."
            assert complete(server.url, prompt, i) == complete(cold.url, prompt, i)
        text = metrics(server.url)
        assert metric(text, "megadecode_prefix_cache_budget_bytes") == 1 << 20
        assert 0 < metric(text, "megadecode_prefix_cache_bytes") <= 1 << 20
        assert metric(text, "megadecode_prefix_cache_evictions_total") > 0
    finally:
        assert server.stop() == 0, server.output()


def test_without_the_cache_nothing_is_reused(cold):
    messages = [{"role": "user", "content": "Same prompt twice."}]
    chat(cold.url, messages)
    assert cached(chat(cold.url, messages)[3]) == 0
    text = metrics(cold.url)
    assert metric(text, "megadecode_prefix_cache_budget_bytes") == 0
    assert metric(text, "megadecode_prefix_cache_lookups_total") == 0
