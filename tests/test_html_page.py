"""The step-through page in a real headless Chromium, driven over the DevTools protocol.

Chromium is started with ``--remote-debugging-pipe``: DevTools commands are JSON
messages on file descriptor 3 and replies come back on 4, each ended by a NUL
byte, so no websocket client is needed.  The test presses the Next button (a real
mouse click) and the arrow keys through every step and compares the numbers the
page shows with the derivation's stages (rows picked here by position) and with
an independent float64 forward pass.  Screenshots land in
``$SYMFORMER_SCREENSHOTS`` when that is set, for a human to look at.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from float_reference import float_forward

from symformer import derive, load_example
from symformer.trace import render, trace_token

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe", "--window-size=1100,900"]


class Browser:
    """A minimal DevTools-protocol client over Chromium's debugging pipe."""

    def __init__(self, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def fds() -> None:  # the protocol's fixed descriptors: 3 in, 4 out
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                                      "about:blank"], preexec_fn=fds, pass_fds=(3, 4),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._id = 0
        self.session: str | None = None

    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
        raise TimeoutError(method)

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the debugging pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def open(self, url: str, target: str | None = None) -> None:
        """Load ``url`` in the first tab (or in tab ``target``) and talk to that tab."""
        if target is None:
            targets = self.send("Target.getTargets", session=False)["targetInfos"]
            target = next(t for t in targets if t["type"] == "page")["targetId"]
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Page.navigate", {"url": url})
        for _ in range(100):
            if self.eval("document.readyState") == "complete" and self.eval(
                    "!!document.querySelector('section.step')"):
                return
            time.sleep(0.05)
        raise TimeoutError("page did not load")

    @contextlib.contextmanager
    def tab(self, url: str):
        """``url`` in a new tab of the same Chromium (one launch serves the file); the
        previous tab is talked to again afterwards."""
        previous = self.session
        target = self.send("Target.createTarget", {"url": "about:blank"},
                           session=False)["targetId"]
        try:
            self.open(url, target)
            yield self
        finally:
            self.session = previous
            self.send("Target.closeTarget", {"targetId": target}, session=False)

    def eval(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        box = self.eval(f"(function(){{var r=document.querySelector({selector!r})"
                        ".getBoundingClientRect();return [r.x+r.width/2,r.y+r.height/2];})()")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1],
                                                   "button": "left", "clickCount": 1})

    def key(self, key: str, code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key,
                                                 "windowsVirtualKeyCode": code})

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to_child)
        os.close(self._from_child)


SHOWN = """(function(){
  var s = Array.prototype.filter.call(document.querySelectorAll('section.step'),
                                      function(x){ return !x.hidden; });
  if (s.length !== 1) return {visible: s.length};
  var cur = document.querySelector('nav.block li.current');
  return {visible: 1, index: +s[0].dataset.index, stage: s[0].dataset.stage,
          part: s[0].dataset.part, current: cur ? cur.dataset.part : null,
          counter: document.getElementById('counter').textContent,
          values: Array.prototype.map.call(s[0].querySelectorAll('table.row td.value'),
                                           function(td){ return td.textContent; }),
          heat: s[0].querySelectorAll('td.heat').length,
          maths: s[0].querySelectorAll('math').length,
          mathWidth: s[0].querySelector('math') ?
              s[0].querySelector('math').getBoundingClientRect().width : 0,
          hash: location.hash};
})()"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The causal trace of "think" as a page, opened in Chromium."""
    g = derive(load_example(), causal=True)
    trace = trace_token(g, "think", decimals=3)
    directory = tmp_path_factory.mktemp("page")
    path = directory / "think.html"
    path.write_text(render(trace, "html"), encoding="utf-8")
    browser = Browser(directory / "profile")
    try:
        browser.open(path.as_uri())
        yield browser, g, trace
    finally:
        browser.close()


def test_next_button_and_arrow_keys_walk_every_step(page):
    browser, g, trace = page
    reference = float_forward(g.example, causal=True)
    shots = os.environ.get("SYMFORMER_SCREENSHOTS")
    seen_stages = []
    total = len(trace.steps)
    for n in range(1, total + 1):
        shown = browser.eval(SHOWN)
        assert shown["visible"] == 1 and shown["index"] == n
        assert shown["counter"] == f"Step {n} of {total}"
        assert shown["hash"] == f"#step-{n}"
        assert shown["current"] == shown["part"]  # the block diagram follows the step
        assert shown["maths"] >= 1 and shown["mathWidth"] > 10  # MathML laid out
        stage = g[shown["stage"]]
        # The page shows the token's row of the stage: position 1 ("think").
        # true minus signs (U+2212), never a hyphen; an integer stage as integers
        assert not any(v.startswith("-") for v in shown["values"])
        values = [v.replace("\u2212\u221e", "-inf").replace("\u2212", "-")
                  for v in shown["values"]]
        assert [v if "." in v or v == "-inf" else f"{v}.000" for v in values] == \
            stage.values(decimals=3)[1]
        expected = reference[shown["stage"]][1]
        for text, value in zip(values, expected):
            if text == "-inf":
                assert value == float("-inf")
            else:
                assert abs(float(text) - value) <= 0.0005 + 1e-9
        if stage.kind == "weights":
            assert shown["heat"] == 2  # causal: "think" sees keys 0 and 1 only
        seen_stages.append(shown["stage"])
        if shots and stage.kind in ("weights", "layer_norm", "ffn_activation"):
            browser.screenshot(Path(shots) / f"step-{n:02d}.png")
        if n < total:  # alternate a real click on Next and the right arrow key
            if n % 2:
                browser.click("#next")
            else:
                browser.key("ArrowRight", 39)
    assert seen_stages == [s.stage for s in trace.steps]
    assert browser.eval("document.getElementById('next').disabled") is True
    browser.key("ArrowLeft", 37)
    assert browser.eval(SHOWN)["index"] == total - 1
    browser.click("#prev")
    assert browser.eval(SHOWN)["index"] == total - 2


