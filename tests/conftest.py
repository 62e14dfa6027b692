"""Shared fixtures: the real reports captured on an H200 (tests/data/scenarios, see its
manifest.txt and capture.sh), loaded once per session; and the tools the end-to-end tests
drive for real (nsys, headless chromium), which skip or fail the tests where missing."""

from __future__ import annotations

import os
import signal
from functools import cache
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SCENARIO_DATA = DATA / "scenarios"


def report_path(name: str) -> Path:
    """A committed capture by name: 'h2d-copy-bad' is tests/data/scenarios/<name>.sqlite,
    'captures/ddp-manual' (a name with a folder) tests/data/<name>.sqlite, and
    'corpus:pt-checkpoint' a capture of the corpus (see corpus_capture)."""
    if name.startswith("corpus:"):
        return corpus_capture(name.removeprefix("corpus:"))
    path = (DATA if "/" in name else SCENARIO_DATA) / f"{name}.sqlite"
    assert path.is_file(), f"missing test report {path}"
    return path


def corpus_capture(name: str) -> Path:
    """A capture of the pre-registered corpus (tests/corpus/captures/<name>.sqlite.xz),
    decompressed once per machine into the temporary directory."""
    import tempfile

    from tests.corpus.score import capture_path

    cache_dir = Path(tempfile.gettempdir()) / "gpugap-corpus"
    cache_dir.mkdir(exist_ok=True)
    path = capture_path(name, cache_dir)
    assert path is not None, f"missing corpus capture {name}"
    return path


@cache
def load_report(name: str):
    """The capture *name* (see report_path), loaded once per session."""
    from gpugap.report import load

    return load(report_path(name))


@cache
def analyze_report(name: str, range_name: str | None = None):
    """The analysis of the capture *name* (of its NVTX range *range_name*; None: the
    whole report), made once per session and shared by every test that reads it (the
    expensive part of most tests): a test must not change it."""
    from gpugap.analysis import analyze

    return analyze(load_report(name), range_name=range_name)


def code_strings(source: str) -> list[str]:
    """The string literals of a Python module that are not docstrings."""
    import ast

    tree = ast.parse(source)
    docs = {id(body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef))
            for body in [node.body] if body and isinstance(body[0], ast.Expr)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docs]


@pytest.fixture
def trace_of():
    return load_report


@pytest.fixture
def analysis_of():
    return analyze_report


@pytest.fixture
def outside_ci(monkeypatch, tmp_path):
    """Run in an empty directory, as if not under GitHub Actions (no step summary)."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def no_hang():
    """A test that blocks (a FIFO opened for reading or writing) fails instead."""
    def expired(signum, frame):
        raise TimeoutError("gpugap hung")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# --- tools: a real nsys and a headless chromium ------------------------------------------
# A test marked needs_nsys / needs_chromium skips where the tool is missing, saying how to
# install it, so the suite runs on a contributor's laptop. CI (.ci/run) sets
# GPUGAP_REQUIRE_TOOLS=1: there a missing tool fails the test, so a broken install cannot
# pass as a green run of fewer tests.
REQUIRE_TOOLS = "GPUGAP_REQUIRE_TOOLS"
TOOL_FIX = {
    "nsys": "run bash .ci/install-test-deps.sh as root (Debian's nsys 2023.4 into "
            "/opt/gpugap-nsys), or point GPUGAP_NSYS at an nsys",
    "chromium": "install it (apt-get install chromium) or run bash .ci/install-test-deps.sh "
                "as root, or point GPUGAP_CHROMIUM at one",
}


@cache
def find_tool(tool: str) -> tuple[str | None, str]:
    """(path, '') of *tool* as gpugap finds it, or (None, what gpugap said)."""
    from gpugap.errors import GpugapError

    try:
        if tool == "nsys":
            from gpugap.report.nsys import find_nsys

            return find_nsys().path, ""
        from gpugap.render.timeline_svg import find_chromium

        return find_chromium(), ""
    except GpugapError as exc:
        return None, str(exc)


def require_tool(tool: str) -> str:
    """The path of *tool*; where it is missing, skip the test (or, under
    GPUGAP_REQUIRE_TOOLS=1, fail it) naming the fix."""
    path, said = find_tool(tool)
    if path:
        return path
    reason = f"{tool} not found: {TOOL_FIX[tool]} (gpugap: {said})"
    if os.environ.get(REQUIRE_TOOLS) == "1":
        pytest.fail(f"{reason}; {REQUIRE_TOOLS}=1 makes every tool mandatory", pytrace=False)
    pytest.skip(reason)


def pytest_configure(config):
    for tool in TOOL_FIX:
        config.addinivalue_line(
            "markers", f"needs_{tool}: drives a real {tool}; skips where none is found "
                       f"(fails instead under {REQUIRE_TOOLS}=1, as in CI)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for tool in TOOL_FIX:
        if item.get_closest_marker(f"needs_{tool}"):
            require_tool(tool)
