"""The HTML timeline and its SVG/PNG export, checked in a real headless chromium.

The tests that need chromium skip where it is missing (fail under GPUGAP_REQUIRE_TOOLS=1,
as in CI, which installs Debian's through .ci/install-test-deps.sh). It is driven over the
DevTools protocol on --remote-debugging-pipe with the standard library only: the page must
load with no console error and no network request, draw one lane per stream/thread, list
every finding and draw a marker for each, zoom and pan with the wheel and the mouse, and
give a screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import shutil
import struct
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpugap.cli import main
from gpugap.render.html import write_html
from gpugap.render.timeline import CATEGORY_INDEX, Panel, build_timeline
from gpugap.render.timeline_svg import write_png, write_svg
from tests.conftest import (
    DATA,
    analyze_report,
    code_strings,
    load_report,
    report_path,
    require_tool,
)

CAPTURES = DATA / "captures"

VIEWPORT = (1600, 1000)
REPORTS = ["default-stream-bad", "h2d-copy-bad", "moe-experts-bad"]


# --- a minimal DevTools-protocol client -------------------------------------------

class Browser:
    """Headless chromium over --remote-debugging-pipe: NUL-separated JSON on fds 3/4."""

    FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--hide-scrollbars",
             "--remote-debugging-pipe"]

    def __init__(self, exe: str, timeout: float = 60.0) -> None:
        self.profile = tempfile.mkdtemp(prefix="gpugap-test-chromium-")
        child_in, self._w = os.pipe()
        self._r, child_out = os.pipe()

        def to_fds_3_4() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self.proc = subprocess.Popen(
            [exe, *self.FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=to_fds_3_4)
        os.close(child_in)
        os.close(child_out)
        self.timeout, self._buf, self._id = timeout, b"", 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.page(f"{domain}.enable")
        self.page("Emulation.setDeviceMetricsOverride", width=VIEWPORT[0],
                  height=VIEWPORT[1], deviceScaleFactor=1, mobile=False)

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            if select.select([self._r], [], [], left)[0]:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium exited ({self.proc.poll()})")
                self._buf += chunk
        message, _, self._buf = self._buf.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, *, session: bool = False, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def page(self, method: str, **params):
        return self.call(method, session=True, **params)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def open(self, path: Path) -> dict:
        """Load a file; return window.__gpugap after the first frame."""
        self.events.clear()
        self.page("Page.navigate", url=path.resolve().as_uri())
        self.wait_event("Page.loadEventFired")
        return self.state()

    def evaluate(self, expression: str):
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def state(self) -> dict:
        return self.evaluate("new Promise(r => requestAnimationFrame(() => "
                             "requestAnimationFrame(() => r(window.__gpugap))))")

    def mouse(self, kind: str, x: float, y: float, **extra) -> None:
        self.page("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def problems(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions, failed loads since open()."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(json.dumps(p["exceptionDetails"])[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert",
                                                                         "warning"):
                out.append(json.dumps(p.get("args"))[:500])
            elif m == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                out.append(p["entry"].get("text", "")[:500])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self) -> bytes:
        return base64.b64decode(self.page("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        try:
            self.call("Browser.close")
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    b = Browser(require_tool("chromium"))
    yield b
    b.close()


# --- helpers -----------------------------------------------------------------------

def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def expected_lanes(trace) -> dict[str, int]:
    return {"gpu": len(trace.gpu_ops[["device", "pid", "stream"]].drop_duplicates()),
            "api": int(trace.api["gtid"].nunique()), "nvtx": int(trace.nvtx["gtid"].nunique())}


def expected_events(trace) -> int:
    return (len(trace.kernels) + len(trace.memcpys) + len(trace.memsets) + len(trace.api)
            + len(trace.nvtx))


def tiled(trace, copies: int):
    """The report's kernels and API calls repeated *copies* times one after another: a
    real event mix at 100k+ events."""
    span = trace.span()
    shift = span[1] - span[0] + 1_000_000

    def tile(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
        parts = []
        for k in range(copies):
            part = frame.copy()
            for c in columns:                   # -1 (no launch call) stays -1
                part[c] = part[c].where(part[c] < 0, part[c] + k * shift)
            part["corr"] = part["corr"] + k * 10_000_000
            parts.append(part)
        return pd.concat(parts, ignore_index=True)

    return trace.replace(kernels=tile(trace.kernels, ["start", "end", "api_start", "api_end"]),
        api=tile(trace.api, ["start", "end"]))


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["analyze", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --- the page in chromium ------------------------------------------------------------

@pytest.mark.parametrize("name", REPORTS)
def test_page_loads_with_every_lane_and_finding(browser, tmp_path, name):
    trace, analysis = load_report(name), analyze_report(name)
    page = tmp_path / f"{name}.html"
    written = write_html(analysis, trace, page)
    state = browser.open(page)

    assert browser.problems() == []
    assert browser.requests() == [page.resolve().as_uri()]      # nothing from the network
    assert state["ready"] and state["errors"] == []
    lanes = expected_lanes(trace)
    assert state["lane_kinds"] == lanes
    assert state["lanes"] == sum(lanes.values())
    assert state["events"] == written.events == (
        len(trace.kernels) + len(trace.memcpys) + len(trace.memsets) + len(trace.api)
        + len(trace.nvtx))
    n = len(drawn_findings(analysis))
    assert n > 0
    assert state["findings"] == n
    state = browser.evaluate("window.gpugapTimeline.whole()")     # the whole report:
    assert state["drawn"] == n                  # every finding on the findings track
    assert state["marked"] == n                 # ... and marked where it happens
    listed = browser.evaluate("[...document.querySelectorAll('li.finding')]"
                              ".map(li => +li.dataset.finding)")
    assert listed == build_timeline(trace, analysis).order      # the terminal's order
    shot = browser.screenshot()
    assert png_size(shot) == VIEWPORT
    (tmp_path / f"{name}.png").write_bytes(shot)


def test_status_line_says_events_are_merged(browser, tmp_path):
    page = tmp_path / "moe.html"
    write_html(analyze_report("moe-experts-bad"), load_report("moe-experts-bad"), page)
    browser.open(page)
    state = browser.evaluate("window.gpugapTimeline.whole()")
    assert state["merged"] > 10_000 and state["spans"] < state["merged"]
    status = browser.evaluate("document.getElementById('status').textContent")
    assert f"{state['merged']:,} events merged" in status
    # Zoomed far in, every event in view is drawn on its own.
    browser.evaluate("window.gpugapTimeline.setView(1e6, 1.02e6)")
    state = browser.state()
    assert state["merged"] == 0
    assert "every event drawn on its own" in browser.evaluate(
        "document.getElementById('status').textContent")


def test_a_capped_page_draws_every_finding_and_its_evidence_and_shows_merged_spans(
        browser, tmp_path):
    """A page written with a small cap on drawn events (what a 1M-kernel report gets
    with the default one): short events merged into spans, every finding still drawn
    and its evidence events drawn as themselves and hoverable."""
    name, cap = "moe-experts-bad", 5_000
    trace, analysis = load_report(name), analyze_report(name)
    page = tmp_path / "capped.html"
    written = write_html(analysis, trace, page, max_events=cap)
    tl = build_timeline(trace, analysis, max_events=cap)
    state = browser.open(page)
    assert browser.problems() == [] and state["errors"] == []
    assert state["events"] == written.events == tl.events <= cap
    cut = state["decimation"][0]
    assert cut["events"] == expected_events(trace) and cut["spans"] > 0
    assert f"holds {tl.events:,} of {cut['events']:,} events" in browser.evaluate(
        "document.getElementById('status').textContent")
    n = len(drawn_findings(analysis))
    state = browser.evaluate("window.gpugapTimeline.whole()")
    assert state["drawn"] == n and state["marked"] == n

    def hover(i: int) -> str:
        s, e = int(tl.start[i]), int(tl.start[i] + tl.dur[i])
        browser.evaluate(f"window.gpugapTimeline.setView({s - (e - s)}, {e + (e - s)}); "
                         "window.gpugapTimeline.redrawNow()")     # where() uses its scale
        at = browser.evaluate(f"window.gpugapTimeline.where(0, {int(tl.lane[i])}, "
                              f"{(s + e) // 2})")
        browser.mouse("mouseMoved", at["x"], at["y"])
        return browser.evaluate("document.getElementById('tooltip').innerText")

    span = int(np.flatnonzero((tl.merged > 1) & (tl.row == 0))[0])
    assert f"{int(tl.merged[span]):,} events merged into one span" in hover(span)
    outlined = next(m for m in tl.markers if m.kind == "ev" and tl.row[m.i] == 0)
    tip = hover(outlined.i)
    assert f"correlation id {int(tl.corr[outlined.i])}" in tip
    assert drawn_findings(analysis)[outlined.finding].rule in tip
    assert browser.problems() == []


def test_wheel_zooms_drag_pans_click_selects(browser, tmp_path):
    name = "default-stream-bad"
    trace, analysis = load_report(name), analyze_report(name)
    page = tmp_path / "t.html"
    write_html(analysis, trace, page)
    state = browser.open(page)
    v0, v1 = state["view"]
    box = browser.evaluate("JSON.parse(JSON.stringify("
                           "document.querySelector('canvas.lanes').getBoundingClientRect()))")
    x, y = box["left"] + box["width"] * 0.6, box["top"] + box["height"] * 0.6

    browser.mouse("mouseWheel", x, y, deltaX=0, deltaY=-400)
    w0, w1 = browser.state()["view"]
    assert (w1 - w0) < 0.5 * (v1 - v0)                    # zoomed in around the cursor
    assert w0 > v0 and w1 < v1

    browser.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
    browser.mouse("mouseMoved", x - 150, y, button="left", buttons=1)
    browser.mouse("mouseReleased", x - 150, y, button="left", buttons=0, clickCount=1)
    p0, p1 = browser.state()["view"]
    assert p1 - p0 == pytest.approx(w1 - w0)
    assert p0 > w0                                         # dragged left: later times

    # The findings list jumps to the finding and highlights it.
    k = next(i for i, f in enumerate(drawn_findings(analysis)) if f.rule == "blocking-memcpy")
    browser.evaluate(f"document.querySelector('li.finding[data-finding=\"{k}\"] "
                     ".finding-head').click()")
    state = browser.state()
    assert state["selected"] == {"p": 0, "f": k}
    tl = build_timeline(trace, analysis)
    f = drawn_findings(analysis)[k]
    s, e = tl.rel(f.start_ns), tl.rel(f.end_ns)
    assert state["view"][0] <= s and state["view"][1] >= e
    assert state["view"][1] - state["view"][0] < 1.5 * (e - s)
    assert browser.evaluate(f"document.querySelector('li.finding[data-finding=\"{k}\"]')"
                            ".classList.contains('selected')")

    # Hovering the blocked copy shows its details.
    copy = int(np.flatnonzero(tl.cat == CATEGORY_INDEX["dtoh-pageable"])[0])
    at = browser.evaluate(f"window.gpugapTimeline.where(0, {int(tl.lane[copy])}, "
                          f"{int(tl.start[copy] + tl.dur[copy] // 2)})")
    browser.mouse("mouseMoved", at["x"], at["y"])
    tip = browser.evaluate("document.getElementById('tooltip').innerText")
    assert "memcpy Device-to-Host" in tip
    assert "Pageable" in tip and "GB/s" in tip and "stream 7" in tip
    assert "blocking-memcpy" in tip                        # the finding it belongs to
    assert browser.problems() == []


def test_bad_above_good_on_one_time_scale(browser, tmp_path):
    panels = []
    for variant in ("bad", "good"):
        from gpugap.analysis import analyze

        trace = load_report(f"moe-experts-{variant}")
        panels.append(Panel(f"moe-experts {variant}", trace,
                            analyze(trace, range_name="measured")))
    page = tmp_path / "timeline.html"
    # The runner's call: the path right after the panels.
    written = write_html(panels, page, title="gpugap: moe-experts")
    state = browser.open(page)
    assert browser.problems() == []
    assert state["panels"] == 2
    assert state["lanes"] == sum(sum(expected_lanes(p.trace).values()) for p in panels)
    assert state["findings"] == state["drawn"] == sum(len(drawn_findings(p.analysis))
                                                      for p in panels)
    assert written.findings == state["findings"]
    data = json.loads(browser.evaluate("document.getElementById('gpugap-data').textContent"))
    heads = browser.evaluate("[...document.querySelectorAll('.panel-head b')]"
                             ".map(b => b.textContent)")
    assert heads == ["moe-experts bad", "moe-experts good"]          # bad above good
    for p, panel in zip(data["panels"], panels, strict=True):
        # Each aligned to its own start of 'measured'; the view spans both.
        start = int(panel.trace.nvtx.loc[panel.trace.nvtx["name"] == "measured",
                                         "start"].min())
        assert p["origin_ns"] == start
        assert p["view"][0] == 0
    view = state["view"]
    longest = max(p["view"][1] for p in data["panels"])
    assert view[0] < 0 < longest < view[1] < 1.1 * longest


@pytest.mark.slow
def test_hundred_thousand_events(browser, tmp_path):
    trace = tiled(load_report("moe-experts-bad"), 10)
    analysis = analyze_report("moe-experts-bad")
    page = tmp_path / "dense.html"
    t = time.perf_counter()
    written = write_html(analysis, trace, page)
    seconds = time.perf_counter() - t
    assert written.events > 170_000
    assert seconds < 10
    assert written.size_bytes < 6 * 2**20
    browser.open(page)
    state = browser.evaluate("window.gpugapTimeline.whole()")
    assert browser.problems() == []
    assert state["events"] == written.events
    assert state["merged"] > 150_000
    frames = browser.evaluate("""(() => { const T = window.gpugapTimeline, ms = [];
        for (let k = 0; k < 7; k++) { const t = performance.now(); T.redrawNow();
          ms.push(performance.now() - t); }
        return ms.sort((a, b) => a - b)[3]; })()""")
    assert frames < 50, f"a full-view frame of {written.events} events took {frames:.1f} ms"
    svg = write_svg(analysis, trace, tmp_path / "dense.svg")
    assert svg.size_bytes < 400_000                 # decimated: bounded by pixels, not events


def test_names_cannot_break_out_of_the_page(browser, tmp_path):
    trace = load_report("default-stream-bad")
    evil = "</script><script>window.__pwned = 1</script><!--"
    kernels = trace.kernels.copy()
    kernels["name"] = kernels["name"].astype(str).where(kernels["name"] != "bump", evil)
    trace = trace.replace(kernels=kernels)
    page = tmp_path / "evil.html"
    write_html(analyze_report("default-stream-bad"), trace, page)
    state = browser.open(page)
    assert browser.problems() == [] and state["ready"]
    assert browser.evaluate("window.__pwned === undefined")
    data = json.loads(browser.evaluate("document.getElementById('gpugap-data').textContent"))
    assert evil in data["panels"][0]["strings"]


# --- a rule the renderer has never seen -------------------------------------------

def page_data(page: Path) -> dict:
    """The document the page embeds (what timeline.js draws)."""
    found = re.search(r'<script type="application/json" id="gpugap-data">(.*?)</script>',
                      page.read_text(), re.S)
    assert found, "no embedded timeline data"
    return json.loads(found.group(1))


def event_columns(panel: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per event of a page's panel: its lane, start (relative ns) and correlation id."""
    groups = np.array(panel["groups"], dtype=np.int64).reshape(-1, 3)
    lane = np.repeat(groups[:, 0], groups[:, 2])
    return (lane, np.cumsum(np.array(panel["start"], dtype=np.int64)),
            np.cumsum(np.array(panel["corr"], dtype=np.int64)))