def test_page_fetches_nothing(page):
    browser, _, _ = page
    resources = browser.eval(
        "performance.getEntriesByType('resource').map(function(r){return r.name;})")
    assert resources == []
    markup = browser.eval("document.documentElement.outerHTML")
    assert "http://" not in markup and "https://" not in markup


PRODUCTS = """(function(){
  var s = document.querySelector('section.step[data-stage="layer1.ffn.output"]');
  var dots = Array.prototype.filter.call(s.querySelectorAll('ul.worked mo'),
                                         function(m){ return m.textContent === '\\u00b7'; });
  return {text: s.querySelector('ul.worked').innerText,
          hidden: s.hidden,
          widths: dots.map(function(m){ return m.getBoundingClientRect().width; })};
})()"""


def test_products_of_numbers_show_a_visible_sign(tmp_path, page):
    """f_0 = a_0 W_2[0,0] + ...: ReLU clipped every a_j, so each term is a product of two
    numbers such as 0.000 · 0.4.  Adjacent MathML numbers would render as one number
    (0.0000.4, or 20.000 for 2 · 0.000); the rendered text must show the sign."""
    trace = trace_token(derive(load_example()), "think", decimals=3)
    step = next(n for n, s in enumerate(trace.steps, start=1) if s.stage == "layer1.ffn.output")
    path = tmp_path / "think.html"
    path.write_text(render(trace, "html"), encoding="utf-8")
    browser, _, _ = page  # its Chromium, in a tab of this test's own
    with browser.tab(path.as_uri() + f"#step-{step}"):
        shown = browser.eval(PRODUCTS)
    assert shown["hidden"] is False  # the page opened at that step
    text = " ".join(shown["text"].split())
    assert "0.000" in text and "0.4" in text
    assert re.search(r"0\.000\s*·\s*0\.4", text), text
    assert "0.0000.4" not in text.replace(" ", "")
    assert len(shown["widths"]) >= 3 and min(shown["widths"]) > 1  # laid out, not zero-width


FITS = """(function(){
  var steps = Array.prototype.slice.call(document.querySelectorAll('section.step'));
  steps.forEach(function(s){ s.hidden = false; });  // every step laid out at once
  var lines = Array.prototype.slice.call(document.querySelectorAll('ul.worked li'));
  var sup = null, base = null, variance = document.querySelector(
      'section.step[data-stage="layer1.add_norm1.variance"] .general msup');
  if (variance) { base = variance.children[0].getBoundingClientRect();
                  sup = variance.children[1].getBoundingClientRect(); }
  return {page: document.documentElement.scrollWidth - window.innerWidth,
          wide: steps.filter(function(s){ return s.scrollWidth > s.clientWidth + 1; })
                     .map(function(s){ return s.dataset.stage; }),
          lines: lines.length,
          scrolled: lines.filter(function(l){ return l.scrollWidth > l.clientWidth + 1; })
                         .length,
          wrapped: lines.filter(function(l){
              var m = l.querySelectorAll('math');
              return m.length > 1 && m[m.length - 1].getBoundingClientRect().top >
                                     m[0].getBoundingClientRect().bottom; }).length,
          raised: sup ? sup.bottom < base.top + base.height / 2 : null};
})()"""


def test_every_step_fits_the_page_width(tmp_path, page):
    """Forward and backward, no step is wider than the page at 1100 px: long chain-rule
    lines wrap onto indented lines instead of scrolling; the variance's square is a
    superscript (MathML laid out, not upright text)."""
    browser, g, _ = page
    with browser.tab(browser.eval("location.href").split("#")[0]):
        forward = browser.eval(FITS)
    path = tmp_path / "backward.html"
    path.write_text(render(trace_token(g, "think", backward=True), "html"), encoding="utf-8")
    with browser.tab(path.as_uri()):
        backward = browser.eval(FITS)
    for shown in (forward, backward):
        assert shown["page"] <= 0 and shown["wide"] == [], shown
        assert shown["scrolled"] == 0 and shown["lines"] > 40, shown
    assert forward["raised"] is True
    assert backward["wrapped"] >= 10  # the ∂L/∂r lines, the loss, the LayerNorm rules
