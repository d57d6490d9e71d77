"""Takes the README's screenshot of the built-in chat page (docs/chat-page.png): starts
`megadecode serve` on the default model, asks one question through the page in headless
Chromium (as tests/e2e/test_chat_page.py drives it), and saves the window once the answer is in.

    .venv/bin/python tools/chat_page_screenshot.py [--out docs/chat-page.png]
"""
import argparse
import re
import shutil
import subprocess
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "In two sentences: why is the sky blue?"


def start_server():
    cmd = [str(ROOT / "build/release/bin/megadecode"), "serve", "--port", "0", "--threads", "2",
           "--model", str(ROOT / ".models/SmolLM2-135M-Instruct.Q4_1.gguf")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    for line in proc.stdout:
        port = port or (re.search(r"listening on http://127\.0\.0\.1:(\d+)", line) or [None, None])[1]
        if "megadecode serve: ready" in line:
            return proc, f"http://127.0.0.1:{port}"
    raise RuntimeError("megadecode serve exited before it was ready")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs/chat-page.png"))
    args = parser.parse_args()
    proc, url = start_server()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium-headless-shell"),
                                        args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 900, "height": 560})
            page.goto(url + "/")
            page.wait_for_selector("#model:not(:empty)")
            page.get_by_text("Settings").click()
            page.get_by_label("Temperature").fill("0")
            page.get_by_text("Settings").click()
            page.get_by_label("Message").fill(QUESTION)
            page.keyboard.press("Enter")
            page.wait_for_selector(".turn.assistant .stats", timeout=120_000)
            time.sleep(0.2)
            page.screenshot(path=args.out)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(args.out)


if __name__ == "__main__":
    main()
