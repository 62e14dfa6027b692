"""Names from the report on the terminal (issue 13): kernel, CUDA API and NVTX names
with escape sequences (clear screen, window title, OSC-8 links, C1 CSI), with rich
markup (``train/[/val]`` crashed the renderer, ``[link=...]`` became a hyperlink), and
1 MB long (the renderer ran for minutes: names were never truncated).

Each report is a real capture (moe-experts-bad) whose strings were replaced in a
temporary copy: hand-built, named so. The names chosen are those ``analyze`` shows: the
iteration range 'forward', the outer range 'measured', the kernels of the findings
('Kernel2', 'elementwise_kernel') and the launch call of the verdict's evidence."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpugap.cli import main
from gpugap.report.validate import MAX_NAME
from tests.conftest import report_path

ROOT = Path(__file__).parent.parent

HOSTILE = {
    "Kernel2": "Kernel2\x1b]0;pwned\x07\x1b[2J",
    "cudaLaunchKernel_v7000": "cudaLaunchKernel\x1b]8;;http://evil.example\x1b\\click"
                              "\x1b]8;;\x1b\\",
    "forward": "train/[/val]",
    "measured": "[link=https://evil.example]measured[/link]",
    "elementwise_kernel": "[bold red]elementwise[/]\x9b31m",
}
HUGE = {old: old[0] + chr(ord("a") + i) * 1_000_000
        for i, old in enumerate(("Kernel2", "cudaLaunchKernel_v7000", "forward", "measured",
                                 "elementwise_kernel"))}


def renamed(tmp_path: Path, name: str, names: dict[str, str]) -> Path:
    path = tmp_path / f"handbuilt_{name}.sqlite"
    shutil.copy(report_path("moe-experts-bad"), path)
    with sqlite3.connect(path) as conn:
        for old, new in names.items():
            assert conn.execute("UPDATE StringIds SET value = ? WHERE value = ?",
                                (new, old)).rowcount == 1, old
    conn.close()
    return path


@pytest.fixture
def no_ci(monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


def test_escape_sequences_and_markup_in_names_reach_the_terminal_inert(tmp_path):
    """On a colour terminal (rich forced into terminal mode, as on a tty): the only escape
    sequences are rich's own (colours, the status line's erasing and cursor moves); the
    names are printed escaped (\\x1b) and their markup literally, never parsed."""
    path = renamed(tmp_path, "hostile_names", HOSTILE)
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "100",
           "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    done = subprocess.run([sys.executable, "-m", "gpugap", "analyze", str(path),
                           "--no-config"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, err
    assert "Traceback" not in err
    # rich's own: SGR colours, erasing the line, moving up, hiding/showing the cursor.
    own = re.compile(r"\x1b\[\??[0-9;]*[mKAhl]")
    leftover = own.sub("", out + err)
    assert "\x1b" not in leftover and "\x07" not in leftover and "\x9b" not in leftover
    plain = own.sub("", out)
    assert "train/[/val]" in plain                                  # markup kept as text
    assert "[link=https://evil.example]measured[/link]" in plain
    assert "Kernel2\\x1b]0;pwned\\x07\\x1b[2J" in plain
    assert "cudaLaunchKernel\\x1b]8;;http://evil.example" in plain
    assert "\\x9b31m" in plain


def test_hostile_names_in_json_html_and_svg(capsys, tmp_path, no_ci):
    """--json keeps the names as they are (JSON escapes them); --html and --svg show their
    control characters visibly: an escape sequence made the SVG malformed XML (XML 1.0
    forbids ESC) and put raw escape sequences in the HTML."""
    import json
    import xml.etree.ElementTree as ET

    path = renamed(tmp_path, "hostile_names", HOSTILE)
    html, svg = tmp_path / "r.html", tmp_path / "r.svg"
    assert main(["analyze", str(path), "--json", "--no-config", "--html", str(html),
                 "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert "\x1b" not in out                       # JSON escapes it as \u001b
    assert [r["name"] for r in doc["ranges"]][2:4] == [HOSTILE["measured"], "train/[/val]"]
    assert doc["findings"][0]["ranges"] == [HOSTILE["measured"], "train/[/val]"]
    for text in (html.read_text(), svg.read_text()):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)
        assert "[link=https://ev" in text and "Kernel2\\x1b]0;pwned" in text
    ET.parse(svg)                                   # well-formed


def test_megabyte_names_are_cut_and_fast(capsys, tmp_path, no_ci):
    """Five names of 1 MB each: analyze renders them cut to 200 characters, in seconds
    (it took minutes); --json holds them as loaded, cut to MAX_NAME (64 Ki) characters."""
    path = renamed(tmp_path, "megabyte_names", HUGE)
    t0 = time.process_time()             # CPU time: a busy machine does not fail it
    assert main(["analyze", str(path), "--no-config"]) == 0
    seconds = time.process_time() - t0
    out, err = capsys.readouterr()
    assert seconds < 30, seconds           # ~3 s; minutes before names were cut
    assert len(out) < 100_000 and "Traceback" not in err
    shown = [name[:5] for name in HUGE.values() if name[:5] in out]
    assert len(shown) >= 3, shown                       # several are shown, each cut
    for name in HUGE.values():
        assert out.count(name[1]) < 20_000, name[:5]
    assert "…" in out
    assert main(["analyze", str(path), "--no-config", "--json"]) == 0
    doc = capsys.readouterr().out
    assert '"' + HUGE["forward"][:MAX_NAME] + '"' in doc


@pytest.mark.parametrize("command", ["check", "diff"])
def test_megabyte_names_in_check_and_diff(capsys, tmp_path, no_ci, command):
    path = renamed(tmp_path, "megabyte_names", HUGE)
    md = tmp_path / "out.md"
    argv = {"check": ["check", str(path), "--max", "findings.count=0", "--range",
                      HUGE["measured"][:MAX_NAME]],
            "diff": ["diff", str(report_path("moe-experts-bad")), str(path)]}[command]
    t0 = time.process_time()
    code = main([*argv, "--no-config", "--markdown", str(md)])
    assert time.process_time() - t0 < 45
    out, err = capsys.readouterr()
    assert code == (1 if command == "check" else 0), err
    assert len(out) < 200_000 and len(err) < 5_000 and "Traceback" not in err
    assert len(md.read_text()) < 200_000


def test_bidi_controls_show_as_visible_marks_in_the_page(capsys, tmp_path, no_ci):
    """A right-to-left override in a kernel name ('Kernel2\\u202egnp.exe' displays as
    'Kernel2exe.png') reached the HTML page's data as the character itself; the page now
    holds the visible mark, in its data and in its text, as the terminal prints it."""
    path = renamed(tmp_path, "bidi_names", {"Kernel2": "Kernel2\u202egnp.exe",
                                            "measured": "meas\u2066ured\u200f"})
    page = tmp_path / "r.html"
    assert main(["analyze", str(path), "--no-config", "--html", str(page)]) == 0
    capsys.readouterr()
    text = page.read_text()
    assert not re.search("[\u200e\u200f\u202a-\u202e\u2066-\u2069]", text)
    assert "Kernel2\\\\u202egnp.exe" in text                  # in the page's JSON data
    assert "meas\\\\u2066ured\\\\u200f" in text


LIVE = {"measured": "<script>alert(1)</script><img src=x onerror=alert(2)>"
                    "[click](http://evil.example)",
        "forward": "**bold** `tick` ~~gone~~ &amp; <b>x</b>\u202e"}


class _Tags(__import__("html.parser").parser.HTMLParser):
    """Every start tag and attribute of an HTML document."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, list]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def _no_live_markup(html_text: str, own_tags: set[str]) -> None:
    tags = _Tags(html_text).tags
    assert not [t for t, _ in tags if t not in own_tags], sorted({t for t, _ in tags})
    assert not [a for _, attrs in tags for a, _ in attrs if a.startswith("on")]
    assert not [v for _, attrs in tags for a, v in attrs if a == "href" and "evil" in (v or "")]