def first_kernel_rule():
    """A rule written the way a new one would be, in its own module: it marks the first
    kernel that a known call launched with each kind of mark (a band of its GPU time, the
    launch call's span on its thread, the kernel outlined, an arrow from call to kernel)
    and names no colour."""
    from gpugap.rules import Cause, Finding, Rule, Severity
    from gpugap.rules.model import Band, EventRef, Link, Outline, Span

    def detect(trace, config, context):
        k = trace.kernels
        k = k[k["api_start"] >= 0].sort_values("start", kind="stable").iloc[0]
        api = trace.api
        call = api[(api["corr"] == k["corr"]) & (api["pid"] == k["pid"])].iloc[0]
        kernel = EventRef("kernel", int(k["corr"]), stream=int(k["stream"]),
                          pid=int(k["pid"]), start_ns=int(k["start"]))
        launch = EventRef("api", int(k["corr"]), pid=int(k["pid"]),
                          start_ns=int(call["start"]))
        return [Finding(
            # a warning: never a minor finding the views leave out (numbering.MINOR_PCT)
            rule="first-kernel", cause="first", severity=Severity.WARNING,
            start_ns=int(call["start"]), end_ns=int(k["end"]), cost_ns=0,
            message="the first kernel", fix="nothing to fix", device=int(k["device"]),
            streams=[int(k["stream"])],
            marks=[Band(int(k["start"]), int(k["end"]), int(k["device"]), label="first"),
                   Span(int(call["start"]), int(call["end"]), int(call["gtid"]),
                        label="its launch"),
                   Outline(kernel), Link(launch, kernel, "ss")])]

    return Rule(id="first-kernel", title="The first kernel", thresholds={},
                rationale="a test of the drawing", fix="nothing to fix",
                causes=(Cause("first", "the first kernel launched", "nothing to fix"),),
                detect=detect)


