"""The built-in chat page (GET /) in a real browser: headless Chromium (Debian's
chromium-headless-shell) driven by Playwright. It loads from `megadecode serve`, streams an
answer, stops one, sends the settings, asks for the API key when the server wants one, and stays
usable on a phone-sized window. The fixture model is random, so the checks are about the page,
not the text."""
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import Server, metric

playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                                 "(scripts/setup puts it in .venv)")
CHROMIUM = shutil.which("chromium-headless-shell") or shutil.which("chromium")
if CHROMIUM is None:
    pytest.skip("no Chromium: scripts/setup installs Debian's chromium-headless-shell",
                allow_module_level=True)
MODEL = "tiny-qwen38"
# Requests the page sends are made to run long (the random model may end at once): the page's
# own fields stay as it wrote them.
LONG = {"ignore_eos": True, "max_tokens": 20000}


@pytest.fixture(scope="module")
def browser():
    # What runs in the browser is the page's own script: the server side under the sanitizers is
    # the one static route, which test_serves_one_self_contained_file requests.
    if os.environ.get("MD_E2E_SANITIZED"):
        pytest.skip("the page in a browser adds no server code under the sanitizers")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def open_page(browser, url, sent=None, long=False, bypass_csp=True, **context):
    # The page's Content-Security-Policy forbids string evaluation, which Playwright's
    # wait_for_function uses; the page itself needs none (test_works_under_its_own_policy).
    page = browser.new_context(bypass_csp=bypass_csp, **context).new_page()

    def on_chat(route):
        body = json.loads(route.request.post_data)
        if sent is not None:
            sent.append(dict(body))
        if long:
            body.update(LONG)
        route.continue_(post_data=json.dumps(body))

    page.route("**/v1/chat/completions", on_chat)
    page.goto(url + "/")
    return page


def reasoning_length(page):
    return page.evaluate("(document.querySelector('.turn.assistant .reasoning') || "
                         "{textContent: ''}).textContent.length + document.querySelector("
                         "'.turn.assistant .text').textContent.length")


def test_serves_one_self_contained_file(http):
    r = http.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in r.headers["content-security-policy"]
    for reference in ["http://", "https://", "src=", "<link"]:
        assert reference not in r.text
    assert http.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 200


def test_works_under_its_own_policy(browser, server):
    page = open_page(browser, server.url, bypass_csp=False)
    console = []
    page.on("console", lambda m: console.append(m.text))
    page.reload()
    page.locator("#model", has_text=MODEL).wait_for()
    page.get_by_label("Message").fill("Hello")
    page.keyboard.press("Enter")
    page.locator(".turn.assistant .stats").wait_for()
    assert page.locator(".turn.error").count() == 0
    assert not [m for m in console if "Content Security Policy" in m], console
    page.context.close()


def test_streams_an_answer_and_stops_one(browser, server, http):
    page = open_page(browser, server.url, long=True)
    page.wait_for_function(f"document.getElementById('model').textContent === '{MODEL}'")
    aborts = metric(http.get("/metrics").text, "megadecode_requests_finished_total",
                    {"finished_reason": "abort"})
    page.get_by_label("Message").fill("Hello there")
    page.keyboard.press("Enter")
    stop = page.get_by_role("button", name="Stop")
    # Text arrives while the request still runs: the stream is shown as it comes.
    page.wait_for_function("document.getElementById('stop').disabled === false && "
                           "document.querySelector('.turn.assistant .reasoning') !== null")
    first = reasoning_length(page)
    deadline = time.monotonic() + 30
    while reasoning_length(page) <= first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reasoning_length(page) > first and stop.is_enabled()
    stop.click()
    page.wait_for_selector(".turn.assistant .stats")
    assert "stopped" in page.inner_text(".turn.assistant .stats")
    assert page.get_by_role("button", name="Send").is_enabled() and not stop.is_enabled()
    # The server saw the disconnect and freed the row.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = metric(http.get("/metrics").text, "megadecode_requests_finished_total",
                     {"finished_reason": "abort"})
        if now == aborts + 1:
            break
        time.sleep(0.05)
    assert now == aborts + 1
    shot = Path(os.environ.get("TMPDIR", "/tmp")) / f"md-chat-page-{os.getpid()}.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    page.context.close()


def test_sends_the_settings_and_the_conversation(browser, server):
    sent = []
    page = open_page(browser, server.url, sent=sent)
    page.wait_for_function(f"document.getElementById('model').textContent === '{MODEL}'")
    page.get_by_text("Settings").click()
    page.get_by_label("System prompt").fill("You are terse.")
    page.get_by_label("Temperature").fill("0.3")
    page.get_by_label("Max tokens").fill("8")
    for answered, text in enumerate(["First question", "Second question"], start=1):
        page.get_by_label("Message").fill(text)
        page.get_by_role("button", name="Send").click()
        page.wait_for_function(f"document.querySelectorAll('.turn .stats').length === {answered}")
    assert len(sent) == 2
    assert sent[0]["messages"] == [{"role": "system", "content": "You are terse."},
                                   {"role": "user", "content": "First question"}]
    assert sent[0]["temperature"] == 0.3 and sent[0]["max_tokens"] == 8
    assert sent[0]["stream"] is True and sent[0]["model"] == MODEL
    roles = [m["role"] for m in sent[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert sent[1]["messages"][3]["content"] == "Second question"
    assert "tokens" in page.inner_text(".turn.assistant .stats")
    page.context.close()


def test_asks_for_the_api_key(browser):
    server = Server("--api-key", "sesame")
    try:
        page = open_page(browser, server.url)
        page.wait_for_function("document.getElementById('model').textContent.includes('API key')")
        key = page.get_by_label("API key")
        assert key.is_visible()
        key.fill("sesame")
        key.dispatch_event("change")
        page.get_by_label("Message").fill("Hello")
        page.keyboard.press("Enter")
        page.wait_for_selector(".turn.assistant .stats")
        assert not page.locator(".turn.error").count()
        assert page.inner_text("#model") == MODEL
        page.context.close()
    finally:
        assert server.stop() == 0, server.output()


def test_fits_a_phone_and_works_from_the_keyboard(browser, server):
    page = open_page(browser, server.url, viewport={"width": 360, "height": 740})
    page.wait_for_function(f"document.getElementById('model').textContent === '{MODEL}'")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.get_by_role("log").count() == 1
    # The message box has focus on load; Enter sends, Shift+Enter is a new line.
    page.keyboard.type("line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two")
    assert page.get_by_label("Message").input_value() == "line one\nline two"
    page.keyboard.press("Enter")
    page.wait_for_selector(".turn.assistant .stats")
    assert page.inner_text(".turn.user .text") == "line one\nline two"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.context.close()
