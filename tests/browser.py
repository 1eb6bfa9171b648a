"""A report page as a person's browser lays it out: Debian's headless Chromium driven through chromedriver's
W3C WebDriver protocol (plain JSON over HTTP, so no client library is needed).

``measure(page, width)`` opens ``page`` at ``width`` CSS pixels and returns what the report's browser test
checks: the page's height and widest element, which images failed to load, where the summary and the ledger
start, and whether each ledger verdict lies inside the screen. ``python -m tests.browser PAGE`` prints it at
390 and 1400 px, and saves screenshots with ``--shots DIR``.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver",)

# Runs in the page once it has loaded: every figure's <img> must have decoded, and each verdict cell
# (class "verdict" in the ledger) must lie inside the viewport's width.
_PROBE = """
const doc = document.documentElement;
const top = el => el ? el.getBoundingClientRect().top + window.scrollY : null;
const bottom = el => el ? el.getBoundingClientRect().bottom + window.scrollY : null;
const verdicts = [...document.querySelectorAll('#ledger-table td.verdict')];
return {
  width: window.innerWidth,
  height: Math.max(doc.scrollHeight, document.body.scrollHeight),
  scroll_width: Math.max(doc.scrollWidth, document.body.scrollWidth),
  images: document.images.length,
  broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0))
                              .map(i => i.alt || i.src.slice(0, 60)),
  summary_top: top(document.getElementById('summary')),
  ledger_top: top(document.getElementById('ledger')),
  ledger_bottom: bottom(document.getElementById('ledger-table')),
  first_figure_top: top(document.querySelector('#summary-table tbody td:nth-child(2)')),
  verdicts: verdicts.length,
  verdicts_on_screen: verdicts.filter(v => {
    const r = v.getBoundingClientRect();
    return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth + 0.5;
  }).length,
};
"""


def find(names) -> str | None:
    return next((p for p in map(shutil.which, names) if p), None)


def available() -> str | None:
    """Why the browser check cannot run here, or None when it can."""
    missing = [what for what, names in (("chromium", CHROMIUM), ("chromedriver", DRIVER)) if not find(names)]
    if not missing:
        return None
    return f"{' and '.join(missing)} not installed (Debian: apt-get install chromium chromium-driver)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Driver:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.session = ""

    def call(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.load(resp)["value"]

    def s(self, method: str, path: str, body: dict | None = None):
        return self.call(method, f"/session/{self.session}{path}", body)


@contextmanager
def browser(width: int, height: int = 900):
    """A headless Chromium window ``width`` CSS pixels wide (device scale 1), through chromedriver."""
    port = _free_port()
    proc = subprocess.Popen([find(DRIVER), f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    d = _Driver(port)
    try:
        for _ in range(100):
            try:
                d.call("GET", "/status")
                break
            except OSError:
                time.sleep(0.1)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                f"--window-size={width},{height}", "--force-device-scale-factor=1"]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": find(CHROMIUM), "args": args,
            # a phone's width in CSS pixels: the page lays out as on a 390 px screen
            **({"mobileEmulation": {"deviceMetrics": {"width": width, "height": height, "pixelRatio": 1}}}
               if width < 600 else {})}}}}
        d.session = d.call("POST", "/session", caps)["sessionId"]
        yield d
    finally:
        if d.session:
            try:
                d.call("DELETE", f"/session/{d.session}")
            except OSError:
                pass
        proc.terminate()
        proc.wait(timeout=10)


def measure(page: str | Path, width: int, shot: str | Path | None = None) -> dict:
    """What the report's browser test checks of ``page`` at ``width`` px (see ``_PROBE``)."""
    url = Path(page).resolve().as_uri()
    with browser(width) as d:
        d.s("POST", "/url", {"url": url})
        for _ in range(100):  # the images are inline data: wait until each has decoded or failed
            if d.s("POST", "/execute/sync", {"script": "return [...document.images].every(i => i.complete)",
                                              "args": []}):
                break
            time.sleep(0.1)
        out = d.s("POST", "/execute/sync", {"script": _PROBE, "args": []})
        if shot:  # the whole page, not the window: Chromium's own capture beyond the viewport
            png = d.s("POST", "/goog/cdp/execute", {"cmd": "Page.captureScreenshot", "params": {
                "captureBeyondViewport": True, "clip": {"x": 0, "y": 0, "width": width, "height": out["height"],
                                                         "scale": 1}}})["data"]
            Path(shot).write_bytes(base64.b64decode(png))
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 1:
        print("usage: python -m tests.browser PAGE.html [--shots DIR]", file=sys.stderr)
        return 2
    if why := available():
        print(f"tests.browser: {why}", file=sys.stderr)
        return 2
    shots = Path(argv[argv.index("--shots") + 1]) if "--shots" in argv else None
    for width in (390, 1400):
        shot = shots / f"report-{width}.png" if shots else None
        if shots:
            shots.mkdir(parents=True, exist_ok=True)
        print(width, json.dumps(measure(argv[0], width, shot)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