def test_a_new_rule_is_drawn_with_no_change_to_the_renderer(browser, tmp_path, monkeypatch):
    """Adding a rule touches its module, its tests and the registry (RULE_MODULES):
    registered like that, a rule's marks are on the page and drawn."""
    import sys
    import types

    import gpugap.rules
    from gpugap.analysis import analyze
    from gpugap.render.timeline import RULE_PALETTE

    module = types.ModuleType("gpugap.rules.first_kernel")
    module.RULE = first_kernel_rule()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(gpugap.rules, "RULE_MODULES",
                        (*gpugap.rules.RULE_MODULES, "first_kernel"))
    trace = load_report("h2d-copy-bad")
    analysis = analyze(trace)
    index = next(i for i, f in enumerate(drawn_findings(analysis)) if f.rule == "first-kernel")
    page = tmp_path / "new-rule.html"
    write_html(analysis, trace, page)

    panel = page_data(page)["panels"][0]
    finding = panel["findings"][index]
    assert finding["rule"] == "first-kernel" and finding["color"] in RULE_PALETTE
    markers = [m for m in panel["markers"] if m["f"] == index]
    assert [m["t"] for m in markers] == ["band", "span", "ev", "link"]
    band, span, outline, link = markers
    lane, start, corr = event_columns(panel)
    k = trace.kernels
    k = k[k["api_start"] >= 0].sort_values("start", kind="stable").iloc[0]
    origin = panel["origin_ns"]
    # The band on the GPU lanes, from the kernel's start to its end.
    assert (band["s"], band["e"]) == (int(k["start"]) - origin, int(k["end"]) - origin)
    assert {panel["lanes"][i]["kind"] for i in range(band["l0"], band["l1"] + 1)} == {"gpu"}
    # The outline on the kernel itself; the arrow from its launch call to it.
    assert corr[outline["i"]] == k["corr"] and start[outline["i"]] == band["s"]
    assert panel["lanes"][lane[outline["i"]]]["kind"] == "gpu"
    assert link["b"] == outline["i"] and link["ends"] == "ss"
    assert corr[link["a"]] == k["corr"] and panel["lanes"][lane[link["a"]]]["kind"] == "api"
    # The span on that call's thread's CUDA API lane, over the call.
    assert span["l0"] == span["l1"] == lane[link["a"]]
    assert span["s"] == start[link["a"]]
    assert {m["color"] for m in markers} == {finding["color"]}
    assert "first-kernel" in page.read_text()         # in the legend too

    browser.open(page)
    state = browser.evaluate("window.gpugapTimeline.whole()")
    assert browser.problems() == [] and state["errors"] == []
    assert state["findings"] == state["marked"] == len(drawn_findings(analysis))


