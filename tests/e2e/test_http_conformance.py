"""Raw-HTTP conformance of `megadecode serve` against docs/openai-api.md (§13 and every validation
rule and status code that does not depend on a real model writing sensible text).

The fixture model is a tiny random Qwen3.8-style model (vocab 512, context 4096). Where a test
needs a particular output it forces it: `logit_bias` on an end token (511 = <|im_end|>, 510 =
<|endoftext|>) to end at once, or on plain tokens ("he", "re", "\\n") to get known text, with
greedy decoding and a frequency penalty to make two biased tokens alternate.

Servers with other flags are module-scoped and shared where the flags are the same; tests that
need an idle server wait for it instead of sleeping.
"""
import json
import re
import signal
import socket
import sys
import threading
import time
import unicodedata
from pathlib import Path

import httpx
import pytest

from conftest import MODEL_DIR, Server, metric

# §3.4 writes "text/event-stream; charset=utf-8"; the server sends the bare type because the
# Debian cpp-httplib gzips (and so holds back) every other text/* response when the client accepts
# gzip (see generation_route.cpp). SSE is UTF-8 by definition.
SSE_CONTENT_TYPE = "text/event-stream"

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from byte_level import bytes_to_unicode  # noqa: E402  (GPT-2's byte alphabet, shared with tools)

MODEL = "tiny-qwen38"
VOCAB = 512
CONTEXT = 4096
ENDOFTEXT = 510  # <|endoftext|>: an end token (generation_config eos_token_id)
IM_END = 511  # <|im_end|>: the other end token
CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MESSAGES = [{"role": "user", "content": "Say hello."}]
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                 "parameters": {"type": "object", "properties": {
                                                     "city": {"type": "string"}}}}}
LONG = 3000  # max_tokens of a stream that must outlive the test's checks (about 2-4 s alone)
API_KEY = "sk-test-abc123"
DEFAULT_BODY_LIMIT = 16 * 1024 * 1024

ID_RE = re.compile(r"^chatcmpl-[A-Za-z0-9]{24}$")
CMPL_ID_RE = re.compile(r"^cmpl-[A-Za-z0-9]{24}$")
FP_RE = re.compile(r"^fp_[0-9a-f]{10}$")

# ---------------------------------------------------------------------------------------------
# Reference tokenizer and token ids
# ---------------------------------------------------------------------------------------------

_TOKENIZER_JSON = json.loads((Path(MODEL_DIR) / "tokenizer.json").read_text())
_VOCAB = _TOKENIZER_JSON["model"]["vocab"]
HE = _VOCAB["he"]
RE = _VOCAB["re"]
NEWLINE = _VOCAB["\u010a"]  # byte-level BPE spells "\n" as "Ċ"


_BYTE_DECODER = {c: b for b, c in bytes_to_unicode().items()}


def token_bytes(token_id):
    """The exact bytes of one token of the fixture's byte-level BPE vocabulary."""
    for added in _TOKENIZER_JSON["added_tokens"]:
        if added["id"] == token_id:
            return added["content"].encode()
    text = next(t for t, i in _VOCAB.items() if i == token_id)
    return bytes(_BYTE_DECODER[c] for c in text)


def token_string(token_id):
    """§6.3: the text when the bytes are valid UTF-8, else bytes:\\xHH..."""
    raw = token_bytes(token_id)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


@pytest.fixture(scope="module")
def ref_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(Path(MODEL_DIR) / "tokenizer.json"))


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

DROP = object()  # in an overrides dict: remove the key from the base body


def chat_body(**overrides):
    body = {"messages": MESSAGES, "max_tokens": 2, "temperature": 0}
    return _apply(body, overrides)


def comp_body(**overrides):
    body = {"prompt": "Hello", "max_tokens": 2, "temperature": 0}
    return _apply(body, overrides)


def _apply(body, overrides):
    body = dict(body)
    for key, value in overrides.items():
        if value is DROP:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def error_body(code, message, param=None, type_="invalid_request_error"):
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def assert_json_content_type(r):
    assert r.headers["content-type"].split(";")[0].strip() == "application/json", r.headers


def assert_error(r, status, code, message=None, param=..., type_="invalid_request_error"):
    """The exact error envelope of §9; message and param are checked when given."""
    assert r.status_code == status, r.text
    assert_json_content_type(r)
    body = r.json()
    assert list(body) == ["error"], body
    error = body["error"]
    assert list(error) == ["message", "type", "param", "code"], error
    assert error["type"] == type_, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"], error
    if message is not None:
        assert error["message"] == message, error
    if param is not ...:
        assert error["param"] == param, error
    return error


