"""Shared fixtures: the real reports captured on an H200 (tests/data/scenarios, see its
manifest.txt and capture.sh), loaded once per session."""

from __future__ import annotations

import signal
from functools import cache
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SCENARIO_DATA = DATA / "scenarios"


def report_path(name: str) -> Path:
    """tests/data/scenarios/<name>.sqlite, e.g. report_path('h2d-copy-bad')."""
    path = SCENARIO_DATA / f"{name}.sqlite"
    assert path.is_file(), f"missing test report {path}"
    return path


@cache
def load_report(name: str):
    from gpugap.report import load

    return load(report_path(name))


@cache
def analyze_report(name: str):
    from gpugap.analysis import analyze

    return analyze(load_report(name))


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