@pytest.mark.slow
def test_one_hostile_report_through_every_output_format(capsys, tmp_path, no_ci):
    """Range names that are HTML, Markdown links and emphasis, through --json, --html,
    --svg, check's --junit and --markdown and diff's --markdown, each parsed as what it
    is (Markdown rendered to HTML with raw HTML on, as GitHub does): the names come out
    as text everywhere, never as a tag, an attribute or a link."""
    import json
    import xml.etree.ElementTree as ET

    from markdown_it import MarkdownIt

    path = renamed(tmp_path, "live_markup", LIVE)
    out = {name: tmp_path / name for name in ("r.html", "r.svg", "j.xml", "c.md", "d.md")}
    assert main(["analyze", str(path), "--json", "--no-config", "--html", str(out["r.html"]),
                 "--svg", str(out["r.svg"])]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert LIVE["measured"] in [r["name"] for r in doc["ranges"]]     # JSON: data as is
    main(["check", str(path), "--no-config", "--range", LIVE["measured"], "--min",
          "gpu_busy_pct=101", "--junit", str(out["j.xml"]), "--markdown", str(out["c.md"])])
    assert main(["diff", str(path), str(path), "--no-config", "--markdown",
                 str(out["d.md"])]) == 0
    capsys.readouterr()

    junit = ET.parse(out["j.xml"])
    assert {e.tag for e in junit.iter()} <= {"testsuites", "testsuite", "testcase",
                                             "failure", "skipped", "properties",
                                             "property", "system-out", "error"}
    ET.parse(out["r.svg"])
    page = out["r.html"].read_text()
    assert "<script>alert" not in page and "<img" not in page
    # The page's own tags, from the untouched report: the names add none.
    clean = tmp_path / "clean.html"
    assert main(["analyze", str(report_path("moe-experts-bad")), "--no-config", "--html",
                 str(clean)]) == 0
    capsys.readouterr()
    _no_live_markup(page, {t for t, _ in _Tags(clean.read_text()).tags})
    markdown = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    for name in ("c.md", "d.md"):
        rendered = markdown.render(out[name].read_text())
        _no_live_markup(rendered, {"h3", "h4", "p", "table", "thead", "tbody", "tr", "th",
                                   "td", "code", "strong", "blockquote", "ul", "li"})
        assert "&lt;script&gt;alert(1)" in rendered, name       # shown, as text
