"""Derived state: what the layers above report/ compute from a Trace lives in their own
declared indexes (gpugap.report.trace.Derived), never on the Trace itself; one structure
holds a thread's calls (host.ApiCalls); copies are categorised through the loader's
join of copies to their calls."""

from __future__ import annotations

import sys
from functools import cache, cached_property
from pathlib import Path

import numpy as np
import pytest

from gpugap.accounting import AccountingIndex, host
from gpugap.accounting.labels import RangeLabels
from gpugap.analysis import analyze
from gpugap.program.nvtx import NvtxIndex, program_ranges
from gpugap.report import load
from gpugap.report.loader import match_rows
from gpugap.report.trace import Derived, Trace

CAPTURES = Path(__file__).parent / "data" / "captures"


@cache
def capture(name: str) -> Trace:
    return load(CAPTURES / f"{name}.sqlite")


def declared(cls: type) -> set[str]:
    """What a Trace may hold: its declared attributes and its own cached properties."""
    return (set(cls.__annotations__)
            | {k for k, v in vars(cls).items() if isinstance(v, cached_property)})


def test_no_layer_above_report_sets_anything_on_a_trace(monkeypatch):
    """A whole analysis of a real capture: nothing outside report/ sets an attribute of
    the Trace, and the trace holds nothing but what report/ declares; what the layers
    above derived sits in their indexes, one per layer."""
    trace = load(CAPTURES / "eval-pageable.sqlite")
    setter = Trace.__setattr__
    outside: list[tuple[str, str]] = []

    def guarded(self, name, value):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if not caller.startswith("gpugap.report"):
            outside.append((caller, name))
        setter(self, name, value)

    monkeypatch.setattr(Trace, "__setattr__", guarded)
    result = analyze(trace)
    monkeypatch.undo()
    assert result.findings and result.ranges        # the rules and the range table ran
    assert outside == []
    assert set(vars(trace)) <= declared(Trace)
    assert set(trace.derived) == {AccountingIndex, NvtxIndex, RangeLabels}
    for kind, index in trace.derived.items():
        assert issubclass(kind, Derived) and type(index) is kind
        assert index.trace is trace
    # The accounting hands on the index it computed; what it read is there, once.
    assert result.accounting is not None
    index = result.accounting.index
    assert index is AccountingIndex.of(trace)
    assert "api_categories" in vars(index) and "calls" in vars(index)


def test_a_copy_of_a_trace_starts_without_derived_state():
    """Trace.replace (tests replace a frame so) gives a trace whose indexes are
    its own: nothing derived from the original's frames carries over."""
    trace = capture("eval-pageable")
    before = len(program_ranges(trace))
    assert NvtxIndex in trace.derived
    copy = trace.replace(nvtx=trace.nvtx.iloc[:3])
    assert copy.derived == {}
    assert len(program_ranges(copy)) <= 3 < before
    assert NvtxIndex.of(copy) is not NvtxIndex.of(trace)


def test_copy_categories_reuse_the_loaders_join(monkeypatch):
    """The loader keeps the api row of each copy (Trace.memcpy_calls): the categories of
    copy calls come from it, without joining again; a trace without it (not from the
    loader) joins them, with the same result."""
    trace = capture("eval-pageable")
    m, api = trace.memcpys, trace.api
    joined = match_rows(m["pid"].to_numpy(), m["corr"].to_numpy(), api["pid"].to_numpy(),
                        api["corr"].to_numpy())
    assert trace.memcpy_calls is not None and (trace.memcpy_calls >= 0).any()
    assert np.array_equal(trace.memcpy_calls, joined)
    unjoined = trace.replace(memcpy_calls=None)
    want = host.api_categories(unjoined)

    def no_second_join(*args):
        raise AssertionError("the copies were joined to their calls again")

    monkeypatch.setattr(host, "match_rows", no_second_join)
    got = host.api_categories(trace)
    assert np.array_equal(got, want)
    pageable = (m["kind"] == "Host-to-Device") & (m["src_kind"] == "Pageable")
    assert pageable.any()             # the capture's point: blocking pageable uploads
    assert (got[trace.memcpy_calls[pageable.to_numpy()]] == host.BLOCKING).all()


@pytest.mark.parametrize("name", ["train-workers", "small-compile"])
def test_a_threads_calls_in_a_window_are_every_call_of_it_there(name):
    """host.ApiCalls (the one structure of a thread's calls) finds, for windows of every
    thread of a real capture, exactly the calls a scan of the frame finds: those that
    overlap the window, and those that start in it."""
    trace = capture(name)
    calls = AccountingIndex(trace).calls
    api = trace.api
    start, end = api["start"].to_numpy(), api["end"].to_numpy()
    gtid = api["gtid"].to_numpy()
    rng = np.random.default_rng(7)
    lo_all, hi_all = int(start.min()), int(end.max())
    threads = np.unique(gtid).tolist()
    assert len(threads) > 1
    for g in threads:
        for width in (1_000, 100_000, 50_000_000):
            for lo in rng.integers(lo_all - width, hi_all, 20).tolist():
                hi = lo + width
                want = np.flatnonzero((gtid == g) & (end > lo) & (start < hi))
                got = calls.rows(calls.overlapping(g, lo, hi))
                assert sorted(got.tolist()) == want.tolist()
                want = np.flatnonzero((gtid == g) & (start >= lo) & (start <= hi))
                got = calls.rows(calls.starting(g, lo, hi))
                assert got.tolist() == want.tolist()
                assert calls.names(calls.starting(g, lo, hi)) == \
                    api["name"].astype(str).to_numpy()[want].tolist()