def wait_until(predicate, timeout=5.0, interval=0.02, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def metrics_text(url):
    r = httpx.get(url + "/metrics", timeout=10)
    assert r.status_code == 200
    return r.text


def gauge(url, name):
    return metric(metrics_text(url), name)


def wait_idle(url, timeout=30):
    """Waits until no row runs and nothing waits (a previous test's streams were cancelled)."""
    def idle():
        text = metrics_text(url)
        return metric(text, "megadecode_num_requests_running") == 0 and \
            metric(text, "megadecode_num_requests_waiting") == 0
    wait_until(idle, timeout, 0.05, "an idle server")


def parse_sse(raw):
    """The payloads of a complete SSE body; checks the framing of §3.4 on the way."""
    text = raw.decode("utf-8")  # every byte of the stream is UTF-8
    assert text.endswith("data: [DONE]\n\n"), text[-200:]
    blocks = text.split("\n\n")
    assert blocks[-1] == ""
    payloads = []
    for block in blocks[:-1]:
        if block == ": ping":
            continue
        assert block.startswith("data: "), block
        assert "\n" not in block, block  # no event:/id: lines, one data line per event
        payloads.append(block[len("data: "):])
    assert payloads[-1] == "[DONE]"
    assert "[DONE]" not in payloads[:-1]
    return [json.loads(p) for p in payloads[:-1]]


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


class SSEStream:
    """A streaming POST read event by event, so a test can act while it runs."""

    def __init__(self, url, path, body, headers=None, timeout=30):
        # identity: the bytes on the wire are the events (see test_stream_not_held_with_gzip).
        headers = {"Accept-Encoding": "identity", **(headers or {})}
        self.client = httpx.Client(base_url=url, timeout=timeout)
        self.response = self.client.send(self.client.build_request("POST", path, json=body,
                                                                   headers=headers), stream=True)
        self._chunks = self.response.iter_raw()
        self._buffer = b""
        self.done = False
        self.events = []  # parsed JSON payloads so far

    def next_payload(self):
        """The next event's payload string ('[DONE]' at the end), or None when the body ended."""
        while True:
            if b"\n\n" in self._buffer:
                block, self._buffer = self._buffer.split(b"\n\n", 1)
                text = block.decode("utf-8")
                if text == ": ping":
                    continue
                assert text.startswith("data: "), text
                payload = text[len("data: "):]
                if payload == "[DONE]":
                    self.done = True
                else:
                    self.events.append(json.loads(payload))
                return payload
            try:
                self._buffer += next(self._chunks)
            except StopIteration:
                return None

    def next_event(self):
        payload = self.next_payload()
        assert payload is not None and payload != "[DONE]", payload
        return self.events[-1]

    def read_until(self, predicate):
        while True:
            event = self.next_event()
            if predicate(event):
                return event

    def read_to_end(self):
        while self.next_payload() is not None:
            pass
        return self.events

    def close(self):
        self.response.close()
        self.client.close()


def has_text(event):
    """A chat or completions chunk that carries generated text."""
    for choice in event.get("choices", []):
        delta = choice.get("delta", {})
        if delta.get("content") or delta.get("reasoning_content") or choice.get("text"):
            return True
    return False


def long_chat_body(**overrides):
    """A chat stream that runs LONG forced tokens ("hehe..."), for tests that act while it runs."""
    fields = {"max_tokens": LONG, "ignore_eos": True, "stream": True,
              "logit_bias": {str(HE): 100}, **overrides}
    return chat_body(**fields)


def long_comp_body(**overrides):
    fields = {"prompt": "x", "max_tokens": LONG, "ignore_eos": True, "stream": True,
              "logit_bias": {str(HE): 100}, **overrides}
    return comp_body(**fields)


class RawResponse:
    def __init__(self, status, reason, version, headers, body, closed):
        self.status, self.reason, self.version = status, reason, version
        self.headers, self.body, self.closed = headers, body, closed

    def json(self):
        return json.loads(self.body)


def _recv_exact(sock, buffer, n):
    while len(buffer) < n:
        data = sock.recv(65536)
        if not data:
            raise EOFError("connection closed mid-response")
        buffer += data
    return buffer


def read_raw_response(sock, buffer=b""):
    """Reads one HTTP response from a socket; returns (RawResponse, leftover bytes)."""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            raise EOFError(f"connection closed before the response headers: {buffer!r}")
        buffer += data
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    version, status, reason = (lines[0].split(" ", 2) + [""])[:3]
    headers = {}
    for line in lines[1:]:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            while b"\r\n" not in buffer:
                buffer = _recv_exact(sock, buffer, len(buffer) + 1)
            size_line, buffer = buffer.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            buffer = _recv_exact(sock, buffer, size + 2)
            body += buffer[:size]
            buffer = buffer[size + 2:]
            if size == 0:
                break
    elif "content-length" in headers:
        n = int(headers["content-length"])
        buffer = _recv_exact(sock, buffer, n)
        body, buffer = buffer[:n], buffer[n:]
    return RawResponse(int(status), reason, version, headers, body, None), buffer


def connection_closed(sock, wait=2.0):
    """True when the server closed the connection (EOF) within `wait` seconds."""
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def raw_exchange(port, data, timeout=10):
    """Sends raw bytes on a fresh connection and reads one response."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        response, _ = read_raw_response(sock)
        return response


def post_bytes(path, body_bytes, extra_headers=""):
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body_bytes)}\r\n{extra_headers}\r\n").encode() + body_bytes


@pytest.fixture(scope="module")
def props(http):
    r = http.get("/props")
    assert r.status_code == 200
    return r.json()


# ---------------------------------------------------------------------------------------------
# §13.1 Loading: /health and generation routes answer 503 model_loading until ready
# ---------------------------------------------------------------------------------------------

LOADING = error_body("model_loading", "The model is still loading.", type_="unavailable_error")


@pytest.fixture(scope="module")
def loading_capture():
    """Starts a server whose weight load is delayed 3 s, records responses while it loads, then
    waits for readiness and records /health again."""
    server = Server("--test-load-delay-ms", "3000", wait_ready=False)
    seen = {}
    try:
        with httpx.Client(base_url=server.url, timeout=10) as c:
            seen["health"] = c.get("/health")
            seen["v1_health"] = c.get("/v1/health")
            seen["chat"] = c.post(CHAT, json=chat_body())
            seen["completions"] = c.post(COMP, json=comp_body())
            seen["chat_stream"] = c.post(CHAT, json=chat_body(stream=True))
            seen["tokenize"] = c.post("/tokenize", json={"prompt": "Hello"})
            seen["models"] = c.get("/v1/models")
            seen["metrics"] = c.get("/metrics")
            seen["bad_json"] = c.post(CHAT, content=b"{")
            seen["not_object"] = c.post(CHAT, content=b"[]")
            seen["bad_field"] = c.post(CHAT, json=chat_body(temperature=5))
            seen["loaded_at_end"] = c.get("/health").status_code == 200
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                r = c.get("/health")
                if r.status_code == 200:
                    break
                time.sleep(0.05)
            seen["health_after"] = r
            seen["chat_after"] = c.post(CHAT, json=chat_body())
        yield seen
    finally:
        server.stop()


def test_loading_health_is_503_model_loading(loading_capture):
    assert not loading_capture["loaded_at_end"], "the 3 s load delay ended before the checks"
    r = loading_capture["health"]
    assert r.status_code == 503
    assert_json_content_type(r)
    assert r.json() == LOADING
    assert r.headers["retry-after"] == "5"


def test_loading_health_alias_is_503(loading_capture):
    r = loading_capture["v1_health"]
    assert r.status_code == 503 and r.json() == LOADING


def test_loading_chat_is_same_503(loading_capture):
    r = loading_capture["chat"]
    assert r.status_code == 503 and r.json() == LOADING
    assert r.headers["retry-after"] == "5"


def test_loading_completions_is_same_503(loading_capture):
    r = loading_capture["completions"]
    assert r.status_code == 503 and r.json() == LOADING


def test_loading_streaming_chat_is_json_503(loading_capture):
    r = loading_capture["chat_stream"]
    assert r.status_code == 503 and r.json() == LOADING
    assert_json_content_type(r)


def test_loading_tokenize_is_503_before_tokenizer(loading_capture):
    r = loading_capture["tokenize"]
    assert r.status_code == 503 and r.json() == LOADING


def test_loading_models_answers_200(loading_capture):
    r = loading_capture["models"]
    assert r.status_code == 200
    assert r.json()["object"] == "list"
    assert [m["id"] for m in r.json()["data"]] == [MODEL]


def test_loading_ready_metric_is_0(loading_capture):
    r = loading_capture["metrics"]
    assert r.status_code == 200
    assert metric(r.text, "megadecode_ready") == 0


def test_loading_json_errors_come_before_readiness(loading_capture):
    # §2.1: parse (4) and top-level object (5) come before readiness (6).
    assert_error(loading_capture["bad_json"], 400, "invalid_json", "Request body is not valid JSON.",
                 None)
    assert_error(loading_capture["not_object"], 400, "invalid_type",
                 "Request body must be a JSON object.", None)


def test_loading_readiness_comes_before_field_checks(loading_capture):
    r = loading_capture["bad_field"]
    assert r.status_code == 503 and r.json() == LOADING


def test_after_load_health_is_200_ok(loading_capture):
    r = loading_capture["health_after"]
    assert r.status_code == 200
    assert_json_content_type(r)
    assert r.json()["status"] == "ok"
    assert loading_capture["chat_after"].status_code == 200


# ---------------------------------------------------------------------------------------------
# §1.1 /health, §1.2 /v1/models (§13.3), path aliases (§13.5)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/health", "/v1/health", "/ping"])
def test_health_ok_and_aliases(http, path):
    r = http.get(path)
    assert r.status_code == 200
    assert_json_content_type(r)
    assert r.json()["status"] == "ok"


@pytest.mark.parametrize("path", ["/v1/models", "/models"])
def test_models_list(http, path):
    r = http.get(path)
    assert r.status_code == 200
    assert_json_content_type(r)
    body = r.json()
    assert list(body) == ["object", "data"]
    assert body["object"] == "list"
    assert len(body["data"]) == 1
    model = body["data"][0]
    assert set(model) == {"id", "object", "created", "owned_by", "max_model_len"}
    assert model["id"] == MODEL  # the checkpoint directory's name, lower-cased
    assert model["object"] == "model"
    assert model["owned_by"] == "megadecode"
    assert model["max_model_len"] == CONTEXT
    assert isinstance(model["created"], int) and model["created"] <= time.time() + 1


@pytest.mark.parametrize("path", [f"/v1/models/{MODEL}", f"/models/{MODEL}"])
def test_model_by_id(http, path):
    r = http.get(path)
    assert r.status_code == 200
    model = r.json()
    assert model["id"] == MODEL and model["object"] == "model"
    assert model["max_model_len"] == CONTEXT


def test_model_by_unknown_id_is_404(http):
    r = http.get("/v1/models/gpt-4")
    assert_error(r, 404, "model_not_found", "The model 'gpt-4' does not exist.", "model")


def test_chat_alias_without_v1_same_result(http):
    body = chat_body(max_tokens=6, ignore_eos=True)
    a = http.post(CHAT, json=body)
    b = http.post("/chat/completions", json=body)
    assert a.status_code == b.status_code == 200
    a, b = a.json(), b.json()
    assert a["object"] == b["object"] == "chat.completion"
    assert a["choices"] == b["choices"]
    # The second resumes from the first's prompt in the prefix cache: only cached_tokens differs.
    cached = [u["usage"].pop("prompt_tokens_details")["cached_tokens"] for u in (a, b)]
    assert cached[1] >= cached[0]
    assert a["usage"] == b["usage"]
    assert a["model"] == b["model"] == MODEL


def test_completions_alias_without_v1_same_result(http):
    body = comp_body(max_tokens=6, ignore_eos=True)
    a = http.post(COMP, json=body).json()
    b = http.post("/completions", json=body).json()
    assert a["object"] == b["object"] == "text_completion"
    assert a["choices"] == b["choices"] and a["usage"] == b["usage"]


def test_chat_alias_validation_error_is_the_same(http):
    a = http.post(CHAT, json=chat_body(temperature=3))
    b = http.post("/chat/completions", json=chat_body(temperature=3))
    assert a.status_code == b.status_code == 400
    assert a.json() == b.json()


# ---------------------------------------------------------------------------------------------
# §13.4 404, 405 + Allow, OPTIONS
# ---------------------------------------------------------------------------------------------


def test_unknown_path_is_404(http):
    r = http.get("/v1/nope")
    assert_error(r, 404, "unknown_url", "Invalid URL (GET /v1/nope)", None)


def test_unknown_path_post_is_404(http):
    r = http.post("/v1/nope", json={})
    assert_error(r, 404, "unknown_url", "Invalid URL (POST /v1/nope)", None)


def test_get_chat_is_405_with_allow_post(http):
    r = http.get(CHAT)
    assert_error(r, 405, "method_not_allowed",
                 "Method GET is not allowed for /v1/chat/completions.", None)
    assert r.headers["allow"] == "POST"


@pytest.mark.parametrize("method,path,allow", [
    ("POST", "/health", "GET"),
    ("POST", "/v1/models", "GET"),
    ("DELETE", "/v1/models", "GET"),
    ("PUT", "/v1/completions", "POST"),
    ("GET", "/tokenize", "POST"),
    ("GET", "/detokenize", "POST"),
    ("POST", "/metrics", "GET"),
])
def test_wrong_method_is_405_with_allow(base_url, method, path, allow):
    r = httpx.request(method, base_url + path, content=b"{}" if method in ("POST", "PUT") else None)
    assert_error(r, 405, "method_not_allowed", f"Method {method} is not allowed for {path}.", None)
    assert r.headers["allow"] == allow


@pytest.mark.parametrize("path,method", [(CHAT, "POST"), ("/v1/models", "GET"), ("/health", "GET"),
                                         ("/tokenize", "POST")])
def test_options_is_204_with_allow(http, path, method):
    r = http.request("OPTIONS", path)
    assert r.status_code == 204
    allowed = {m.strip() for m in r.headers["allow"].split(",")}
    assert method in allowed
    assert not any(h.lower().startswith("access-control-") for h in r.headers)


def test_options_unknown_path_is_404(http):
    r = http.request("OPTIONS", "/v1/nope")
    assert_error(r, 404, "unknown_url", "Invalid URL (OPTIONS /v1/nope)", None)


CORS_ORIGIN = "https://app.example.test"


@pytest.fixture(scope="module")
def cors_server():
    s = Server("--cors-origin", CORS_ORIGIN)
    yield s
    assert s.stop() == 0


def test_options_with_cors_origin_has_cors_headers(cors_server):
    r = httpx.request("OPTIONS", cors_server.url + CHAT,
                      headers={"Origin": CORS_ORIGIN, "Access-Control-Request-Method": "POST"})
    assert r.status_code == 204
    assert "POST" in {m.strip() for m in r.headers["allow"].split(",")}
    assert r.headers["access-control-allow-origin"] == CORS_ORIGIN


def test_cors_origin_on_ordinary_response(cors_server):
    r = httpx.get(cors_server.url + "/v1/models", headers={"Origin": CORS_ORIGIN})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == CORS_ORIGIN


# ---------------------------------------------------------------------------------------------
# X-Request-Id, Content-Type, /version, /props, /slots
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method,path,body", [
    ("GET", "/health", None), ("GET", "/v1/nope", None), ("POST", CHAT, chat_body()),
    ("POST", CHAT, {"messages": []}), ("GET", CHAT, None), ("POST", "/tokenize", {"prompt": "a"}),
])
def test_request_id_is_echoed(http, method, path, body):
    r = http.request(method, path, json=body, headers={"X-Request-Id": "trace-42-abc"})
    assert r.headers["x-request-id"] == "trace-42-abc"


def test_request_id_is_echoed_on_stream(http):
    r = http.post(CHAT, json=chat_body(stream=True), headers={"X-Request-Id": "stream-7"})
    assert r.status_code == 200
    assert r.headers["x-request-id"] == "stream-7"


def test_request_id_on_413(server):
    body = b"{" + b" " * DEFAULT_BODY_LIMIT + b"}"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        try:
            sock.sendall(post_bytes(CHAT, body, "X-Request-Id: big-1\r\n"))
        except (BrokenPipeError, ConnectionResetError):
            pass
        response, _ = read_raw_response(sock)
    assert response.status == 413
    assert response.headers.get("x-request-id") == "big-1"


def test_request_id_on_unreadable_request(server):
    response = raw_exchange(server.port, b"GARBAGE\r\n\r\n")
    assert 400 <= response.status < 500
    assert response.headers.get("x-request-id")


def test_request_id_is_generated_when_absent(http):
    ids = [http.get("/health").headers.get("x-request-id") for _ in range(2)]
    ids.append(http.post(CHAT, json={"messages": []}).headers.get("x-request-id"))
    assert all(ids), ids
    assert len(set(ids)) == 3


def test_content_type_is_ignored_text_plain(http):
    r = http.post(CHAT, content=json.dumps(chat_body()).encode(),
                  headers={"Content-Type": "text/plain"})
    assert r.status_code == 200, r.text
    assert r.json()["object"] == "chat.completion"


def test_content_type_is_ignored_form_urlencoded_large_body(http):
    # §0: the body is JSON whatever Content-Type says, also past 8 KiB (curl's default type).
    body = chat_body(user="u" * 12000)  # `user` is accepted and ignored
    r = http.post(CHAT, content=json.dumps(body).encode(),
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200, r.text
    assert r.json()["object"] == "chat.completion"


def test_version(http):
    r = http.get("/version")
    assert r.status_code == 200
    assert_json_content_type(r)
    body = r.json()
    assert list(body) == ["version"]
    assert re.fullmatch(r"megadecode \d+\.\d+\.\d+\S* \([0-9a-f]{7,40}\)", body["version"]), body


def test_props(http):
    r = http.get("/props")
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"model", "max_model_len", "max_prompt_tokens", "total_slots",
                         "vocab_size", "chat_template", "speculative",
                         "default_generation_settings", "build_info"}
    assert body["model"] == MODEL
    assert body["max_model_len"] == CONTEXT
    assert 0 < body["max_prompt_tokens"] <= CONTEXT - 1
    assert body["total_slots"] == 4
    assert body["vocab_size"] == VOCAB
    config = json.loads((Path(MODEL_DIR) / "tokenizer_config.json").read_text())
    assert body["chat_template"] == config["chat_template"]
    assert body["speculative"] is None
    assert set(body["default_generation_settings"]) == {"temperature", "top_p", "top_k", "min_p",
                                                        "max_tokens"}
    assert body["default_generation_settings"]["max_tokens"] is None
    version = http.get("/version").json()["version"]
    assert "megadecode " + body["build_info"] == version


def test_slots_idle(http, base_url):
    wait_idle(base_url)
    r = http.get("/slots")
    assert r.status_code == 200
    slots = r.json()
    assert [s["id"] for s in slots] == [0, 1, 2, 3]
    assert all(s["is_processing"] is False for s in slots)


def test_slots_fail_on_no_slot_when_idle_is_200(http, base_url):
    wait_idle(base_url)
    r = http.get("/slots", params={"fail_on_no_slot": "1"})
    assert r.status_code == 200


# ---------------------------------------------------------------------------------------------
# Transport (§0): HTTP/1.0, keep-alive, 411, chunked request bodies, 413 (§13.6)
# ---------------------------------------------------------------------------------------------


def test_http10_gets_connection_close(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        response, _ = read_raw_response(sock)
        assert response.status == 200
        assert response.headers.get("connection", "").lower() == "close"
        assert connection_closed(sock)


def test_http10_post_chat_works_and_closes(server):
    body = json.dumps(chat_body()).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(f"POST {CHAT} HTTP/1.0\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        response, _ = read_raw_response(sock)
        assert response.status == 200
        assert response.json()["object"] == "chat.completion"
        assert response.headers.get("connection", "").lower() == "close"
        assert connection_closed(sock)


def test_http11_connection_is_persistent(server):
    body = json.dumps(chat_body()).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first, rest = read_raw_response(sock)
        assert first.status == 200
        assert first.headers.get("connection", "").lower() != "close"
        sock.sendall(post_bytes(CHAT, body))
        second, rest = read_raw_response(sock, rest)
        assert second.status == 200
        assert second.json()["object"] == "chat.completion"
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        third, _ = read_raw_response(sock, rest)
        assert third.status == 200


def test_rejected_request_with_body_keeps_connection_usable(server):
    # A 405 for a PUT that carries a body: the next request on the persistent connection must be
    # read as a request (the body is consumed, or the connection is closed with Connection: close).
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"PUT /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Length: 2\r\n\r\n")
        time.sleep(0.05)  # the body in its own segment, as httpx and most clients send it
        sock.sendall(b"{}")
        first, rest = read_raw_response(sock)
        assert first.status == 405
        if first.headers.get("connection", "").lower() == "close":
            assert connection_closed(sock)
            return
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        second, _ = read_raw_response(sock, rest)
        assert second.status == 200, second.body


def test_stream_not_held_with_gzip_accept_encoding(base_url):
    # §3.4: events are flushed as they are produced and never held until the end, also for
    # clients that send Accept-Encoding: gzip (httpx and the openai client do by default).
    with httpx.Client(base_url=base_url, timeout=30) as c:
        request = c.build_request("POST", COMP, json=long_comp_body(),
                                  headers={"Accept-Encoding": "gzip, deflate"})
        t0 = time.monotonic()
        r = c.send(request, stream=True)
        try:
            buffer = b""
            for chunk in r.iter_bytes():
                buffer += chunk
                if b'"text":"he' in buffer:
                    break
            first_text = time.monotonic() - t0
        finally:
            r.close()
    wait_idle(base_url, 5)
    assert first_text < 1.0, f"first text event after {first_text:.2f} s"


def test_post_without_length_is_411(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/json\r\n\r\n".encode())
        response, _ = read_raw_response(sock)
    assert response.status == 411
    assert response.headers["content-type"].split(";")[0] == "application/json"
    assert response.json() == error_body(
        "length_required", "Content-Length or chunked transfer encoding is required.")


def test_chunked_request_body_is_accepted(server):
    body = json.dumps(chat_body()).encode()
    parts = [body[:10], body[10:25], body[25:]]
    data = (f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            "Content-Type: application/json\r\n\r\n").encode()
    for part in parts:
        data += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    data += b"0\r\n\r\n"
    response = raw_exchange(server.port, data, timeout=30)
    assert response.status == 200, response.body
    assert response.json()["object"] == "chat.completion"


def test_chunked_invalid_json_is_400(server):
    data = (f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3\r\n{\"m\r\n0\r\n\r\n").encode()
    response = raw_exchange(server.port, data)
    assert response.status == 400
    assert response.json() == error_body("invalid_json", "Request body is not valid JSON.")


def test_content_length_over_default_limit_is_413_before_reading(server, http):
    # §9: the limit is checked against Content-Length before reading; then the connection closes.
    with socket.create_connection(("127.0.0.1", server.port), timeout=3) as sock:
        sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {DEFAULT_BODY_LIMIT + 1}\r\n\r\n{{".encode())
        try:
            response, _ = read_raw_response(sock)
        except socket.timeout:
            pytest.fail("no 413 within 3 s: the server waits for the announced body")
        assert response.status == 413
        assert response.json() == error_body(
            "request_too_large",
            f"Request body is larger than the limit of {DEFAULT_BODY_LIMIT} bytes.")
        assert connection_closed(sock)
    assert http.get("/health").status_code == 200


def test_full_body_over_default_limit_is_413_and_server_keeps_serving(server, http):
    body = json.dumps(chat_body()).encode()
    body += b" " * (DEFAULT_BODY_LIMIT + 1 - len(body))
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        try:
            sock.sendall(post_bytes(CHAT, body))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading it all
        response, _ = read_raw_response(sock)
    assert response.status == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert http.get("/health").status_code == 200
    assert http.post(CHAT, json=chat_body()).status_code == 200


def test_chunked_body_over_default_limit_is_413(server, http):
    # §9: the limit is also enforced while reading chunked bodies.
    body = json.dumps(chat_body()).encode()
    body += b" " * (DEFAULT_BODY_LIMIT + 1 - len(body))
    head = (f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            "Content-Type: application/json\r\n\r\n").encode()
    step = 1 << 20
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        try:
            sock.sendall(head)
            for i in range(0, len(body), step):
                part = body[i:i + step]
                sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        response, _ = read_raw_response(sock)
    assert response.status == 413, response.body[:300]
    assert response.json() == error_body(
        "request_too_large", f"Request body is larger than the limit of {DEFAULT_BODY_LIMIT} bytes.")
    assert http.get("/health").status_code == 200


SMALL_LIMIT = 1024


@pytest.fixture(scope="module")
def small_body_server():
    s = Server("--max-body-bytes", str(SMALL_LIMIT))
    yield s
    assert s.stop() == 0


def _padded_chat(size):
    body = json.dumps(chat_body()).encode()
    assert len(body) < size
    return body[:-1] + b" " * (size - len(body)) + b"}"


def test_body_one_byte_over_max_body_bytes_is_413(small_body_server):
    response = raw_exchange(small_body_server.port,
                            post_bytes(CHAT, _padded_chat(SMALL_LIMIT + 1)))
    assert response.status == 413
    assert response.json() == error_body(
        "request_too_large", f"Request body is larger than the limit of {SMALL_LIMIT} bytes.")


def test_body_at_max_body_bytes_is_accepted(small_body_server):
    response = raw_exchange(small_body_server.port, post_bytes(CHAT, _padded_chat(SMALL_LIMIT)),
                            timeout=30)
    assert response.status == 200, response.body


def test_server_keeps_serving_new_connections_after_413(small_body_server):
    for _ in range(3):
        assert raw_exchange(small_body_server.port,
                            post_bytes(CHAT, _padded_chat(SMALL_LIMIT + 1))).status == 413
    r = httpx.post(small_body_server.url + CHAT, json=chat_body(), timeout=30)
    assert r.status_code == 200
    assert httpx.get(small_body_server.url + "/health").status_code == 200


# ---------------------------------------------------------------------------------------------
# Authentication (--api-key)
# ---------------------------------------------------------------------------------------------

UNAUTHORIZED = error_body("invalid_api_key", "Invalid or missing API key.",
                          type_="authentication_error")


@pytest.fixture(scope="module")
def key_server():
    s = Server("--api-key", API_KEY)
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def key_http(key_server):
    with httpx.Client(base_url=key_server.url, timeout=30) as c:
        yield c


AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.mark.parametrize("method,path,body", [
    ("POST", CHAT, chat_body()), ("POST", "/chat/completions", chat_body()),
    ("POST", COMP, comp_body()), ("GET", "/v1/models", None), ("GET", "/models", None),
    ("GET", f"/v1/models/{MODEL}", None), ("POST", "/tokenize", {"prompt": "a"}),
    ("POST", "/detokenize", {"tokens": [1]}), ("GET", "/version", None), ("GET", "/props", None),
    ("GET", "/slots", None),
])
def test_missing_key_is_401(key_http, method, path, body):
    r = key_http.request(method, path, json=body)
    assert r.status_code == 401
    assert_json_content_type(r)
    assert r.json() == UNAUTHORIZED


@pytest.mark.parametrize("authorization", [f"Bearer {API_KEY}x", f"Bearer {API_KEY[:-1]}",
                                           "Bearer wrong", API_KEY, f"Basic {API_KEY}", "Bearer"])
def test_wrong_key_is_401(key_http, authorization):
    r = key_http.post(CHAT, json=chat_body(), headers={"Authorization": authorization})
    assert r.status_code == 401
    assert r.json() == UNAUTHORIZED


@pytest.mark.parametrize("method,path,body", [
    ("POST", CHAT, chat_body()), ("GET", "/v1/models", None), ("POST", "/tokenize", {"prompt": "a"}),
    ("GET", "/version", None),
])
def test_right_key_is_accepted(key_http, method, path, body):
    r = key_http.request(method, path, json=body, headers=AUTH)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/health", "/v1/health", "/ping", "/metrics"])
def test_health_and_metrics_need_no_key(key_http, path):
    assert key_http.get(path).status_code == 200


def test_auth_comes_after_route_and_method(key_http):
    assert_error(key_http.get("/v1/nope"), 404, "unknown_url")
    assert_error(key_http.get(CHAT), 405, "method_not_allowed")


def test_auth_comes_before_body_checks(key_http, key_server):
    r = key_http.post(CHAT, content=b"{")
    assert r.status_code == 401 and r.json() == UNAUTHORIZED
    # ... and before the body size check (§2.1: 401 is step 2, 413 step 3).
    with socket.create_connection(("127.0.0.1", key_server.port), timeout=5) as sock:
        sock.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: {DEFAULT_BODY_LIMIT + 1}"
                     "\r\n\r\n".encode())
        response, _ = read_raw_response(sock)
    assert response.status == 401


def test_401_is_not_an_sse_stream(key_http):
    r = key_http.post(CHAT, json=chat_body(stream=True))
    assert r.status_code == 401
    assert_json_content_type(r)


# ---------------------------------------------------------------------------------------------
# §13.7-10 /tokenize and /detokenize
# ---------------------------------------------------------------------------------------------

TOKENIZE_TEXTS = ["Hello world", "Hello, world! 123", "<|im_start|>user\nhi<|im_end|>",
                  "東京🎉 naïve café", "  spaces\tand\nnewlines\n\n"]


@pytest.mark.parametrize("text", TOKENIZE_TEXTS)
def test_tokenize_matches_reference_tokenizer(http, ref_tokenizer, text):
    r = http.post("/tokenize", json={"prompt": text})
    assert r.status_code == 200
    body = r.json()
    assert list(body) == ["count", "max_model_len", "tokens"]
    assert body["tokens"] == ref_tokenizer.encode(text).ids
    assert body["count"] == len(body["tokens"])
    assert body["max_model_len"] == CONTEXT


def test_tokenize_content_is_alias_of_prompt(http):
    a = http.post("/tokenize", json={"prompt": "Hello world"}).json()
    b = http.post("/tokenize", json={"content": "Hello world"}).json()
    assert a == b


def test_tokenize_token_strs(http, ref_tokenizer):
    text = "Hi 東京🎉"
    body = http.post("/tokenize", json={"prompt": text, "return_token_strs": True}).json()
    ids = ref_tokenizer.encode(text).ids
    assert body["tokens"] == ids
    assert body["token_strs"] == [token_string(i) for i in ids]
    assert any(s.startswith("bytes:") for s in body["token_strs"])  # the case §6.3 describes


def test_tokenize_model_field(http):
    assert http.post("/tokenize", json={"prompt": "a", "model": MODEL}).status_code == 200
    r = http.post("/tokenize", json={"prompt": "a", "model": "gpt-4"})
    assert_error(r, 400, "model_not_found", "The model 'gpt-4' does not exist.", "model")


TOKENIZE_CHAT_CASES = {
    "plain": {"messages": MESSAGES},
    "multi_turn": {"messages": [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Hi"},
                                {"role": "assistant", "content": "Hello!"},
                                {"role": "user", "content": "Weather?"}]},
    "thinking_off": {"messages": MESSAGES, "chat_template_kwargs": {"enable_thinking": False}},
    "effort_none": {"messages": MESSAGES, "reasoning_effort": "none"},
    "tools_auto": {"messages": MESSAGES, "tools": [WEATHER_TOOL]},
    "tools_required": {"messages": MESSAGES, "tools": [WEATHER_TOOL], "tool_choice": "required"},
    "tools_named": {"messages": MESSAGES, "tools": [WEATHER_TOOL],
                    "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
}


@pytest.mark.parametrize("case", list(TOKENIZE_CHAT_CASES))
def test_tokenize_messages_count_equals_prompt_tokens(http, case):
    fields = TOKENIZE_CHAT_CASES[case]
    tokenized = http.post("/tokenize", json=fields)
    assert tokenized.status_code == 200, tokenized.text
    count = tokenized.json()["count"]
    assert count == len(tokenized.json()["tokens"])
    r = http.post(CHAT, json={**fields, "max_tokens": 1, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == count


def test_tokenize_prompt_count_equals_completions_prompt_tokens(http):
    prompts = ["Hello world", "東京🎉"]
    counts = [http.post("/tokenize", json={"prompt": p}).json()["count"] for p in prompts]
    r = http.post(COMP, json=comp_body(prompt=prompts, max_tokens=1))
    assert r.json()["usage"]["prompt_tokens"] == sum(counts)


def test_tokenize_developer_renders_as_system(http):
    system = http.post("/tokenize", json={"messages": [{"role": "system", "content": "X"},
                                                       *MESSAGES]}).json()["tokens"]
    developer = http.post("/tokenize", json={"messages": [{"role": "developer", "content": "X"},
                                                          *MESSAGES]}).json()["tokens"]
    assert system == developer


def test_tokenize_text_parts_join_without_separator(http):
    parts = http.post("/tokenize", json={"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Say "}, {"type": "text", "text": "hello."}]}]}).json()
    joined = http.post("/tokenize", json={"messages": MESSAGES}).json()
    assert parts["tokens"] == joined["tokens"]


ROUND_TRIP = [unicodedata.normalize("NFC", s) for s in [
    "Hello, world!", "Grüße aus München", "¿Dónde está la biblioteca?", "Ελληνικά γράμματα",
    "Привет, мир", "שלום עולם", "مرحبا بالعالم", "नमस्ते दुनिया", "你好，世界", "東京タワーへようこそ",
    "안녕하세요 세계", "ภาษาไทย", "Tiếng Việt có dấu", "🎉🚀✨", "👩‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags",
    "emoji mid 😀 text", "math ∑∫√∞ ≠ ≤", "tabs\tand\nnewlines\r\n", "  leading and trailing  ",
]]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_detokenize_round_trips(http, text):
    ids = http.post("/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]
    r = http.post("/detokenize", json={"tokens": ids})
    assert r.status_code == 200
    assert list(r.json()) == ["prompt"]
    assert r.json()["prompt"] == text


def test_detokenize_renders_special_tokens(http):
    text = "<|im_start|>user\nhi<|im_end|>"
    ids = http.post("/tokenize", json={"prompt": text}).json()["tokens"]
    assert 501 in ids and IM_END in ids
    assert http.post("/detokenize", json={"tokens": ids}).json()["prompt"] == text


def test_detokenize_partial_utf8_is_replaced(http, ref_tokenizer):
    ids = ref_tokenizer.encode("東").ids
    assert len(ids) > 1, "expected a character split over byte tokens"
    text = http.post("/detokenize", json={"tokens": ids[:1]}).json()["prompt"]
    assert text and set(text) == {"\ufffd"}


def test_detokenize_raw_utf8_compact_body(http):
    # §0: compact serialization, non-ASCII characters raw (no \\u escapes).
    ids = http.post("/tokenize", json={"prompt": "東京 🎉"}).json()["tokens"]
    r = http.post("/detokenize", json={"tokens": ids})
    assert r.content == compact({"prompt": "東京 🎉"}).encode()


@pytest.mark.parametrize("tokens,index,shown", [([-1], 0, "-1"), ([VOCAB], 0, str(VOCAB)),
                                                ([1, 2, 600], 2, "600")])
def test_detokenize_out_of_range_id(http, tokens, index, shown):
    r = http.post("/detokenize", json={"tokens": tokens})
    assert_error(r, 400, "invalid_value",
                 f"Invalid value for 'tokens[{index}]': token id {shown} is outside [0, {VOCAB}).",
                 f"tokens[{index}]")


@pytest.mark.parametrize("tokens,index", [(["a"], 0), ([1.5], 0), ([1, True], 1), ([None], 0)])
def test_detokenize_non_integer_id(http, tokens, index):
    r = http.post("/detokenize", json={"tokens": tokens})
    assert_error(r, 400, "invalid_type", f"Invalid type for 'tokens[{index}]': expected an integer.",
                 f"tokens[{index}]")


def test_detokenize_missing_tokens(http):
    assert_error(http.post("/detokenize", json={}), 400, "missing_required_parameter",
                 "Missing required parameter: 'tokens'.", "tokens")


def test_detokenize_tokens_not_array(http):
    assert_error(http.post("/detokenize", json={"tokens": "1"}), 400, "invalid_type",
                 "Invalid type for 'tokens': expected an array.", "tokens")


def test_tokenize_neither_prompt_nor_messages(http):
    assert_error(http.post("/tokenize", json={}), 400, "missing_required_parameter",
                 "Missing required parameter: 'prompt'.", "prompt")


@pytest.mark.parametrize("key", ["prompt", "content"])
def test_tokenize_both_prompt_and_messages(http, key):
    r = http.post("/tokenize", json={key: "a", "messages": MESSAGES})
    assert_error(r, 400, "invalid_value", "Provide either 'prompt' or 'messages', not both.",
                 "messages")


def test_tokenize_empty_messages(http):
    assert_error(http.post("/tokenize", json={"messages": []}), 400, "invalid_value",
                 "Invalid value for 'messages': expected a non-empty array of messages.", "messages")


def test_tokenize_template_error(http):
    r = http.post("/tokenize", json={"messages": [*MESSAGES, {"role": "system", "content": "x"}]})
    assert_error(r, 400, "invalid_value",
                 "Chat template error: System messages must come before all other messages.",
                 "messages")


def test_tokenize_prompt_wrong_type(http):
    assert_error(http.post("/tokenize", json={"prompt": 5}), 400, "invalid_type",
                 "Invalid type for 'prompt': expected a string.", "prompt")


# ---------------------------------------------------------------------------------------------
# §13.11-12 /metrics
# ---------------------------------------------------------------------------------------------

FAMILIES = {
    "megadecode_requests_received_total": "counter",
    "megadecode_requests_finished_total": "counter",
    "megadecode_http_requests_total": "counter",
    "megadecode_prompt_tokens_total": "counter",
    "megadecode_prompt_tokens_cached_total": "counter",
    "megadecode_generation_tokens_total": "counter",
    "megadecode_num_requests_running": "gauge",
    "megadecode_num_requests_waiting": "gauge",
    "megadecode_num_rows": "gauge",
    "megadecode_kv_cache_usage_ratio": "gauge",
    "megadecode_time_to_first_token_seconds": "histogram",
    "megadecode_inter_token_latency_seconds": "histogram",
    "megadecode_e2e_request_latency_seconds": "histogram",
    "megadecode_request_queue_time_seconds": "histogram",
    "megadecode_request_prefill_time_seconds": "histogram",
    "megadecode_request_decode_time_seconds": "histogram",
    "megadecode_request_prompt_tokens": "histogram",
    "megadecode_request_generation_tokens": "histogram",
    "megadecode_spec_decode_num_drafts_total": "counter",
    "megadecode_spec_decode_num_draft_tokens_total": "counter",
    "megadecode_spec_decode_num_accepted_tokens_total": "counter",
    "megadecode_spec_decode_num_accepted_tokens_per_pos_total": "counter",
    "megadecode_spec_decode_mean_acceptance_length": "gauge",
    "megadecode_spec_decode_acceptance_length": "histogram",
    "megadecode_decode_steps_total": "counter",
    "megadecode_ready": "gauge",
    "megadecode_build_info": "gauge",
}

LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480,
                   960, 1920]
TOKEN_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000]
BUCKETS = {
    "megadecode_time_to_first_token_seconds": [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                               0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
                                               160, 640],
    "megadecode_inter_token_latency_seconds": [0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025,
                                               0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
                                               0.5, 0.75, 1, 2.5],
    "megadecode_e2e_request_latency_seconds": LATENCY_BUCKETS,
    "megadecode_request_queue_time_seconds": LATENCY_BUCKETS,
    "megadecode_request_prefill_time_seconds": LATENCY_BUCKETS,
    "megadecode_request_decode_time_seconds": LATENCY_BUCKETS,
    "megadecode_request_prompt_tokens": TOKEN_BUCKETS,
    "megadecode_request_generation_tokens": TOKEN_BUCKETS,
}


def series_lines(text):
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_metrics_content_type(http):
    r = http.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"


def test_metrics_every_family_has_help_and_type(http):
    text = http.get("/metrics").text
    for family, kind in FAMILIES.items():
        assert re.search(rf"^# HELP {family} \S", text, re.M), family
        assert re.search(rf"^# TYPE {family} {kind}$", text, re.M), family


def test_metrics_every_series_has_model_name(http):
    for line in series_lines(http.get("/metrics").text):
        assert f'model_name="{MODEL}"' in line, line


def test_metrics_series_belong_to_declared_families(http):
    text = http.get("/metrics").text
    typed = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    for line in series_lines(text):
        name = line.split("{", 1)[0].split(" ", 1)[0]
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or base in typed, line


@pytest.mark.parametrize("family", list(BUCKETS))
def test_metrics_histogram_buckets(http, family):
    text = http.get("/metrics").text
    bounds = re.findall(rf'^{family}_bucket{{[^}}]*le="([^"]+)"', text, re.M)
    assert bounds[-1] == "+Inf"
    assert [float(b) for b in bounds[:-1]] == [float(b) for b in BUCKETS[family]]
    assert re.search(rf"^{family}_sum{{", text, re.M)
    count = metric(text, f"{family}_count")
    assert metric(text, f"{family}_bucket", {"le": "+Inf"}) == count


def test_metrics_spec_decode_families_read_zero(http):
    text = http.get("/metrics").text
    for name in ["megadecode_spec_decode_num_drafts_total",
                 "megadecode_spec_decode_num_draft_tokens_total",
                 "megadecode_spec_decode_num_accepted_tokens_total",
                 "megadecode_spec_decode_mean_acceptance_length",
                 "megadecode_spec_decode_acceptance_length_count"]:
        assert metric(text, name) == 0, name


def test_metrics_build_info_and_rows(http):
    text = http.get("/metrics").text
    assert metric(text, "megadecode_num_rows") == 4
    assert metric(text, "megadecode_ready") == 1
    line = next(l for l in series_lines(text) if l.startswith("megadecode_build_info{"))
    for label in ("version", "revision", "executor"):
        assert re.search(rf'{label}="[^"]+"', line), line
    assert float(line.rsplit(" ", 1)[1]) == 1


@pytest.fixture(scope="module")
def named_server():
    started = time.time()
    s = Server("--served-model-name", "alpha,beta-2")
    s.started, s.ready = started, time.time()
    yield s
    assert s.stop() == 0


def test_metrics_start_at_zero(named_server):
    # The first request this server sees: every counter and histogram count is 0 (§1.5).
    text = metrics_text(named_server.url)
    for reason in ["stop", "length", "tool_calls", "abort", "error"]:
        assert metric(text, "megadecode_requests_finished_total", {"finished_reason": reason}) == 0
    for endpoint in ["chat", "completions"]:
        assert metric(text, "megadecode_requests_received_total", {"endpoint": endpoint}) == 0
    for name in ["megadecode_prompt_tokens_total", "megadecode_prompt_tokens_cached_total",
                 "megadecode_generation_tokens_total", "megadecode_num_requests_running",
                 "megadecode_num_requests_waiting"]:
        assert metric(text, name) == 0, name
    for family in BUCKETS:
        assert metric(text, f"{family}_count") == 0, family
        assert metric(text, f"{family}_sum") == 0, family
    for line in series_lines(text):
        assert 'model_name="alpha"' in line, line


def test_served_model_name_is_the_id(named_server):
    body = httpx.get(named_server.url + "/v1/models").json()
    assert [m["id"] for m in body["data"]] == ["alpha"]


def test_models_created_is_server_start_time(named_server):
    created = httpx.get(named_server.url + "/v1/models").json()["data"][0]["created"]
    assert int(named_server.started) <= created <= named_server.ready + 1


@pytest.mark.parametrize("name", ["alpha", "beta-2"])
def test_served_model_aliases_are_accepted(named_server, name):
    r = httpx.post(named_server.url + CHAT, json=chat_body(model=name), timeout=30)
    assert r.status_code == 200, r.text


def test_served_model_other_name_is_rejected(named_server):
    r = httpx.post(named_server.url + CHAT, json=chat_body(model=MODEL), timeout=30)
    assert_error(r, 400, "model_not_found", f"The model '{MODEL}' does not exist.", "model")


def test_metrics_after_one_request(http, base_url):
    wait_idle(base_url)
    before = metrics_text(base_url)
    r = http.post(CHAT, json=chat_body(max_tokens=7, ignore_eos=True))
    usage = r.json()["usage"]
    # The access counter is written after the response; poll for it.
    wait_until(lambda: metric(metrics_text(base_url), "megadecode_http_requests_total",
                              {"route": CHAT, "status": "200"}) ==
               metric(before, "megadecode_http_requests_total", {"route": CHAT, "status": "200"}) + 1,
               what="http_requests_total to count the request")
    after = metrics_text(base_url)

    def delta(name, labels=None):
        return metric(after, name, labels) - metric(before, name, labels)

    assert delta("megadecode_generation_tokens_total") == usage["completion_tokens"] == 7
    assert delta("megadecode_prompt_tokens_total") == usage["prompt_tokens"]
    assert delta("megadecode_time_to_first_token_seconds_count") == 1
    assert delta("megadecode_e2e_request_latency_seconds_count") == 1
    assert delta("megadecode_request_queue_time_seconds_count") == 1
    assert delta("megadecode_request_prompt_tokens_count") == 1
    assert delta("megadecode_request_prompt_tokens_sum") == usage["prompt_tokens"]
    assert delta("megadecode_request_generation_tokens_count") == 1
    assert delta("megadecode_request_generation_tokens_sum") == 7
    assert delta("megadecode_inter_token_latency_seconds_count") == 6
    assert delta("megadecode_requests_received_total", {"endpoint": "chat"}) == 1
    assert delta("megadecode_requests_finished_total", {"finished_reason": "length"}) == 1


def test_metrics_validation_failure_is_not_received(http, base_url):
    before = metrics_text(base_url)
    assert http.post(CHAT, json=chat_body(temperature=9)).status_code == 400

    def total_400(text):
        return sum(float(l.rsplit(" ", 1)[1]) for l in series_lines(text)
                   if l.startswith("megadecode_http_requests_total{") and 'status="400"' in l)

    wait_until(lambda: total_400(metrics_text(base_url)) == total_400(before) + 1,
               what="the 400 to be counted")
    after = metrics_text(base_url)
    assert metric(after, "megadecode_requests_received_total", {"endpoint": "chat"}) == \
        metric(before, "megadecode_requests_received_total", {"endpoint": "chat"})


# ---------------------------------------------------------------------------------------------
# §13.15-17 body parsing
# ---------------------------------------------------------------------------------------------

INVALID_JSON = error_body("invalid_json", "Request body is not valid JSON.")
INVALID_UTF8 = error_body("invalid_encoding", "Request body is not valid UTF-8.")
NOT_OBJECT = error_body("invalid_type", "Request body must be a JSON object.")


@pytest.mark.parametrize("path", [CHAT, COMP, "/tokenize", "/detokenize"])
@pytest.mark.parametrize("raw", [b"{", b"", b"{'a': 1}", b'{"messages": [}', b"nul",
                                 b'{"a": 1} x'])
def test_invalid_json_is_400(http, path, raw):
    r = http.post(path, content=raw)
    assert r.status_code == 400
    assert_json_content_type(r)
    assert r.json() == INVALID_JSON


@pytest.mark.parametrize("path", [CHAT, COMP, "/tokenize"])
@pytest.mark.parametrize("raw", [b'{"messages": [{"role": "user", "content": "a\xffb"}]}',
                                 b'{"prompt": "\xc3\x28"}',
                                 b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
                                 b'{"prompt": "x\\udc00y"}',
                                 b'{"prompt": "\\ud800\\u0041"}'])
def test_invalid_utf8_is_400(http, path, raw):
    r = http.post(path, content=raw)
    assert r.status_code == 400
    assert r.json() == INVALID_UTF8


def test_valid_surrogate_pair_escape_is_accepted(http):
    r = http.post("/tokenize", content=b'{"prompt": "\\ud83d\\ude00"}')
    assert r.status_code == 200
    direct = http.post("/tokenize", json={"prompt": "😀"}).json()
    assert r.json() == direct


@pytest.mark.parametrize("path", [CHAT, COMP, "/tokenize", "/detokenize"])
@pytest.mark.parametrize("raw", [b"[]", b'"text"', b"1", b"null", b"true", b"[{}]"])
def test_top_level_not_object_is_400(http, path, raw):
    r = http.post(path, content=raw)
    assert r.status_code == 400
    assert r.json() == NOT_OBJECT


# ---------------------------------------------------------------------------------------------
# §13.18-31 field validation, §2.2-2.4, §12.1, §11
# ---------------------------------------------------------------------------------------------


def _type_msg(param, phrase):
    return f"Invalid type for '{param}': expected {phrase}."


def _value_msg(param, rule):
    return f"Invalid value for '{param}': expected {rule}."


ROLES = "one of 'system', 'developer', 'user', 'assistant', 'tool'"
EFFORTS = "one of 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'"
TOKEN_ID_RULE = f"a token id in [0, {VOCAB})"
SEED_RULE = "an integer between -9223372036854775808 and 9223372036854775807"
STOP_RULE = "at most 16 stop strings of at most 1024 bytes each"
MAX_TOKENS_RULE = "an integer between 0 and 2147483647"
BAD_ARGS = "a JSON object or a string holding one"
TOOL_NAME_RULE = "1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"
HISTORY_WITH_CALL = [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{not json"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]


def _tool(name, **extra):
    return {"type": "function", "function": {"name": name, **extra}}


# (id, overrides, code, param, message); message None: not fixed by the spec.
CHAT_INVALID = [
    ("messages_missing", {"messages": DROP}, "missing_required_parameter", "messages",
     "Missing required parameter: 'messages'."),
    ("messages_null", {"messages": None}, "missing_required_parameter", "messages",
     "Missing required parameter: 'messages'."),
    ("messages_empty", {"messages": []}, "invalid_value", "messages",
     _value_msg("messages", "a non-empty array of messages")),
    ("messages_string", {"messages": "hi"}, "invalid_type", "messages",
     _type_msg("messages", "an array")),
    ("message_not_object", {"messages": [1]}, "invalid_type", "messages[0]",
     _type_msg("messages[0]", "an object")),
    ("role_wizard", {"messages": [{"role": "wizard", "content": "x"}]}, "invalid_value",
     "messages[0].role", _value_msg("messages[0].role", ROLES)),
    ("role_missing", {"messages": [{"content": "x"}]}, "missing_required_parameter",
     "messages[0].role", "Missing required parameter: 'messages[0].role'."),
    ("role_number", {"messages": [{"role": 1, "content": "x"}]}, "invalid_type",
     "messages[0].role", _type_msg("messages[0].role", "a string")),
    ("content_missing", {"messages": [{"role": "user"}]}, "missing_required_parameter",
     "messages[0].content", "Missing required parameter: 'messages[0].content'."),
    ("content_null_user", {"messages": [{"role": "user", "content": None}]},
     "missing_required_parameter", "messages[0].content",
     "Missing required parameter: 'messages[0].content'."),
    ("content_null_system", {"messages": [{"role": "system", "content": None}, *MESSAGES]},
     "missing_required_parameter", "messages[0].content",
     "Missing required parameter: 'messages[0].content'."),
    ("content_null_tool", {"messages": [*MESSAGES, {"role": "tool", "content": None}]},
     "missing_required_parameter", "messages[1].content",
     "Missing required parameter: 'messages[1].content'."),
    ("content_number", {"messages": [{"role": "user", "content": 5}]}, "invalid_type",
     "messages[0].content", _type_msg("messages[0].content", "a string or an array of content parts")),
    ("second_message_content", {"messages": [*MESSAGES, {"role": "assistant", "content": {}}]},
     "invalid_type", "messages[1].content",
     _type_msg("messages[1].content", "a string or an array of content parts")),
    ("part_image_url", {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]},
     "unsupported_value", "messages[0].content[1].type",
     "Unsupported value for 'messages[0].content[1].type': \"image_url\" is not supported by "
     "this server."),
    ("part_input_audio", {"messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]},
     "unsupported_value", "messages[0].content[0].type",
     "Unsupported value for 'messages[0].content[0].type': \"input_audio\" is not supported by "
     "this server."),
    ("part_file", {"messages": [{"role": "user", "content": [{"type": "file", "file": {}}]}]},
     "unsupported_value", "messages[0].content[0].type",
     "Unsupported value for 'messages[0].content[0].type': \"file\" is not supported by "
     "this server."),
    ("history_arguments_unparseable", {"messages": HISTORY_WITH_CALL}, "invalid_value",
     "messages[1].tool_calls[0].function.arguments",
     _value_msg("messages[1].tool_calls[0].function.arguments", BAD_ARGS)),
    ("history_arguments_array", {"messages": [HISTORY_WITH_CALL[0], {
        **HISTORY_WITH_CALL[1], "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "get_weather", "arguments": "[1, 2]"}}]}, HISTORY_WITH_CALL[2]]},
     "invalid_value", "messages[1].tool_calls[0].function.arguments",
     _value_msg("messages[1].tool_calls[0].function.arguments", BAD_ARGS)),
    ("template_raise", {"messages": [*MESSAGES, {"role": "system", "content": "late"}]},
     "invalid_value", "messages",
     "Chat template error: System messages must come before all other messages."),
    ("model_unknown", {"model": "gpt-4"}, "model_not_found", "model",
     "The model 'gpt-4' does not exist."),
    ("model_number", {"model": 4}, "invalid_type", "model", _type_msg("model", "a string")),
    ("frequency_penalty_high", {"frequency_penalty": 2.5}, "invalid_value", "frequency_penalty",
     _value_msg("frequency_penalty", "a number between -2 and 2")),
    ("frequency_penalty_low", {"frequency_penalty": -2.01}, "invalid_value", "frequency_penalty",
     _value_msg("frequency_penalty", "a number between -2 and 2")),
    ("presence_penalty_high", {"presence_penalty": 3}, "invalid_value", "presence_penalty",
     _value_msg("presence_penalty", "a number between -2 and 2")),
    ("presence_penalty_string", {"presence_penalty": "1"}, "invalid_type", "presence_penalty",
     _type_msg("presence_penalty", "a number")),
    ("repetition_penalty_zero", {"repetition_penalty": 0}, "invalid_value", "repetition_penalty",
     _value_msg("repetition_penalty", "a number greater than 0 and at most 2")),
    ("repetition_penalty_high", {"repetition_penalty": 2.01}, "invalid_value",
     "repetition_penalty", _value_msg("repetition_penalty", "a number greater than 0 and at most 2")),
    ("temperature_high", {"temperature": 2.5}, "invalid_value", "temperature",
     _value_msg("temperature", "a number between 0 and 2")),
    ("temperature_negative", {"temperature": -0.1}, "invalid_value", "temperature",
     _value_msg("temperature", "a number between 0 and 2")),
    ("temperature_3", {"temperature": 3}, "invalid_value", "temperature",
     _value_msg("temperature", "a number between 0 and 2")),
    ("temperature_string", {"temperature": "1"}, "invalid_type", "temperature",
     _type_msg("temperature", "a number")),
    ("temperature_bool", {"temperature": True}, "invalid_type", "temperature",
     _type_msg("temperature", "a number")),
    ("top_p_high", {"top_p": 1.5}, "invalid_value", "top_p",
     _value_msg("top_p", "a number between 0 and 1")),
    ("top_p_negative", {"top_p": -0.1}, "invalid_value", "top_p",
     _value_msg("top_p", "a number between 0 and 1")),
    ("top_k_low", {"top_k": -2}, "invalid_value", "top_k", _value_msg("top_k", "an integer >= -1")),
    ("top_k_fraction", {"top_k": 1.5}, "invalid_type", "top_k", _type_msg("top_k", "an integer")),
    ("min_p_high", {"min_p": 1.5}, "invalid_value", "min_p",
     _value_msg("min_p", "a number between 0 and 1")),
    ("max_completion_tokens_negative", {"max_completion_tokens": -1}, "invalid_value",
     "max_completion_tokens", _value_msg("max_completion_tokens", MAX_TOKENS_RULE)),
    ("max_tokens_negative", {"max_tokens": -1}, "invalid_value", "max_tokens",
     "Invalid value for 'max_tokens': expected an integer between 0 and 2147483647."),
    ("max_tokens_2_31", {"max_tokens": 2147483648}, "invalid_value", "max_tokens",
     _value_msg("max_tokens", MAX_TOKENS_RULE)),
    ("max_tokens_string", {"max_tokens": "10"}, "invalid_type", "max_tokens",
     _type_msg("max_tokens", "an integer")),
    ("max_tokens_fraction", {"max_tokens": 10.5}, "invalid_type", "max_tokens",
     _type_msg("max_tokens", "an integer")),
    ("max_tokens_bool", {"max_tokens": True}, "invalid_type", "max_tokens",
     _type_msg("max_tokens", "an integer")),
    ("min_tokens_negative", {"min_tokens": -1}, "invalid_value", "min_tokens",
     _value_msg("min_tokens", "an integer >= 0")),
    ("n_zero", {"n": 0}, "invalid_value", "n", _value_msg("n", "an integer between 1 and 128")),
    ("n_1000", {"n": 1000}, "invalid_value", "n", _value_msg("n", "an integer between 1 and 128")),
    ("n_129", {"n": 129}, "invalid_value", "n", _value_msg("n", "an integer between 1 and 128")),
    ("n_over_max_choices", {"n": 100}, "invalid_value", "n",
     "Request asks for 100 choices; at most 64 are allowed."),
    ("n_65", {"n": 65}, "invalid_value", "n", "Request asks for 65 choices; at most 64 are allowed."),
    ("stop_number", {"stop": 5}, "invalid_type", "stop",
     _type_msg("stop", "a string or an array of strings")),
    ("stop_object", {"stop": {"a": 1}}, "invalid_type", "stop",
     _type_msg("stop", "a string or an array of strings")),
    ("stop_17", {"stop": [f"s{i}" for i in range(17)]}, "invalid_value", "stop",
     _value_msg("stop", STOP_RULE)),
    ("stop_string_too_long", {"stop": "x" * 1025}, "invalid_value", "stop",
     _value_msg("stop", STOP_RULE)),
    ("stop_element_too_long", {"stop": ["ok", "x" * 1025]}, "invalid_value", "stop[1]",
     _value_msg("stop[1]", STOP_RULE)),
    ("stop_token_ids_out_of_range", {"stop_token_ids": [1, VOCAB]}, "invalid_value",
     "stop_token_ids[1]", _value_msg("stop_token_ids[1]", f"token ids in [0, {VOCAB})")),
    ("stop_token_ids_negative", {"stop_token_ids": [-1]}, "invalid_value", "stop_token_ids[0]",
     _value_msg("stop_token_ids[0]", f"token ids in [0, {VOCAB})")),
    ("stop_token_ids_not_array", {"stop_token_ids": 5}, "invalid_type", "stop_token_ids",
     _type_msg("stop_token_ids", "an array")),
    ("stream_string", {"stream": "true"}, "invalid_type", "stream",
     _type_msg("stream", "a boolean")),
    ("stream_number", {"stream": 1}, "invalid_type", "stream", _type_msg("stream", "a boolean")),
    ("stream_options_number", {"stream": True, "stream_options": 5}, "invalid_type",
     "stream_options", _type_msg("stream_options", "an object")),
    ("stream_options_include_usage_string",
     {"stream": True, "stream_options": {"include_usage": "yes"}}, "invalid_type",
     "stream_options.include_usage", _type_msg("stream_options.include_usage", "a boolean")),
    ("seed_fraction", {"seed": 1.5}, "invalid_type", "seed", _type_msg("seed", "an integer")),
    ("seed_2_63", {"seed": 9223372036854775808}, "invalid_value", "seed",
     _value_msg("seed", SEED_RULE)),
    ("seed_below_min", {"seed": -9223372036854775809}, "invalid_value", "seed",
     _value_msg("seed", SEED_RULE)),
    ("seed_string", {"seed": "7"}, "invalid_type", "seed", _type_msg("seed", "an integer")),
    ("logprobs_number", {"logprobs": 1}, "invalid_type", "logprobs",
     _type_msg("logprobs", "a boolean")),
    ("top_logprobs_21", {"logprobs": True, "top_logprobs": 21}, "invalid_value", "top_logprobs",
     _value_msg("top_logprobs", "an integer between 0 and 20")),
    ("top_logprobs_negative", {"logprobs": True, "top_logprobs": -1}, "invalid_value",
     "top_logprobs", _value_msg("top_logprobs", "an integer between 0 and 20")),
    ("logit_bias_key_abc", {"logit_bias": {"abc": 1}}, "invalid_value", "logit_bias.abc",
     _value_msg("logit_bias.abc", TOKEN_ID_RULE)),
    ("logit_bias_key_vocab", {"logit_bias": {str(VOCAB): 1}}, "invalid_value",
     f"logit_bias.{VOCAB}", _value_msg(f"logit_bias.{VOCAB}", TOKEN_ID_RULE)),
    ("logit_bias_key_negative", {"logit_bias": {"-1": 1}}, "invalid_value", "logit_bias.-1",
     _value_msg("logit_bias.-1", TOKEN_ID_RULE)),
    ("logit_bias_value_101", {"logit_bias": {"0": 101}}, "invalid_value", "logit_bias.0",
     _value_msg("logit_bias.0", "a number between -100 and 100")),
    ("logit_bias_value_minus_101", {"logit_bias": {"7": -101}}, "invalid_value", "logit_bias.7",
     _value_msg("logit_bias.7", "a number between -100 and 100")),
    ("logit_bias_value_string", {"logit_bias": {"0": "1"}}, "invalid_type", "logit_bias.0",
     _type_msg("logit_bias.0", "a number")),
    ("logit_bias_array", {"logit_bias": [1]}, "invalid_type", "logit_bias",
     _type_msg("logit_bias", "an object")),
    ("logit_bias_1025_entries", {"logit_bias": {z + str(i): 1 for z in ("", "0", "00")
                                                for i in range(VOCAB)}},
     "invalid_value", "logit_bias", None),
    ("stop_token_ids_element_string", {"stop_token_ids": ["1"]}, "invalid_type",
     "stop_token_ids[0]", _type_msg("stop_token_ids[0]", "an integer")),
    ("tools_function_missing", {"tools": [{"type": "function"}]}, "missing_required_parameter",
     "tools[0].function", "Missing required parameter: 'tools[0].function'."),
    ("tools_name_missing", {"tools": [{"type": "function", "function": {}}]},
     "missing_required_parameter", "tools[0].function.name",
     "Missing required parameter: 'tools[0].function.name'."),
    ("tool_choice_object_type", {"tools": [WEATHER_TOOL], "tool_choice": {
        "type": "retrieval", "function": {"name": "get_weather"}}}, "unsupported_value",
     "tool_choice.type",
     "Unsupported value for 'tool_choice.type': \"retrieval\" is not supported by this server."),
    ("tool_choice_object_name_missing", {"tools": [WEATHER_TOOL], "tool_choice": {
        "type": "function", "function": {}}}, "missing_required_parameter",
     "tool_choice.function.name", "Missing required parameter: 'tool_choice.function.name'."),
    ("response_format_type_missing", {"response_format": {}}, "missing_required_parameter",
     "response_format.type", "Missing required parameter: 'response_format.type'."),
    ("tools_not_array", {"tools": {}}, "invalid_type", "tools", _type_msg("tools", "an array")),
    ("tools_type_retrieval", {"tools": [{"type": "retrieval", "function": {"name": "f"}}]},
     "unsupported_value", "tools[0].type",
     "Unsupported value for 'tools[0].type': \"retrieval\" is not supported by this server."),
    ("tools_name_space", {"tools": [WEATHER_TOOL, _tool("bad name")]}, "invalid_value",
     "tools[1].function.name", _value_msg("tools[1].function.name", TOOL_NAME_RULE)),
    ("tools_name_65", {"tools": [_tool("a" * 65)]}, "invalid_value", "tools[0].function.name",
     _value_msg("tools[0].function.name", TOOL_NAME_RULE)),
    ("tools_name_empty", {"tools": [_tool("")]}, "invalid_value", "tools[0].function.name",
     _value_msg("tools[0].function.name", TOOL_NAME_RULE)),
    ("tools_duplicate", {"tools": [WEATHER_TOOL, WEATHER_TOOL]}, "invalid_value", "tools",
     "Invalid value for 'tools': expected unique function names."),
    ("tools_parameters_string", {"tools": [_tool("f", parameters="x")]}, "invalid_type",
     "tools[0].function.parameters", _type_msg("tools[0].function.parameters", "an object")),
    ("tools_129", {"tools": [_tool(f"f{i}") for i in range(129)]}, "invalid_value", "tools", None),
    ("tool_choice_number", {"tools": [WEATHER_TOOL], "tool_choice": 5}, "invalid_type",
     "tool_choice", _type_msg("tool_choice", "a string or an object")),
    ("tool_choice_unknown", {"tools": [WEATHER_TOOL], "tool_choice": "sometimes"},
     "invalid_value", "tool_choice", _value_msg("tool_choice", "one of 'none', 'auto', 'required'")),
    ("parallel_tool_calls_string", {"parallel_tool_calls": "no"}, "invalid_type",
     "parallel_tool_calls", _type_msg("parallel_tool_calls", "a boolean")),
    ("response_format_json_schema_all_of", {"response_format": {"type": "json_schema",
        "json_schema": {"name": "x", "schema": {"allOf": [{"type": "object"}]}}}},
     "invalid_value", "response_format.json_schema.schema",
     "JSON schema keyword 'allOf' at #: not supported by structured output"),
    ("response_format_json_schema_missing", {"response_format": {"type": "json_schema"}},
     "missing_required_parameter", "response_format.json_schema", None),
    ("response_format_yaml", {"response_format": {"type": "yaml"}}, "invalid_value",
     "response_format.type",
     _value_msg("response_format.type", "one of 'text', 'json_object', 'json_schema'")),
    ("response_format_string", {"response_format": "text"}, "invalid_type", "response_format",
     _type_msg("response_format", "an object")),
    ("reasoning_effort_extreme", {"reasoning_effort": "extreme"}, "invalid_value",
     "reasoning_effort", _value_msg("reasoning_effort", EFFORTS)),
    ("kwargs_reasoning_effort_extreme", {"chat_template_kwargs": {"reasoning_effort": "extreme"}},
     "invalid_value", "chat_template_kwargs.reasoning_effort",
     "Invalid value for 'chat_template_kwargs.reasoning_effort': expected one of 'low', "
     "'medium', 'xhigh'."),
    ("kwargs_reasoning_effort_high", {"chat_template_kwargs": {"reasoning_effort": "high"}},
     "invalid_value", "chat_template_kwargs.reasoning_effort",
     "Invalid value for 'chat_template_kwargs.reasoning_effort': expected one of 'low', "
     "'medium', 'xhigh'."),
    ("kwargs_not_object", {"chat_template_kwargs": "x"}, "invalid_type", "chat_template_kwargs",
     _type_msg("chat_template_kwargs", "an object")),
    ("kwargs_enable_thinking_string", {"chat_template_kwargs": {"enable_thinking": "yes"}},
     "invalid_type", "chat_template_kwargs.enable_thinking",
     _type_msg("chat_template_kwargs.enable_thinking", "a boolean")),
    ("prompt_logprobs_21", {"prompt_logprobs": 21}, "invalid_value", "prompt_logprobs",
     _value_msg("prompt_logprobs", "an integer between 0 and 20")),
    ("modalities_audio", {"modalities": ["text", "audio"]}, "unsupported_value", "modalities",
     "Unsupported value for 'modalities': [\"text\",\"audio\"] is not supported by this server."),
    # Cross-field rules (§2.2), all invalid_value.
    ("top_logprobs_without_logprobs", {"top_logprobs": 3}, "invalid_value", "top_logprobs",
     "'top_logprobs' requires 'logprobs' to be true."),
    ("top_logprobs_with_logprobs_false", {"logprobs": False, "top_logprobs": 3}, "invalid_value",
     "top_logprobs", "'top_logprobs' requires 'logprobs' to be true."),
    ("min_tokens_over_max_tokens", {"min_tokens": 5, "max_tokens": 2}, "invalid_value",
     "min_tokens", "'min_tokens' must not exceed 'max_tokens'."),
    ("min_tokens_over_max_completion_tokens",
     {"min_tokens": 5, "max_tokens": 10, "max_completion_tokens": 4}, "invalid_value",
     "min_tokens", "'min_tokens' must not exceed 'max_tokens'."),
    ("tool_choice_auto_without_tools", {"tool_choice": "auto"}, "invalid_value", "tool_choice",
     "'tool_choice' requires 'tools'."),
    ("tool_choice_required_without_tools", {"tool_choice": "required"}, "invalid_value",
     "tool_choice", "'tool_choice' requires 'tools'."),
    ("tool_choice_names_absent_function",
     {"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "invalid_value", ..., "'tool_choice' names function 'nope', which is not in 'tools'."),
    ("add_generation_prompt_and_continue",
     {"messages": [*MESSAGES, {"role": "assistant", "content": "Hel"}],
      "add_generation_prompt": True, "continue_final_message": True}, "invalid_value", ...,
     "'add_generation_prompt' and 'continue_final_message' cannot both be true."),
    ("continue_with_default_add_generation_prompt",
     {"messages": [*MESSAGES, {"role": "assistant", "content": "Hel"}],
      "continue_final_message": True}, "invalid_value", ...,
     "'add_generation_prompt' and 'continue_final_message' cannot both be true."),
    ("prompt_logprobs_with_stream", {"prompt_logprobs": 1, "stream": True}, "invalid_value", ...,
     "'prompt_logprobs' cannot be used with 'stream'."),
]

BOOLEAN_FIELDS = ["include_stop_str_in_output", "ignore_eos", "skip_special_tokens", "stream",
                  "logprobs", "parallel_tool_calls", "enable_thinking", "add_generation_prompt",
                  "continue_final_message", "return_token_ids"]
for _field in BOOLEAN_FIELDS:
    CHAT_INVALID.append((f"{_field}_is_boolean", {_field: 1}, "invalid_type", _field,
                         _type_msg(_field, "a boolean")))

for _field in ["functions", "function_call", "audio", "prediction", "web_search_options"]:
    CHAT_INVALID.append((f"unsupported_{_field}", {_field: [] if _field == "functions" else {}},
                         "unsupported_parameter", _field,
                         f"Unsupported parameter: '{_field}' is not supported by this server."))


@pytest.mark.parametrize("overrides,code,param,message",
                         [c[1:] for c in CHAT_INVALID], ids=[c[0] for c in CHAT_INVALID])
def test_chat_invalid_request(http, overrides, code, param, message):
    r = http.post(CHAT, json=_apply(chat_body(max_tokens=1), overrides))
    assert_error(r, 400, code, message, param)


COMP_INVALID = [
    ("prompt_missing", {"prompt": DROP}, "missing_required_parameter", "prompt",
     "Missing required parameter: 'prompt'."),
    ("prompt_number", {"prompt": 5}, "invalid_type", "prompt", _type_msg(
        "prompt", "a string, an array of strings, an array of token ids or an array of arrays "
                  "of token ids")),
    ("prompt_object", {"prompt": {"text": "x"}}, "invalid_type", "prompt", _type_msg(
        "prompt", "a string, an array of strings, an array of token ids or an array of arrays "
                  "of token ids")),
    ("prompt_empty_array", {"prompt": []}, "invalid_value", "prompt", None),
    ("prompt_empty_id_list", {"prompt": [[]]}, "invalid_value", "prompt[0]", None),
    ("prompt_id_out_of_range", {"prompt": [1, VOCAB]}, "invalid_value", "prompt[1]", None),
    ("prompt_id_negative", {"prompt": [-1]}, "invalid_value", "prompt[0]", None),
    ("prompt_nested_id_out_of_range", {"prompt": [[1], [2, VOCAB]]}, "invalid_value",
     "prompt[1][1]", None),
    ("prompt_empty_string", {"prompt": ""}, "invalid_value", "prompt",
     "Invalid value for 'prompt': expected at least one token."),
    ("max_tokens_negative", {"max_tokens": -1}, "invalid_value", "max_tokens",
     _value_msg("max_tokens", MAX_TOKENS_RULE)),
    ("max_tokens_string", {"max_tokens": "10"}, "invalid_type", "max_tokens",
     _type_msg("max_tokens", "an integer")),
    ("temperature_high", {"temperature": 2.5}, "invalid_value", "temperature",
     _value_msg("temperature", "a number between 0 and 2")),
    ("logprobs_21", {"logprobs": 21}, "invalid_value", "logprobs",
     _value_msg("logprobs", "an integer between 0 and 20")),
    ("logprobs_string", {"logprobs": "1"}, "invalid_type", "logprobs",
     _type_msg("logprobs", "an integer or a boolean")),
    ("logprobs_fraction", {"logprobs": 1.5}, "invalid_type", "logprobs",
     _type_msg("logprobs", "an integer or a boolean")),
    ("best_of_not_n", {"best_of": 2}, "invalid_value", "best_of",
     _value_msg("best_of", "null or equal to 'n'")),
    ("suffix", {"suffix": "end"}, "unsupported_parameter", "suffix",
     "Unsupported parameter: 'suffix' is not supported by this server."),
    ("echo_number", {"echo": 1}, "invalid_type", "echo", _type_msg("echo", "a boolean")),
    ("add_special_tokens_string", {"add_special_tokens": "no"}, "invalid_type",
     "add_special_tokens", _type_msg("add_special_tokens", "a boolean")),
    ("n_over_max_choices_by_prompts", {"prompt": ["a", "b"], "n": 40}, "invalid_value", "n",
     "Request asks for 80 choices; at most 64 are allowed."),
    ("prompt_logprobs_with_stream", {"prompt_logprobs": 1, "stream": True}, "invalid_value", ...,
     "'prompt_logprobs' cannot be used with 'stream'."),
    ("min_tokens_over_max_tokens", {"min_tokens": 5, "max_tokens": 2}, "invalid_value",
     "min_tokens", "'min_tokens' must not exceed 'max_tokens'."),
    ("stop_17", {"stop": [f"s{i}" for i in range(17)]}, "invalid_value", "stop",
     _value_msg("stop", STOP_RULE)),
    ("logit_bias_key_abc", {"logit_bias": {"abc": 1}}, "invalid_value", "logit_bias.abc",
     _value_msg("logit_bias.abc", TOKEN_ID_RULE)),
    ("seed_2_63", {"seed": 9223372036854775808}, "invalid_value", "seed",
     _value_msg("seed", SEED_RULE)),
    ("model_unknown", {"model": "gpt-4"}, "model_not_found", "model",
     "The model 'gpt-4' does not exist."),
]


@pytest.mark.parametrize("overrides,code,param,message",
                         [c[1:] for c in COMP_INVALID], ids=[c[0] for c in COMP_INVALID])
def test_completions_invalid_request(http, overrides, code, param, message):
    r = http.post(COMP, json=_apply(comp_body(max_tokens=1), overrides))
    assert_error(r, 400, code, message, param)


# Bodies that must be accepted (200): defaults, nulls, ignored and boundary values.
CHAT_VALID = {
    "temperature_0": {"temperature": 0},
    "temperature_2": {"temperature": 2},
    "max_tokens_10.0": {"max_tokens": 10.0},
    "seed_minus_1": {"seed": -1},
    "seed_min": {"seed": -9223372036854775808},
    "seed_max": {"seed": 9223372036854775807},
    "response_format_text": {"response_format": {"type": "text"}},
    "unknown_top_level": {"foo": 1},
    "unknown_in_message": {"messages": [{"role": "user", "content": "hi", "foo": 1}]},
    "unknown_in_part": {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi", "foo": {"bar": 1}}]}]},
    "unknown_in_stream_options": {"stream_options": {"include_usage": True, "foo": 1,
                                                     "include_obfuscation": True}},
    "nulls_mean_absent": {k: None for k in [
        "model", "frequency_penalty", "presence_penalty", "repetition_penalty", "top_p", "top_k",
        "min_p", "max_completion_tokens", "min_tokens", "n", "stop", "stop_token_ids",
        "include_stop_str_in_output", "ignore_eos", "skip_special_tokens", "stream",
        "stream_options", "seed", "logprobs", "top_logprobs", "logit_bias", "tools", "tool_choice",
        "parallel_tool_calls", "response_format", "reasoning_effort", "chat_template_kwargs",
        "enable_thinking", "add_generation_prompt", "continue_final_message", "return_token_ids",
        "prompt_logprobs", "functions", "function_call", "audio", "prediction",
        "web_search_options", "modalities"]},
    "ignored_fields": {"user": "u1", "metadata": {"k": "v"}, "store": False,
                       "service_tier": "auto", "safety_identifier": "s", "prompt_cache_key": "k",
                       "prompt_cache_retention": "24h", "verbosity": "low"},
    "modalities_text": {"modalities": ["text"]},
    "stop_empty_string_dropped": {"stop": [""]},
    "stop_16": {"stop": [f"zz{i}" for i in range(16)]},
    "stop_1024_bytes": {"stop": "é" * 512},
    "tool_choice_none_without_tools": {"tool_choice": "none"},
    "tools_with_choice_none": {"tools": [WEATHER_TOOL], "tool_choice": "none"},
    "tools_strict_ignored": {"tools": [_tool("f", strict=True, parameters={"type": "object"})]},
    "model_served": {"model": MODEL},
    "model_omitted": {"model": DROP},
    "developer_role": {"messages": [{"role": "developer", "content": "Be brief."}, *MESSAGES]},
    "assistant_null_content": {"messages": [*MESSAGES, {"role": "assistant", "content": None},
                                            {"role": "user", "content": "again"}]},
    "history_arguments_object_and_string": {"messages": [
        HISTORY_WITH_CALL[0],
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "c2", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"}]},
    "reasoning_in_history": {"messages": [*MESSAGES, {"role": "assistant", "content": "Hi",
                                                      "reasoning_content": "greet"},
                                          {"role": "user", "content": "x"}]},
    "top_k_zero": {"top_k": 0},
    "top_k_minus_1": {"top_k": -1},
    "top_k_over_vocab": {"top_k": 100000},
    "repetition_penalty_2": {"repetition_penalty": 2},
    "penalties_at_bounds": {"frequency_penalty": -2, "presence_penalty": 2},
    "continue_final_message": {"messages": [*MESSAGES, {"role": "assistant", "content": "Hel"}],
                               "add_generation_prompt": False, "continue_final_message": True},
    "min_tokens_equal_max": {"min_tokens": 2, "max_tokens": 2},
    "top_logprobs_20": {"logprobs": True, "top_logprobs": 20},
    "top_logprobs_0_without_logprobs": {"top_logprobs": 0},
    "logit_bias_bounds": {"logit_bias": {"0": -100, "1": 100.0, "2": 0}},
    "reasoning_effort_each": {"reasoning_effort": "minimal"},
    "kwargs_reasoning_effort_low": {"chat_template_kwargs": {"reasoning_effort": "low"}},
    "kwargs_unknown_key_passed": {"chat_template_kwargs": {"custom_flag": 1}},
    "enable_thinking_false": {"enable_thinking": False},
    "max_tokens_clamped": {"max_tokens": 2147483647, "logit_bias": {str(IM_END): 100}},
    "max_completion_tokens_0": {"max_completion_tokens": 0},
}


@pytest.mark.parametrize("case", list(CHAT_VALID))
def test_chat_valid_request(http, case):
    r = http.post(CHAT, json=_apply(chat_body(), CHAT_VALID[case]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["usage"]["completion_tokens"] <= 10


def test_chat_integer_as_exponent_is_accepted(http):
    raw = json.dumps(chat_body(ignore_eos=True)).replace('"max_tokens": 2', '"max_tokens": 3e0')
    assert '3e0' in raw
    r = http.post(CHAT, content=raw.encode())
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 3


def test_max_tokens_float_without_fraction_is_the_integer(http):
    r = http.post(CHAT, json=chat_body(max_tokens=3.0, ignore_eos=True))
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] == 3


COMP_VALID = {
    "best_of_equal_n": {"best_of": 1},
    "best_of_null": {"best_of": None},
    "suffix_empty": {"suffix": ""},
    "suffix_null": {"suffix": None},
    "logprobs_true": {"logprobs": True},
    "logprobs_false": {"logprobs": False},
    "logprobs_0": {"logprobs": 0},
    "echo": {"echo": True},
    "token_ids": {"prompt": [1, 2, 3]},
    "token_id_lists": {"prompt": [[1, 2], [3]]},
    "strings": {"prompt": ["a", "b"]},
    "max_tokens_0": {"max_tokens": 0},
    "unknown_field": {"foo": {"bar": []}},
    "add_special_tokens_false": {"add_special_tokens": False},
    "stream_options_without_stream": {"stream_options": {"include_usage": True}},
}


@pytest.mark.parametrize("case", list(COMP_VALID))
def test_completions_valid_request(http, case):
    r = http.post(COMP, json=_apply(comp_body(), COMP_VALID[case]))
    assert r.status_code == 200, r.text
    assert r.json()["object"] == "text_completion"


def test_completions_logprobs_true_means_1(http):
    body = http.post(COMP, json=comp_body(logprobs=True, max_tokens=3, ignore_eos=True)).json()
    lp = body["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == 3
    assert all(1 <= len(top) <= 2 for top in lp["top_logprobs"])


def test_completions_logprobs_false_means_null(http):
    body = http.post(COMP, json=comp_body(logprobs=False)).json()
    assert body["choices"][0]["logprobs"] is None


def test_stream_options_without_stream_is_plain_json(http):
    r = http.post(CHAT, json=chat_body(stream_options={"include_usage": True}))
    assert r.status_code == 200
    assert_json_content_type(r)
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + \
        body["usage"]["completion_tokens"]


# ---- Validation order (§2.1) ----

def test_order_fields_follow_table_messages_first(http):
    r = http.post(CHAT, json={"temperature": 5, "messages": []})
    assert_error(r, 400, "invalid_value", param="messages")


def test_order_fields_follow_table_penalty_before_max_tokens(http):
    r = http.post(CHAT, json=chat_body(max_tokens=-1, frequency_penalty=5))
    assert_error(r, 400, "invalid_value", param="frequency_penalty")


def test_order_max_completion_tokens_before_max_tokens(http):
    r = http.post(CHAT, json=chat_body(max_tokens=-1, max_completion_tokens=-1))
    assert_error(r, 400, "invalid_value", param="max_completion_tokens")


def test_order_temperature_before_top_p(http):
    r = http.post(CHAT, json=chat_body(top_p=5, temperature=5))
    assert_error(r, 400, "invalid_value", param="temperature")


def test_order_fields_before_cross_field_rules(http):
    r = http.post(CHAT, json=chat_body(top_logprobs=3, seed=1.5))
    assert_error(r, 400, "invalid_type", param="seed")


def test_order_cross_field_rules_in_listed_order(http):
    r = http.post(CHAT, json=chat_body(top_logprobs=3, min_tokens=5, max_tokens=2,
                                       tool_choice="auto"))
    assert_error(r, 400, "invalid_value", "'top_logprobs' requires 'logprobs' to be true.")
    r = http.post(CHAT, json=chat_body(min_tokens=5, max_tokens=2, tool_choice="auto"))
    assert_error(r, 400, "invalid_value", "'min_tokens' must not exceed 'max_tokens'.")


def test_order_cross_field_before_model(http):
    r = http.post(CHAT, json=chat_body(model="gpt-4", top_logprobs=3))
    assert_error(r, 400, "invalid_value", "'top_logprobs' requires 'logprobs' to be true.")


def test_order_fields_before_model(http):
    r = http.post(CHAT, json=chat_body(model="gpt-4", temperature=5))
    assert_error(r, 400, "invalid_value", param="temperature")


def test_order_model_before_context_length(http, props):
    r = http.post(COMP, json=comp_body(model="gpt-4", prompt=[5] * (props["max_prompt_tokens"] + 1)))
    assert_error(r, 400, "model_not_found", param="model")


# ---- Context length (§2.5, §13.27) ----


def test_completions_prompt_over_limit_is_context_length_exceeded(http, props):
    limit = props["max_prompt_tokens"]
    r = http.post(COMP, json=comp_body(prompt=[5] * (limit + 1)))
    assert_error(r, 400, "context_length_exceeded",
                 f"The prompt has {limit + 1} tokens, but at most {limit} prompt tokens are allowed "
                 f"(max_model_len is {CONTEXT}).", "prompt")


def test_chat_prompt_over_limit_is_context_length_exceeded(http, props):
    limit = props["max_prompt_tokens"]
    messages = [{"role": "user", "content": "a" * (limit + 10)}]  # one token per "a" at least
    count = http.post("/tokenize", json={"messages": messages}).json()["count"]
    assert count > limit
    r = http.post(CHAT, json=chat_body(messages=messages))
    assert_error(r, 400, "context_length_exceeded",
                 f"The prompt has {count} tokens, but at most {limit} prompt tokens are allowed "
                 f"(max_model_len is {CONTEXT}).", "messages")


def test_streaming_prompt_over_limit_is_json_400(http, props):
    r = http.post(COMP, json=comp_body(prompt=[5] * (props["max_prompt_tokens"] + 1), stream=True))
    assert_error(r, 400, "context_length_exceeded", param="prompt")


def test_prompt_at_limit_gets_one_token_and_length(http, props):
    limit = props["max_prompt_tokens"]
    assert limit == CONTEXT - 1
    r = http.post(COMP, json=comp_body(prompt=[5] * limit, ignore_eos=True, max_tokens=2147483647))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 1
    assert body["usage"]["prompt_tokens"] == limit


# ---- §13.33 streaming requests that fail validation ----

@pytest.mark.parametrize("path,body", [
    (CHAT, chat_body(stream=True, temperature=5)),
    (CHAT, chat_body(stream=True, model="gpt-4")),
    (CHAT, chat_body(stream=True, messages=[])),
    (COMP, comp_body(stream=True, prompt="")),
    (COMP, comp_body(stream=True, n=0)),
])
def test_streaming_validation_failure_is_json_error(http, path, body):
    r = http.post(path, json=body)
    assert r.status_code == 400
    assert_json_content_type(r)
    assert "error" in r.json()


# ---------------------------------------------------------------------------------------------
# §13.34-36, 39 response shapes and streams
# ---------------------------------------------------------------------------------------------


def test_chat_non_streaming_shape(http):
    r = http.post(CHAT, json=chat_body(max_tokens=3, ignore_eos=True))
    assert r.status_code == 200
    assert_json_content_type(r)
    body = r.json()
    assert set(body) == {"id", "object", "created", "model", "system_fingerprint", "choices",
                         "usage"}
    assert body["object"] == "chat.completion"
    assert ID_RE.match(body["id"]), body["id"]
    assert isinstance(body["created"], int)
    assert body["model"] == MODEL
    assert FP_RE.match(body["system_fingerprint"])
    assert len(body["choices"]) == 1
    choice = body["choices"][0]
    assert set(choice) == {"index", "message", "logprobs", "finish_reason", "stop_reason"}
    assert choice["index"] == 0 and choice["logprobs"] is None
    assert choice["finish_reason"] == "length" and choice["stop_reason"] is None
    message = choice["message"]
    assert message["role"] == "assistant"
    assert isinstance(message["content"], str)
    assert message["refusal"] is None
    assert set(message) <= {"role", "content", "refusal", "reasoning_content", "tool_calls"}
    if "reasoning_content" in message:
        assert message["reasoning_content"] != ""
    usage = body["usage"]
    assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens",
                          "prompt_tokens_details", "completion_tokens_details"}
    assert usage["completion_tokens"] == 3
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert set(usage["prompt_tokens_details"]) == {"cached_tokens"}
    assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]
    assert set(usage["completion_tokens_details"]) == {"reasoning_tokens"}


def test_chat_ids_differ_between_requests(http):
    ids = {http.post(CHAT, json=chat_body()).json()["id"] for _ in range(3)}
    assert len(ids) == 3


def test_completions_non_streaming_shape(http):
    r = http.post(COMP, json=comp_body(max_tokens=3, ignore_eos=True))
    body = r.json()
    assert set(body) == {"id", "object", "created", "model", "system_fingerprint", "choices",
                         "usage"}
    assert body["object"] == "text_completion"
    assert CMPL_ID_RE.match(body["id"]), body["id"]
    assert FP_RE.match(body["system_fingerprint"])
    choice = body["choices"][0]
    assert set(choice) == {"index", "text", "logprobs", "finish_reason", "stop_reason"}
    assert choice["finish_reason"] == "length" and choice["logprobs"] is None
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens",
                                  "prompt_tokens_details"}
    assert body["usage"]["completion_tokens"] == 3
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 3


def test_completions_token_id_prompt_is_used_unchanged(http):
    ids = [258, 262, 10, 501, 511]
    text = http.post("/detokenize", json={"tokens": ids}).json()["prompt"]
    body = http.post(COMP, json=comp_body(prompt=ids, echo=True, max_tokens=1,
                                          ignore_eos=True, return_token_ids=True)).json()
    assert body["usage"]["prompt_tokens"] == len(ids)
    assert body["choices"][0]["text"].startswith(text)


def test_completions_stream_echo_first_chunk_is_prompt(http):
    events = parse_sse(http.post(COMP, json=comp_body(prompt="Hi there", echo=True, max_tokens=2,
                                                      ignore_eos=True, stream=True,
                                                      logit_bias={str(HE): 100})).content)
    assert events[0]["choices"][0]["text"] == "Hi there"
    assert "".join(e["choices"][0]["text"] for e in events) == "Hi therehehe"


def test_completions_stream_echo_logprobs_first_chunk(http):
    prompt = "Hi there"
    count = http.post("/tokenize", json={"prompt": prompt}).json()["count"]
    events = parse_sse(http.post(COMP, json=comp_body(prompt=prompt, echo=True, max_tokens=2,
                                                      ignore_eos=True, stream=True, logprobs=1,
                                                      logit_bias={str(HE): 100})).content)
    first = events[0]["choices"][0]
    assert first["text"] == prompt
    assert len(first["logprobs"]["tokens"]) == count
    assert first["logprobs"]["token_logprobs"][0] is None
    offsets = [o for e in events if e["choices"][0]["logprobs"]
               for o in e["choices"][0]["logprobs"]["text_offset"]]
    assert offsets[count:] == [len(prompt), len(prompt) + 2]  # absolute offsets (§6.1)


def test_completions_default_max_tokens_is_16(http):
    body = http.post(COMP, json=comp_body(max_tokens=DROP, ignore_eos=True)).json()
    assert body["usage"]["completion_tokens"] == 16
    assert body["choices"][0]["finish_reason"] == "length"


def test_completions_max_tokens_0_generates_nothing(http):
    body = http.post(COMP, json=comp_body(max_tokens=0)).json()
    assert body["choices"][0]["text"] == ""
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 0


def test_fingerprint_is_stable(http):
    a = http.post(CHAT, json=chat_body()).json()["system_fingerprint"]
    b = http.post(COMP, json=comp_body()).json()["system_fingerprint"]
    assert a == b


def test_sse_headers(http):
    r = http.post(CHAT, json=chat_body(stream=True))
    assert r.status_code == 200
    assert r.headers["content-type"] == SSE_CONTENT_TYPE
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["connection"].lower() == "keep-alive"
    assert r.headers["x-accel-buffering"] == "no"
    assert r.headers["transfer-encoding"].lower() == "chunked"
    parse_sse(r.content)


def test_chat_stream_with_usage_sequence(http):
    body = chat_body(max_tokens=5, ignore_eos=True, stream=True, logit_bias={str(HE): 100},
                     stream_options={"include_usage": True})
    r = http.post(CHAT, json=body)
    assert r.status_code == 200
    events = parse_sse(r.content)
    first = events[0]
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                 "logprobs": None, "finish_reason": None}]
    finish, usage_chunk = events[-2], events[-1]
    assert finish["choices"] == [{"index": 0, "delta": {}, "logprobs": None,
                                  "finish_reason": "length", "stop_reason": None}]
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + 5
    assert set(usage_chunk) == {"id", "object", "created", "model", "system_fingerprint",
                                "choices", "usage"}
    assert len({e["id"] for e in events}) == 1 and ID_RE.match(events[0]["id"])
    assert len({e["created"] for e in events}) == 1
    assert len({e["model"] for e in events}) == 1
    assert len({e["system_fingerprint"] for e in events}) == 1
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    for e in events[:-1]:
        assert len(e["choices"]) == 1
        assert e["usage"] is None
    text = "".join(e["choices"][0]["delta"].get("reasoning_content", "") +
                   (e["choices"][0]["delta"].get("content") or "") for e in events[1:-2])
    assert text == "he" * 5


def test_chat_stream_events_are_compact_json(http):
    r = http.post(CHAT, json=chat_body(max_tokens=4, ignore_eos=True, stream=True,
                                       logit_bias={str(HE): 100}))
    payloads = [block[len("data: "):] for block in r.text.split("\n\n") if block]
    for payload in payloads[:-1]:
        assert payload == compact(json.loads(payload)), payload


def test_chat_stream_without_usage_has_no_usage_key(http):
    r = http.post(CHAT, json=chat_body(max_tokens=4, ignore_eos=True, stream=True))
    events = parse_sse(r.content)
    assert events and all("usage" not in e for e in events)
    assert events[-1]["choices"][0]["finish_reason"] == "length"


def test_chat_stream_include_usage_false_has_no_usage_key(http):
    r = http.post(CHAT, json=chat_body(stream=True, stream_options={"include_usage": False}))
    assert all("usage" not in e for e in parse_sse(r.content))


def test_completions_stream_shape_and_text(http):
    for prompt in ["Hello", "The capital of France is", "def f(x):", "東京", "1, 2, 3,"]:
        full = http.post(COMP, json=comp_body(prompt=prompt, max_tokens=12)).json()
        r = http.post(COMP, json=comp_body(prompt=prompt, max_tokens=12, stream=True,
                                           stream_options={"include_usage": True}))
        assert r.headers["content-type"] == SSE_CONTENT_TYPE
        events = parse_sse(r.content)
        assert all(e["object"] == "text_completion" for e in events)
        assert len({e["id"] for e in events}) == 1 and CMPL_ID_RE.match(events[0]["id"])
        chunks = events[:-1]
        assert all(len(e["choices"]) == 1 and e["usage"] is None for e in chunks)
        assert all("delta" not in e["choices"][0] for e in chunks)  # no role chunk
        finish = chunks[-1]["choices"][0]
        assert finish == {"index": 0, "text": "", "logprobs": None,
                          "finish_reason": full["choices"][0]["finish_reason"],
                          "stop_reason": full["choices"][0]["stop_reason"]}
        for e in chunks[:-1]:
            assert e["choices"][0]["finish_reason"] is None
        assert "".join(e["choices"][0]["text"] for e in chunks) == full["choices"][0]["text"]
        assert events[-1]["choices"] == [] and events[-1]["usage"] == full["usage"]


# ---------------------------------------------------------------------------------------------
# §13.41-45 finish_reason, end tokens, stops
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [CHAT, COMP])
def test_max_tokens_gives_length(http, path):
    make = chat_body if path == CHAT else comp_body
    body = http.post(path, json=make(max_tokens=5, ignore_eos=True)).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["stop_reason"] is None
    assert body["usage"]["completion_tokens"] == 5


def test_max_completion_tokens_wins_over_max_tokens(http):
    body = http.post(CHAT, json=chat_body(max_tokens=6, max_completion_tokens=3,
                                          ignore_eos=True)).json()
    assert body["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("end_token", [IM_END, ENDOFTEXT])
def test_end_token_gives_stop_without_text(http, end_token):
    body = http.post(CHAT, json=chat_body(max_tokens=5, logit_bias={str(end_token): 100})).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["stop_reason"] is None
    assert choice["message"]["content"] == ""
    assert "reasoning_content" not in choice["message"]
    assert body["usage"]["completion_tokens"] == 1  # the end token counts


def test_end_token_text_absent_even_without_skipping_specials(http):
    body = http.post(COMP, json=comp_body(max_tokens=5, skip_special_tokens=False,
                                          logit_bias={str(IM_END): 100})).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] is None
    assert choice["text"] == ""


def test_ignore_eos_continues_past_end_token(http):
    body = http.post(COMP, json=comp_body(max_tokens=4, ignore_eos=True,
                                          logit_bias={str(IM_END): 100})).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 4
    assert "<|im_end|>" not in choice["text"]


def test_min_tokens_masks_end_tokens(http):
    body = http.post(COMP, json=comp_body(max_tokens=8, min_tokens=3,
                                          logit_bias={str(IM_END): 100, str(HE): 50})).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["text"] == "he" * 3
    assert body["usage"]["completion_tokens"] == 4


def test_stop_token_ids_gives_stop_with_the_id(http):
    body = http.post(COMP, json=comp_body(max_tokens=30, stop_token_ids=[RE],
                                          logit_bias={str(HE): 50, str(RE): 40},
                                          frequency_penalty=2)).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop"
    assert choice["stop_reason"] == RE
    assert choice["text"] and not choice["text"].endswith("re")
    assert set(re.findall("..", choice["text"])) == {"he"}
    assert body["usage"]["completion_tokens"] == len(choice["text"]) // 2 + 1


def _alternating(http, first, second, max_tokens=24, **extra):
    """Greedy text from two biased tokens that a frequency penalty makes alternate."""
    return http.post(COMP, json=comp_body(max_tokens=max_tokens, frequency_penalty=2,
                                          logit_bias={str(first): 100, str(second): 94},
                                          **extra)).json()


def test_stop_newline_on_multiline_answer(http):
    full = _alternating(http, HE, NEWLINE)["choices"][0]["text"]
    assert full.count("\n") >= 2 and not full.startswith("\n"), repr(full)
    body = _alternating(http, HE, NEWLINE, stop=["\n"])
    choice = body["choices"][0]
    assert choice["text"] == full.split("\n")[0]
    assert "\n" not in choice["text"]
    assert choice["finish_reason"] == "stop"
    assert choice["stop_reason"] == "\n"


def test_stop_string_spanning_tokens(http):
    full = _alternating(http, HE, RE)["choices"][0]["text"]
    assert "her" in full, full  # "he" + "re": "er" spans the two tokens
    body = _alternating(http, HE, RE, stop="er")
    choice = body["choices"][0]
    assert choice["text"] == full[:full.index("er")]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == "er"


def test_stop_string_spanning_tokens_never_streamed(http):
    full = _alternating(http, HE, RE)["choices"][0]["text"]
    cut = full.index("er")
    r = http.post(COMP, json=comp_body(max_tokens=24, frequency_penalty=2, stop=["er"],
                                       logit_bias={str(HE): 100, str(RE): 94}, stream=True))
    events = parse_sse(r.content)
    texts = [e["choices"][0]["text"] for e in events]
    assert "".join(texts) == full[:cut]  # the "e" of the match was held back, never sent
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["choices"][0]["stop_reason"] == "er"


def test_include_stop_str_in_output(http):
    full = _alternating(http, HE, RE)["choices"][0]["text"]
    body = _alternating(http, HE, RE, stop=["er"], include_stop_str_in_output=True)
    choice = body["choices"][0]
    assert choice["text"] == full[:full.index("er") + 2]
    assert choice["text"].endswith("er")
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == "er"


def test_earliest_stop_string_wins(http):
    full = _alternating(http, HE, RE)["choices"][0]["text"]
    body = _alternating(http, HE, RE, stop=["rehe", "er", "hh"])
    expected_cut = min(full.find(s) for s in ["rehe", "er"] if s in full)
    assert body["choices"][0]["text"] == full[:expected_cut]


def test_stop_in_chat_reasoning_stops_generation(http):
    def run(**extra):
        return http.post(CHAT, json=chat_body(max_tokens=24, frequency_penalty=2,
                                              logit_bias={str(HE): 100, str(RE): 94},
                                              **extra)).json()["choices"][0]
    full = run()
    reasoning = full["message"].get("reasoning_content", "") + full["message"]["content"]
    assert "er" in reasoning
    stopped = run(stop=["er"])
    assert stopped["finish_reason"] == "stop" and stopped["stop_reason"] == "er"
    got = stopped["message"].get("reasoning_content", "") + stopped["message"]["content"]
    assert got == reasoning[:reasoning.index("er")]


def test_stop_does_not_match_prompt_or_echo(http):
    body = http.post(COMP, json=comp_body(prompt="hello there", echo=True, stop=["there"],
                                          max_tokens=3, ignore_eos=True,
                                          logit_bias={str(HE): 100})).json()
    choice = body["choices"][0]
    assert choice["text"] == "hello there" + "he" * 3
    assert choice["finish_reason"] == "length"


# ---------------------------------------------------------------------------------------------
# §13.46-48 logprobs
# ---------------------------------------------------------------------------------------------


def test_completions_logprobs_3(http):
    body = http.post(COMP, json=comp_body(prompt="The weather", max_tokens=8, ignore_eos=True,
                                          logprobs=3)).json()
    lp = body["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    n = len(lp["tokens"])
    assert n == body["usage"]["completion_tokens"] == 8
    assert len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n
    for token, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert 3 <= len(top) <= 4
        assert top[token] == logprob
        assert logprob <= 0
        assert logprob == max(top.values())  # greedy: the chosen token is the most likely
    assert lp["text_offset"][0] == 0
    assert all(a <= b for a, b in zip(lp["text_offset"], lp["text_offset"][1:]))


def test_completions_logprobs_offset_clamped_at_stop(http):
    body = _alternating(http, HE, RE, logprobs=1, stop=["er"])
    choice = body["choices"][0]
    text, lp = choice["text"], choice["logprobs"]
    assert choice["finish_reason"] == "stop"
    # The token that completed the stop string is reported (it counts in usage) ...
    assert len(lp["tokens"]) == body["usage"]["completion_tokens"]
    assert lp["tokens"][-1] == "re"
    # ... and its offset is clamped to the cut text.
    assert lp["text_offset"][-1] == len(text)
    assert lp["text_offset"][:-1] == list(range(0, len(text), 2))


def test_logprobs_are_raw_before_logit_bias(http):
    x = _VOCAB["x"]
    scored = http.post(COMP, json=comp_body(prompt=[x, HE], echo=True, logprobs=0,
                                            max_tokens=0)).json()
    raw = scored["choices"][0]["logprobs"]["token_logprobs"][1]
    forced = http.post(COMP, json=comp_body(prompt=[x], max_tokens=1, logprobs=0,
                                            temperature=0.7, ignore_eos=True,
                                            logit_bias={str(HE): 100})).json()
    lp = forced["choices"][0]["logprobs"]
    assert lp["tokens"] == ["he"]
    assert lp["token_logprobs"][0] == pytest.approx(raw, abs=1e-3)
    assert raw < -0.5  # the bias made a token likely that the model itself is not sure of


def test_completions_logprobs_0_holds_only_chosen(http):
    body = http.post(COMP, json=comp_body(max_tokens=3, ignore_eos=True, logprobs=0)).json()
    lp = body["choices"][0]["logprobs"]
    assert [list(top) for top in lp["top_logprobs"]] == [[t] for t in lp["tokens"]]


def test_completions_logprobs_exclude_terminating_end_token(http):
    body = http.post(COMP, json=comp_body(max_tokens=6, min_tokens=2, logprobs=1,
                                          logit_bias={str(IM_END): 100})).json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 3
    assert len(body["choices"][0]["logprobs"]["tokens"]) == 2


def test_completions_logprobs_token_strings(http):
    body = http.post(COMP, json=comp_body(max_tokens=3, ignore_eos=True, logprobs=1,
                                          logit_bias={str(HE): 100})).json()
    assert body["choices"][0]["logprobs"]["tokens"] == ["he", "he", "he"]
    assert body["choices"][0]["logprobs"]["text_offset"] == [0, 2, 4]


def test_echo_scoring(http):
    prompt = "The quick brown fox"
    count = http.post("/tokenize", json={"prompt": prompt}).json()["count"]
    body = http.post(COMP, json=comp_body(prompt=prompt, echo=True, logprobs=1,
                                          max_tokens=0)).json()
    choice = body["choices"][0]
    assert choice["text"] == prompt
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 0
    assert body["usage"]["prompt_tokens"] == count
    lp = choice["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == \
        len(lp["text_offset"]) == count
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(v is not None and v <= 0 for v in lp["token_logprobs"][1:])
    assert lp["text_offset"][0] == 0
    assert "".join(lp["tokens"]) == prompt


def test_echo_without_logprobs_prefixes_prompt(http):
    body = http.post(COMP, json=comp_body(prompt="Hi there", echo=True, max_tokens=2,
                                          ignore_eos=True, logit_bias={str(HE): 100})).json()
    assert body["choices"][0]["text"] == "Hi therehehe"


def test_chat_logprobs_top_2(http):
    body = http.post(CHAT, json=chat_body(max_tokens=6, ignore_eos=True, logprobs=True,
                                          top_logprobs=2)).json()
    choice = body["choices"][0]
    assert set(choice["logprobs"]) == {"content", "refusal"}
    assert choice["logprobs"]["refusal"] is None
    entries = choice["logprobs"]["content"]
    assert len(entries) == body["usage"]["completion_tokens"] == 6
    for e in entries:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"}
        assert e["logprob"] <= 0
        assert len(e["top_logprobs"]) == 2
        for alt in e["top_logprobs"]:
            assert set(alt) == {"token", "logprob", "bytes"}
        tops = [alt["logprob"] for alt in e["top_logprobs"]]
        assert tops == sorted(tops, reverse=True)
        assert e["logprob"] == tops[0]  # temperature 0: the chosen token is the most likely


def test_chat_logprobs_bytes_are_exact(http):
    # Force known tokens: "he" and then the byte tokens of whatever the model prefers next.
    body = http.post(CHAT, json=chat_body(max_tokens=4, ignore_eos=True, logprobs=True,
                                          top_logprobs=1, logit_bias={str(HE): 100},
                                          return_token_ids=True)).json()
    choice = body["choices"][0]
    entries = choice["logprobs"]["content"]
    assert [e["token"] for e in entries] == ["he"] * 4
    assert all(e["bytes"] == list(b"he") for e in entries)
    free = http.post(CHAT, json=chat_body(max_tokens=8, ignore_eos=True, logprobs=True,
                                          top_logprobs=2, return_token_ids=True)).json()
    choice = free["choices"][0]
    for token_id, e in zip(choice["token_ids"], choice["logprobs"]["content"]):
        assert bytes(e["bytes"]) == token_bytes(token_id)
        assert e["token"] == token_string(token_id)


def test_chat_stream_logprobs_concatenate_to_non_streaming(http):
    body = chat_body(max_tokens=6, ignore_eos=True, logprobs=True, top_logprobs=1)
    full = http.post(CHAT, json=body).json()["choices"][0]["logprobs"]["content"]
    events = parse_sse(http.post(CHAT, json={**body, "stream": True}).content)
    streamed = []
    for e in events:
        lp = e["choices"][0]["logprobs"]
        if lp is not None:
            assert lp["refusal"] is None
            streamed += lp["content"]
    assert streamed == full


# ---------------------------------------------------------------------------------------------
# §13.49-50 n > 1 and several prompts
# ---------------------------------------------------------------------------------------------


def test_n_3_non_streaming(http):
    one = http.post(CHAT, json=chat_body(max_tokens=3, ignore_eos=True)).json()
    body = http.post(CHAT, json=chat_body(max_tokens=3, ignore_eos=True, n=3,
                                          return_token_ids=True)).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2]
    assert body["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]  # counted once
    assert body["usage"]["completion_tokens"] == sum(len(c["token_ids"]) for c in body["choices"])
    assert body["usage"]["completion_tokens"] == 9
    # Temperature 0: all choices are identical (§7).
    assert len({json.dumps(c["message"]) for c in body["choices"]}) == 1


def test_n_2_streaming_role_and_finish_per_index(http):
    events = parse_sse(http.post(CHAT, json=chat_body(max_tokens=3, ignore_eos=True, n=2,
                                                      stream=True)).content)
    for index in (0, 1):
        mine = [e["choices"][0] for e in events if e["choices"][0]["index"] == index]
        roles = [c for c in mine if c["delta"].get("role")]
        finishes = [c for c in mine if c["finish_reason"] is not None]
        assert roles == [mine[0]]
        assert mine[0]["delta"] == {"role": "assistant", "content": ""}
        assert finishes == [mine[-1]]
        assert mine[-1]["finish_reason"] == "length" and mine[-1]["delta"] == {}
    assert all(len(e["choices"]) == 1 for e in events)


def test_completions_prompts_times_n_indexing(http):
    prompts = ["Hello", "東京"]
    counts = [http.post("/tokenize", json={"prompt": p}).json()["count"] for p in prompts]
    body = http.post(COMP, json=comp_body(prompt=prompts, n=2, max_tokens=2, ignore_eos=True,
                                          echo=True)).json()
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    # index = p * n + j: choices 0-1 belong to prompt 0, 2-3 to prompt 1 (echo shows which).
    assert [c["text"].startswith(prompts[c["index"] // 2]) for c in body["choices"]] == [True] * 4
    assert body["usage"]["prompt_tokens"] == sum(counts)
    assert body["usage"]["completion_tokens"] == 8


def test_completions_stream_several_prompts(http):
    events = parse_sse(http.post(COMP, json=comp_body(prompt=["a", "b"], n=2, max_tokens=2,
                                                      ignore_eos=True, stream=True)).content)
    finishes = sorted(e["choices"][0]["index"] for e in events
                      if e["choices"][0]["finish_reason"] is not None)
    assert finishes == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------------------
# §13.14, 55, 56 and /slots under load: a server with 2 rows
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def busy_server():
    s = Server("--max-batch", "2")
    yield s
    assert s.stop() == 0


def _open_streams(url, bodies):
    streams = []
    try:
        for body in bodies:
            streams.append(SSEStream(url, CHAT, body))
    except Exception:
        for s in streams:
            s.close()
        raise
    return streams


def test_two_rows_three_streams_running_2_waiting_1(busy_server):
    url = busy_server.url
    wait_idle(url)
    streams = _open_streams(url, [long_chat_body() for _ in range(3)])
    try:
        for s in streams[:2]:
            s.read_until(has_text)
        wait_until(lambda: gauge(url, "megadecode_num_requests_running") == 2 and
                   gauge(url, "megadecode_num_requests_waiting") == 1,
                   what="running 2, waiting 1")
        health = httpx.get(url + "/health").json()
        assert health["status"] == "ok"
        assert all(s.response.status_code == 200 for s in streams)
        # §3.4: headers and the role chunk go out on admission to the queue, before a row.
        role = streams[2].next_event()
        assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert gauge(url, "megadecode_num_requests_waiting") == 1
    finally:
        for s in streams:
            s.close()
    wait_idle(url, 5)


def test_slots_while_busy(busy_server):
    url = busy_server.url
    wait_idle(url)
    prompt_tokens = httpx.post(url + "/tokenize", json={"messages": MESSAGES}).json()["count"]
    streams = _open_streams(url, [long_chat_body(), long_chat_body()])
    try:
        ids = set()
        for s in streams:
            ids.add(s.read_until(has_text)["id"])
        slots = httpx.get(url + "/slots").json()
        assert [s["id"] for s in slots] == [0, 1]
        assert all(s["is_processing"] for s in slots)
        assert {s["request_id"] for s in slots} == ids
        for s in slots:
            assert s["n_prompt_tokens"] == prompt_tokens
            assert s["n_decoded"] >= 1
            assert set(s["params"]) == {"temperature", "top_p", "max_tokens"}
            assert s["params"]["max_tokens"] == LONG
            assert s["params"]["temperature"] == 0
        r = httpx.get(url + "/slots", params={"fail_on_no_slot": "1"})
        assert r.status_code == 503
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    finally:
        for s in streams:
            s.close()
    wait_idle(url, 5)


def test_slots_params_hide_the_request_seed(busy_server):
    url = busy_server.url
    wait_idle(url)
    streams = _open_streams(url, [long_chat_body(seed=11), long_chat_body(seed=12)])
    try:
        for s in streams:
            s.read_until(has_text)
        slots = httpx.get(url + "/slots").json()
        # A seed would let anyone who reads /slots replay another user's sampled reply.
        assert all(s["is_processing"] and "seed" not in s["params"] for s in slots)
    finally:
        for s in streams:
            s.close()
    wait_idle(url, 5)


def test_disconnect_cancels_running_stream(busy_server):
    url = busy_server.url
    wait_idle(url)
    before = metric(metrics_text(url), "megadecode_requests_finished_total",
                    {"finished_reason": "abort"})
    stream = SSEStream(url, COMP, long_comp_body())
    stream.read_until(has_text)
    assert gauge(url, "megadecode_num_requests_running") == 1
    stream.close()
    t0 = time.monotonic()
    wait_until(lambda: gauge(url, "megadecode_num_requests_running") == 0, 1.0, 0.02,
               "running to drop within 1 s of the disconnect")
    wait_until(lambda: metric(metrics_text(url), "megadecode_requests_finished_total",
                              {"finished_reason": "abort"}) == before + 1,
               max(0.1, 1.0 - (time.monotonic() - t0)), 0.02, "abort counter +1")
    time.sleep(0.2)  # nothing else finishes as an abort afterwards
    assert metric(metrics_text(url), "megadecode_requests_finished_total",
                  {"finished_reason": "abort"}) == before + 1


def test_disconnect_starts_queued_request_at_once(busy_server):
    url = busy_server.url
    wait_idle(url)
    running = [SSEStream(url, COMP, long_comp_body()) for _ in range(2)]
    queued = None
    try:
        for s in running:
            s.read_until(has_text)
        queued = SSEStream(url, COMP, long_comp_body())
        wait_until(lambda: gauge(url, "megadecode_num_requests_waiting") == 1, what="one waiting")
        running[0].close()
        t0 = time.monotonic()
        queued.read_until(has_text)
        assert time.monotonic() - t0 < 1.0
        assert gauge(url, "megadecode_num_requests_waiting") == 0
    finally:
        for s in running + ([queued] if queued else []):
            s.close()
    wait_idle(url, 5)


def test_queued_non_streaming_disconnect_leaves_queue(busy_server):
    url = busy_server.url
    wait_idle(url)
    running = [SSEStream(url, COMP, long_comp_body()) for _ in range(2)]
    try:
        for s in running:
            s.read_until(has_text)
        body = json.dumps(comp_body(prompt="x", max_tokens=LONG, ignore_eos=True)).encode()
        sock = socket.create_connection(("127.0.0.1", busy_server.port), timeout=10)
        sock.sendall(post_bytes(COMP, body))
        wait_until(lambda: gauge(url, "megadecode_num_requests_waiting") == 1,
                   what="the non-streaming request to queue")
        sock.close()
        wait_until(lambda: gauge(url, "megadecode_num_requests_waiting") == 0, 1.0, 0.02,
                   "waiting to drop within 1 s of the disconnect")
        running[0].close()
        time.sleep(0.3)  # a row is free now; the abandoned request must not take it
        assert gauge(url, "megadecode_num_requests_running") == 1
    finally:
        for s in running:
            s.close()
    wait_idle(url, 5)


# ---------------------------------------------------------------------------------------------
# §13.57 queue full: 1 row, queue of 1
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tight_server():
    s = Server("--max-batch", "1", "--max-queue", "1")
    yield s
    assert s.stop() == 0


QUEUE_FULL = error_body("queue_full",
                        "The server is busy: 1 requests are waiting (limit 1). Retry later.",
                        type_="rate_limit_error")


@pytest.mark.parametrize("stream", [False, True])
def test_queue_full_is_429(tight_server, stream):
    url = tight_server.url
    wait_idle(url)
    first = SSEStream(url, COMP, long_comp_body())
    second = None
    try:
        first.read_until(has_text)
        second = SSEStream(url, COMP, long_comp_body())
        wait_until(lambda: gauge(url, "megadecode_num_requests_waiting") == 1, what="one waiting")
        t0 = time.monotonic()
        r = httpx.post(url + CHAT, json=chat_body(stream=stream), timeout=10)
        assert time.monotonic() - t0 < 1.0
        assert r.status_code == 429
        assert_json_content_type(r)
        assert r.json() == QUEUE_FULL
        assert r.headers["retry-after"] == "1"
    finally:
        first.close()
        if second:
            second.close()
    wait_idle(url, 5)


# ---------------------------------------------------------------------------------------------
# §13.54 engine fault after the stream started
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fault_server():
    s = Server("--test-fault-after-tokens", "5")
    yield s
    assert s.stop() == 0


@pytest.mark.parametrize("path", [CHAT, COMP])
def test_fault_mid_stream_is_in_band_error(fault_server, path):
    make = chat_body if path == CHAT else comp_body
    r = httpx.post(fault_server.url + path, json=make(max_tokens=20, ignore_eos=True, stream=True,
                                                      logit_bias={str(HE): 100}), timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"] == SSE_CONTENT_TYPE
    assert r.text.endswith("data: [DONE]\n\n")
    blocks = [b for b in r.text.split("\n\n") if b and b != ": ping"]
    payloads = [json.loads(b[len("data: "):]) for b in blocks[:-1]]
    error = payloads[-1]
    assert list(error) == ["error"]
    assert list(error["error"]) == ["message", "type", "param", "code"]
    assert error["error"]["type"] == "server_error"
    assert error["error"]["code"] == "internal_error"
    assert error["error"]["param"] is None
    # The client gets the request id, the server's log the cause under it.
    request_id = r.headers["x-request-id"]
    assert error["error"]["message"] == (f"Internal server error (request id {request_id}); "
                                         "the server's log has the cause.")
    assert f"request {request_id}: internal error:" in fault_server.output()
    for p in payloads[:-1]:  # no finish chunk for the cancelled choice
        assert all(c.get("finish_reason") is None for c in p["choices"])


def test_fault_non_streaming_is_500(fault_server):
    r = httpx.post(fault_server.url + CHAT, json=chat_body(max_tokens=20, ignore_eos=True),
                   timeout=30)
    error = assert_error(r, 500, "internal_error", param=None, type_="server_error")
    request_id = r.headers["x-request-id"]
    assert error["message"] == (f"Internal server error (request id {request_id}); "
                                "the server's log has the cause.")
    assert f"request {request_id}: internal error:" in fault_server.output()


def test_fault_counts_as_error(fault_server):
    url = fault_server.url
    before = metric(metrics_text(url), "megadecode_requests_finished_total",
                    {"finished_reason": "error"})
    httpx.post(url + COMP, json=comp_body(max_tokens=20, ignore_eos=True), timeout=30)
    assert metric(metrics_text(url), "megadecode_requests_finished_total",
                  {"finished_reason": "error"}) == before + 1


# ---------------------------------------------------------------------------------------------
# Graceful shutdown (§10)
# ---------------------------------------------------------------------------------------------

SHUTTING_DOWN = error_body("shutting_down", "The server is shutting down.",
                           type_="unavailable_error")


def _sigterm_and_wait_for_drain(server):
    server.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: httpx.get(server.url + "/health", timeout=5).status_code == 503, 2.0,
               0.02, "/health to report the drain")


def test_sigterm_lets_running_stream_finish_and_exits_0():
    server = Server("--max-batch", "2")
    try:
        stream = SSEStream(server.url, CHAT, long_chat_body(max_tokens=2500))
        stream.read_until(has_text)
        _sigterm_and_wait_for_drain(server)
        health = httpx.get(server.url + "/health", timeout=5)
        assert health.json() == SHUTTING_DOWN and health.headers["retry-after"] == "5"
        new = httpx.post(server.url + CHAT, json=chat_body(), timeout=5)
        assert new.status_code == 503 and new.json() == SHUTTING_DOWN
        events = stream.read_to_end()
        assert stream.done
        last = events[-1]["choices"][0]
        assert last["finish_reason"] == "length"
        stream.close()
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.stop()


def test_sigterm_past_grace_sends_in_band_shutting_down():
    server = Server("--shutdown-grace", "0.5")
    try:
        stream = SSEStream(server.url, CHAT, long_chat_body(max_tokens=4000))
        stream.read_until(has_text)
        server.proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        while stream.next_payload() not in (None, "[DONE]"):
            pass
        assert stream.done, "the stream must end with data: [DONE]"
        assert time.monotonic() - t0 < 5
        error = stream.events[-1]
        assert list(error) == ["error"]
        assert error["error"]["code"] == "shutting_down"
        assert error["error"]["type"] == "server_error"
        assert error["error"]["param"] is None
        assert all(c.get("finish_reason") is None for e in stream.events[:-1]
                   for c in e["choices"])
        stream.close()
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.stop()


def test_sigterm_past_grace_non_streaming_gets_503():
    server = Server("--shutdown-grace", "0.5")
    try:
        result = {}

        def call():
            result["r"] = httpx.post(server.url + CHAT,
                                     json=chat_body(max_tokens=4000, ignore_eos=True,
                                                    logit_bias={str(HE): 100}), timeout=30)

        worker = threading.Thread(target=call)
        worker.start()
        wait_until(lambda: gauge(server.url, "megadecode_num_requests_running") == 1,
                   what="the request to run")
        server.proc.send_signal(signal.SIGTERM)
        worker.join(timeout=15)
        assert not worker.is_alive()
        r = result["r"]
        assert r.status_code == 503
        assert r.json() == SHUTTING_DOWN
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.stop()