def test_renderers_name_no_rule():
    """Renderers draw findings from their marks: no rule's id in render/'s code (its
    string literals and scripts; docstrings may quote one as an example)."""
    from gpugap.rules import registry

    render = Path(__file__).parents[1] / "gpugap" / "render"
    code = {p.name: " ".join(code_strings(p.read_text())) for p in render.rglob("*.py")}
    code |= {p.name: p.read_text() for p in render.rglob("*.js")}
    assert "html.py" in code and "timeline.js" in code
    for rule in registry():
        assert [name for name, text in code.items() if rule in text] == [], rule


def test_sidebar_wraps_long_kernel_names(browser, tmp_path):
    """small-compile's findings name a 131-character cuBLAS kernel (no space in it): the
    findings list wraps it instead of growing past its column."""
    from gpugap.analysis import analyze
    from gpugap.report import load

    trace = load(CAPTURES / "small-compile.sqlite")
    analysis = analyze(trace, require_gpu=False)
    longest = max((w for f in analysis.findings for w in f.message.split()), key=len)
    assert len(longest) > 120
    page = tmp_path / "compile.html"
    write_html(analysis, trace, page)
    assert browser.open(page)["ready"] and browser.problems() == []
    overflow = browser.evaluate("""(() => {
        const bar = document.getElementById('sidebar');
        const items = [...bar.querySelectorAll('li.finding')];
        return {bar: bar.scrollWidth - bar.clientWidth, items: items.length,
                wide: items.filter(li => li.scrollWidth > li.clientWidth).length,
                page: document.documentElement.scrollWidth - window.innerWidth}; })()""")
    assert overflow == {"bar": 0, "items": len(drawn_findings(analysis)), "wide": 0, "page": 0}


@pytest.mark.needs_nsys
def test_pages_show_the_report_path_as_given(capsys, tmp_path, monkeypatch):
    """A .nsys-rep is read through its SQLite export in the cache: the page names the
    report as the user gave it (relative here), never the export's path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUGAP_CACHE_DIR", str(tmp_path / "cache"))
    Path("runs").mkdir()
    shutil.copy(DATA / "cpu-only" / "cpu-only-nvtx.nsys-rep", "runs/cpu.nsys-rep")
    main(["analyze", "runs/cpu.nsys-rep", "--html", "t.html", "--svg", "t.svg", "--json"])
    exports = list((tmp_path / "cache").glob("*.sqlite"))
    assert len(exports) == 1            # what was read: the export in the cache
    assert exports[0].name in capsys.readouterr().out          # --json says so
    page, svg = Path("t.html").read_text(), Path("t.svg").read_text()
    assert "runs/cpu.nsys-rep" in page
    for text in (page, svg):
        assert str(tmp_path) not in text and exports[0].name not in text


def legend_of(page_text: str) -> list[str]:
    legend = re.search(r'<div class="legend">(.*?)</div>', page_text).group(1)
    return re.findall(r"</i>([^<]*)</span>", legend)


@pytest.mark.parametrize(("capture", "has", "lacks"), [
    ("small-graph", ["CUDA graph replay", "kernel"],
     ["memset", "launch-gap [sync-wait]"]),
    ("small-graph-node", ["kernel"], ["CUDA graph replay", "memset"]),
    ("train-workers0", ["memset", "copy host→device, pageable", "launch-gap"],
     ["CUDA graph replay", "copy host→device", "copy peer→peer", "serialized-streams",
      "launch-gap [sync-wait]"]),
])
def test_legend_lists_only_what_the_report_has(tmp_path, capture, has, lacks):
    from gpugap.analysis import analyze
    from gpugap.report import load

    trace = load(CAPTURES / f"{capture}.sqlite")
    analysis = analyze(trace, require_gpu=False)
    page = tmp_path / "t.html"
    write_html(analysis, trace, page)
    legend = legend_of(page.read_text())
    assert set(has) <= set(legend) and not set(lacks) & set(legend), legend
    # Every finding's rule is there, and no other rule.
    from gpugap.rules import registry

    rules = {f.rule for f in drawn_findings(analysis)}
    assert rules == set(legend) & set(registry()), legend
    assert ("memset" in legend) == (len(trace.memsets) > 0)


# --- SVG and PNG ------------------------------------------------------------------

def test_svg_has_lanes_findings_and_legend(tmp_path):
    name = "default-stream-bad"
    trace, analysis = load_report(name), analyze_report(name)
    written = write_svg(analysis, trace, tmp_path / "t.svg")
    text = (tmp_path / "t.svg").read_text()
    root = ET.fromstring(text)                         # well-formed
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert written.size_bytes < 100_000
    for label in ("stream 7 (legacy default)", "stream 13", "NVTX", "CUDA API",
                  f"findings ({len(drawn_findings(analysis))})", "blocking-memcpy", "launch-gap",
                  "kernel", "◀ folded:", "start-up 608 ms"):
        assert label in text, label
    from gpugap.render.timeline import build_panels
    from gpugap.render.timeline_svg import render_svg

    panels = build_panels(analysis, trace)               # the whole report: merged
    assert "events narrower than a pixel merged" in render_svg(panels, view=panels[0].extent)
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    # The --range window is smaller and shows only that range's findings.
    from gpugap.analysis import analyze

    measured = analyze(trace, range_name="measured")
    write_svg(measured, trace, tmp_path / "m.svg")
    m = (tmp_path / "m.svg").read_text()
    assert "range measured" in m and f"findings ({len(drawn_findings(measured))})" in m


def test_svg_legend_lists_what_its_window_draws(tmp_path):
    # default-stream-bad's memsets, allocations and module loads all happen before its
    # 'measured' range: the whole report's legend names them, the range's must not.
    from gpugap.analysis import analyze
    from gpugap.render.timeline import CATEGORIES

    def legend(svg_text: str) -> set[str]:
        texts = set(re.findall(r'class="mu">([^<]*)</text>', svg_text))
        return texts & {c[1] for c in CATEGORIES}

    from gpugap.render.timeline import build_panels
    from gpugap.render.timeline_svg import render_svg

    trace = load_report("default-stream-bad")
    panels = build_panels(analyze(trace), trace)
    (tmp_path / "whole.svg").write_text(render_svg(panels, view=panels[0].extent))
    write_svg(analyze(trace, range_name="measured"), trace, tmp_path / "m.svg")
    whole, measured = (legend((tmp_path / n).read_text()) for n in ("whole.svg", "m.svg"))
    start_up_only = {"memset", "API: alloc / free / register", "API: module / library load"}
    assert start_up_only <= whole
    assert not start_up_only & measured
    assert {"kernel", "API: launch", "NVTX range"} <= measured < whole, measured


@pytest.mark.slow
@pytest.mark.needs_chromium
def test_png_from_chromium(tmp_path):
    name = "h2d-copy-bad"
    written = write_png(analyze_report(name), load_report(name), tmp_path / "t.png")
    svg = write_svg(analyze_report(name), load_report(name), tmp_path / "t.svg")
    width, height = (int(re.search(rf'{k}="(\d+)"', svg.path.read_text()).group(1))
                     for k in ("width", "height"))
    assert png_size(written.path.read_bytes()) == (2 * width, 2 * height)
    assert written.size_bytes > 50_000                # drawn, not blank


# --- the CLI ----------------------------------------------------------------------

@pytest.mark.slow
def test_cli_writes_html_svg_png(capsys, tmp_path, browser):
    out = {k: tmp_path / f"t.{k}" for k in ("html", "svg", "png")}
    code, stdout, stderr = cli(capsys, str(report_path("h2d-copy-bad")), "--json",
                               "--html", str(out["html"]), "--svg", str(out["svg"]),
                               "--png", str(out["png"]))
    assert code == 0
    assert json.loads(stdout)["status"] == "ok"       # stdout stays one JSON document
    for path in out.values():
        assert path.stat().st_size > 0
        assert f"wrote {path}" in stderr
    png_size(out["png"].read_bytes())
    assert browser.open(out["html"])["findings"] == \
        len(drawn_findings(analyze_report("h2d-copy-bad")))
    assert browser.problems() == []


def test_cli_never_overwrites_without_force(capsys, tmp_path):
    page = tmp_path / "t.html"
    page.write_text("keep me")
    code, stdout, stderr = cli(capsys, str(report_path("default-stream-bad")),
                               "--html", str(page))
    assert code == 2
    assert stderr.strip() == f"gpugap: error: {page} exists; pass --force to overwrite"
    assert stdout == ""                                # failed before any work
    assert page.read_text() == "keep me"
    code, _, _ = cli(capsys, str(report_path("default-stream-bad")), "--html", str(page),
                     "--force", "--range", "measured")
    assert code == 0
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_cli_png_without_chromium(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUGAP_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, stdout, stderr = cli(capsys, str(report_path("default-stream-bad")),
                               "--png", str(tmp_path / "t.png"))
    assert code == 2
    assert stderr.strip() == ("gpugap: error: PNG export needs chromium: install it or "
                              "write --svg FILE")
    assert not (tmp_path / "t.png").exists()


def test_cli_timeline_of_a_report_without_gpu_work(capsys, tmp_path, browser):
    page = tmp_path / "cpu.html"
    code, _, _ = cli(capsys, str(report_path("default-stream-bad").parents[1] / "cpu-only"
                                 / "cpu-only-nvtx.sqlite"), "--html", str(page))
    assert code == 4                                   # still no CUDA activity ...
    state = browser.open(page)                         # ... but the NVTX lanes are drawn
    assert browser.problems() == []
    assert state["lane_kinds"]["gpu"] == 0 and state["lane_kinds"]["nvtx"] == 1


def test_committed_screenshot_is_a_real_png():
    shot = Path(__file__).parents[1] / "docs" / "img" / "timeline-default-stream-bad.png"
    width, height = png_size(shot.read_bytes())
    assert width >= 1200 and height >= 600


# --- the picture reads: labels, axis, numbers, summary (geometry in a real chromium) ----

LOOKS = {"1400x900": (1400, 900), "900x900": (900, 900)}


def listed_entries(analysis):
    """What every view lists of *analysis* (gpugap.render.numbering), in its order."""
    from gpugap.render.numbering import analysis_listing

    return analysis_listing(analysis).entries


def drawn_findings(analysis) -> list:
    """The findings the timeline draws: those every view lists, in their order."""
    return [e.finding for e in listed_entries(analysis)]


def terminal_numbers(analysis) -> list[tuple[str, str, str]]:
    """(number, rule, cause) of each finding the terminal numbers, as it prints them."""
    from rich.console import Console

    from gpugap.render.terminal import render

    console = Console(record=True, width=200, color_system=None)
    render(analysis, console)
    return re.findall(r"(?<!\w)(\d+)\. (?:ERROR|WARNING|INFO) ([\w-]+) \[([\w-]+)\]",
                      console.export_text())


@pytest.fixture(scope="module")
def looks(browser, tmp_path_factory):
    """The h2d-copy scenario as `gpugap run` draws it (bad above good, whole reports)
    and a two-GPU capture, each looked at in 1400x900 and 900x900: the page's state,
    the boxes of its labels and of its parts, and ink counted on the canvas."""
    from gpugap.analysis import analyze
    from gpugap.report import load

    out = tmp_path_factory.mktemp("looks")
    pages = {}
    panels = [Panel(f"h2d-copy {v}", load_report(f"h2d-copy-{v}"),
                    analyze(load_report(f"h2d-copy-{v}"))) for v in ("bad", "good")]
    write_html(panels, out / "h2d.html", title="gpugap: h2d-copy")
    pages["h2d"] = (out / "h2d.html", panels)
    trace = load(CAPTURES / "ddp-manual.sqlite")
    panel = Panel("ddp-manual", trace, analyze(trace, require_gpu=False))
    write_html(panel.analysis, trace, out / "ddp.html")
    pages["ddp"] = (out / "ddp.html", [panel])
    seen = {}
    try:
        for size, (width, height) in LOOKS.items():
            browser.page("Emulation.setDeviceMetricsOverride", width=width, height=height,
                         deviceScaleFactor=1, mobile=False)
            for name, (page, drawn) in pages.items():
                state = browser.open(page)
                dom = browser.evaluate("""(() => {
                    const box = e => { const r = e.getBoundingClientRect();
                                       return [r.left, r.top, r.right, r.bottom]; };
                    const all = s => [...document.querySelectorAll(s)];
                    return {
                      metrics: all('.panel-metrics').map(box),
                      canvases: all('canvas.lanes').map(box),
                      overflow: all('.panel-metrics, .controls, .legend, #sidebar')
                        .filter(e => e.scrollWidth > e.clientWidth + 1)
                        .map(e => e.className || e.id),
                      page: document.documentElement.scrollWidth - window.innerWidth,
                      sidebar: all('li.finding').map(li => [li.dataset.panel, li.dataset.num,
                        li.querySelector('b').textContent,
                        li.querySelector('.cause').textContent.slice(1, -1)]),
                      options: all('#range-select option').map(o => o.textContent),
                    }; })()""")
                # Pixels of the axis row: ink in the last tick's label box (it is drawn)
                # and none in the last two columns (no label runs off the edge).
                last = max((lab for lab in state["labels"]
                            if lab["kind"] == "tick" and lab["p"] == 0),
                           key=lambda lab: lab["x1"])
                ink = browser.evaluate(f"""(() => {{
                    const c = document.querySelector('canvas.lanes'), g = c.getContext('2d');
                    const r = c.getBoundingClientRect(), w = c.width;
                    const dark = (x, y, cw, ch) => {{
                      const px = g.getImageData(x, y, cw, ch).data; let n = 0;
                      for (let i = 0; i < px.length; i += 4) {{
                        if (px[i + 3] > 0 && px[i] + px[i + 1] + px[i + 2] < 450) {{ n++; }} }}
                      return n; }};
                    return {{ink: dark(Math.round({last["x0"]} - r.left), 3,
                                       Math.round({last["x1"] - last["x0"]}), 14),
                             edge: dark(w - 2, 0, 2, 20)}}; }})()""")
                seen[name, size] = {"state": state, "dom": dom, "ink": ink, "panels": drawn,
                                    "viewport": (width, height)}
    finally:
        browser.page("Emulation.setDeviceMetricsOverride", width=VIEWPORT[0],
                     height=VIEWPORT[1], deviceScaleFactor=1, mobile=False)
    return seen


@pytest.mark.slow
def test_labels_never_overlap_and_stay_in_their_boxes(looks):
    for key, look in looks.items():
        labels = look["state"]["labels"]
        # (A dense page: ticks, phases, findings; the minor findings every view leaves
        # out, gpugap.render.numbering.MINOR_PCT, are not drawn.)
        assert len(labels) > 15, key
        for p in {lab["p"] for lab in labels}:
            mine = [lab for lab in labels if lab["p"] == p]
            box = np.array([[lab["x0"], lab["y0"], lab["x1"], lab["y1"]] for lab in mine])
            over = ((box[:, None, 0] < box[None, :, 2]) & (box[None, :, 0] < box[:, None, 2])
                    & (box[:, None, 1] < box[None, :, 3]) & (box[None, :, 1] < box[:, None, 3]))
            np.fill_diagonal(over, False)
            pairs = [(mine[i]["text"], mine[j]["text"])
                     for i, j in zip(*np.nonzero(over), strict=True)]
            assert pairs == [], (key, pairs[:5])
        for lab in labels:
            left, top, right, bottom = lab["canvas"]
            assert lab["bx0"] - 0.5 <= lab["x0"] and lab["x1"] <= lab["bx1"] + 0.5, (key, lab)
            assert left <= lab["x0"] and lab["x1"] <= right - 1, (key, lab)
            assert top <= lab["y0"] and lab["y1"] <= bottom, (key, lab)
            assert "…" not in lab["text"], (key, lab)       # dropped, never cut
        assert look["dom"]["overflow"] == [] and look["dom"]["page"] <= 0, key


def test_axis_is_whole_and_phases_are_named(looks):
    for key, look in looks.items():
        state = look["state"]
        ticks = [lab for lab in state["labels"] if lab["kind"] == "tick"]
        per_panel = [sum(lab["p"] == p for lab in ticks) for p in range(state["panels"])]
        assert per_panel == state["ticks"], key           # every tick labelled ...
        last = max(ticks, key=lambda lab: lab["x1"])
        assert last["x1"] <= last["canvas"][2] - 2, key   # ... the last one inside
        assert look["ink"]["ink"] > 20, key                # drawn (pixels say so) ...
        assert look["ink"]["edge"] == 0, key               # ... and not cut at the edge
        phases = {lab["text"] for lab in state["labels"] if lab["kind"] == "phase"}
        assert "steady" in phases, key


def test_whole_report_opens_on_steady_iterations_with_start_up_folded(looks):
    for key, look in looks.items():
        state = look["state"]
        assert state["folded"], key
        fold = [lab["text"] for lab in state["labels"] if lab["kind"] == "fold"]
        assert any(t.startswith("start-up ") for t in fold), (key, fold)
    for key in (("h2d", "1400x900"), ("ddp", "1400x900")):
        for panel in looks[key]["panels"]:
            tl = build_timeline(panel.trace, panel.analysis)
            acc = panel.analysis.accounting
            lo, hi = next(iter(acc.devices.values())).phases.spans["steady"]
            assert tl.fold is not None and lo <= tl.origin_ns < hi  # in the steady state
            assert tl.view[1] - tl.view[0] < 0.2 * (tl.extent[1] - tl.extent[0]), key


def test_summary_is_in_view_at_1400x900(looks):
    for name in ("h2d", "ddp"):
        look = looks[name, "1400x900"]
        width, height = look["viewport"]
        metrics = look["dom"]["metrics"]
        assert len(metrics) == look["state"]["panels"]
        for left, top, right, bottom in metrics:
            assert 0 <= left and right <= width and 0 <= top and bottom <= height, name
    # At 900 px the first panel's summary is still on the first screen.
    left, top, right, bottom = looks["h2d", "900x900"]["dom"]["metrics"][0]
    assert bottom <= 900 and right <= 900


def test_finding_numbers_are_the_terminals(looks, tmp_path):
    look = looks["h2d", "1400x900"]
    assert terminal_numbers(look["panels"][0].analysis)        # (good has none)
    for p, panel in enumerate(look["panels"]):
        terminal = terminal_numbers(panel.analysis)
        listed = [(num, rule, cause) for q, num, rule, cause in look["dom"]["sidebar"]
                  if int(q) == p and num.isdigit()]
        assert listed == terminal
        track = {lab["text"] for lab in look["state"]["labels"]
                 if lab["kind"] == "finding" and lab["p"] == p}
        tl = build_timeline(panel.trace, panel.analysis)
        v0, v1 = look["state"]["view"]
        for num, rule, cause in terminal:          # the track labels those in view so
            f = tl.findings[tl.labels.index(num)]
            assert (f.rule, f.cause) == (rule, cause)
            if tl.rel(f.end_ns) >= v0 and tl.rel(f.start_ns) <= v1:
                assert {f"#{num} {rule} [{cause}]", f"#{num} {rule}", f"#{num}"} & track
        # The SVG (and the PNG drawn from it) lists and labels them the same.
        svg = write_svg(panel.analysis, panel.trace, tmp_path / f"{p}.svg").path.read_text()
        for num, rule, cause in terminal:
            assert re.search(rf"{num}\. (ERROR|WARNING|INFO)</tspan> {rule} \[{cause}\]", svg)


def test_range_menu_offers_the_ranges(looks, tmp_path):
    options = looks["h2d", "1400x900"]["dom"]["options"]
    panels = looks["h2d", "1400x900"]["panels"]
    n = sum(len(build_timeline(p.trace, p.analysis).ranges) for p in panels)
    assert len(options) == n + 1 and options[0].startswith("zoom to a range")
    assert "—" not in options
    assert any(re.fullmatch(r"h2d-copy bad: \S*measured \(\d+ ms\)", o) for o in options)
    # A report without ranges gets no menu.
    from gpugap.analysis import analyze

    trace = load_report("h2d-copy-bad")
    trace = trace.replace(nvtx=trace.nvtx.iloc[:0])
    write_html(analyze(trace), trace, tmp_path / "bare.html")
    assert 'id="range-select"' not in (tmp_path / "bare.html").read_text()


def test_svg_labels_never_overlap_and_carry_the_verdict(looks, browser, tmp_path):
    """The SVG (what the PNG is) in chromium: its label boxes, as the browser lays them
    out, do not overlap and stay inside the plot; the verdict line is there."""
    trace, analysis = looks["ddp", "1400x900"]["panels"][0][1:]
    svg = write_svg(analysis, trace, tmp_path / "t.svg").path
    text = svg.read_text()
    assert f"{analysis.verdict.kind.upper()} ({analysis.verdict.scope}):" in text
    assert "◀ folded:" in text
    browser.open(svg)
    boxes = browser.evaluate("""(() => [...document.querySelectorAll('svg svg')].map(plot => {
        const v = plot.viewBox.baseVal;
        return {plot: [v.x, v.x + v.width], labels: [...plot.querySelectorAll('text')]
          .map(t => { const b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height,
                                                      t.textContent]; })}; }))()""")
    assert boxes
    for panel in boxes:
        lo, hi = panel["plot"]
        box = np.array([b[:4] for b in panel["labels"]])
        assert len(box) > 10
        assert (box[:, 0] >= lo - 0.5).all() and (box[:, 2] <= hi + 0.5).all()
        over = ((box[:, None, 0] < box[None, :, 2] - 0.5)
                & (box[None, :, 0] < box[:, None, 2] - 0.5)
                & (box[:, None, 1] < box[None, :, 3] - 0.5)
                & (box[None, :, 1] < box[:, None, 3] - 0.5))
        np.fill_diagonal(over, False)
        assert not over.any(), [panel["labels"][i][4] for i in np.nonzero(over)[0][:4]]


def test_numbering_letters_consequences_under_the_finding_that_explains_them():
    """h2d-copy-bad has a consequence of a consequence (first-call under module-load
    under launch-gap): it is lettered under the first of them; the one-time costs are
    S1, S2... largest first, as the terminal lists them."""
    analysis = analyze_report("h2d-copy-bad")
    entries = listed_entries(analysis)
    findings = [e.finding for e in entries]
    labels = [e.label for e in entries]
    assert len({e.index for e in entries}) == len(entries)
    by_id = {f.id: f for f in findings}
    one_time = sorted((int(lab[1:]), -findings[i].cost_ns) for i, lab in enumerate(labels)
                      if re.fullmatch(r"S\d+", lab))
    assert [n for n, _ in one_time] == list(range(1, len(one_time) + 1))
    assert [c for _, c in one_time] == sorted(c for _, c in one_time)    # largest first
    chained = 0
    for i, f in enumerate(findings):
        if f.consequence_of:
            root = by_id[f.consequence_of]
            chained += bool(root.consequence_of)
            while root.consequence_of:
                root = by_id[root.consequence_of]
            assert re.fullmatch(re.escape(labels[findings.index(root)]) + "[a-z]", labels[i])
    assert chained >= 1
    assert [lab for lab in labels if lab.isdigit()] == [
        num for num, _, _ in terminal_numbers(analysis)]
