"""Metrics checked against an independent, deliberately naive implementation (pure-Python
sweeps over the same real events), and the interval algebra on small exact cases."""

from __future__ import annotations

import numpy as np
import pytest

from gpugap import intervals as tl
from gpugap.accounting import metrics
from gpugap.accounting import ranges as nvtx_ranges
from tests.conftest import load_report

REPORTS = ["h2d-copy-bad", "h2d-copy-good", "default-stream-bad", "default-stream-good",
           "grid-sweep-bad", "grid-sweep-good", "prefetch-pipeline-good", "moe-experts-good"]


def naive_union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def naive_clip(intervals, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def naive_overlap(a: tuple[int, int], union: list[tuple[int, int]]) -> int:
    return sum(max(0, min(a[1], e) - max(a[0], s)) for s, e in union)


def naive_metrics(trace, lo: int, hi: int) -> dict:
    k = [(int(r.start), int(r.end), int(r.stream)) for r in trace.kernels.itertuples()]
    c = [(int(r.start), int(r.end)) for r in trace.memcpys.itertuples()]
    m = [(int(r.start), int(r.end)) for r in trace.memsets.itertuples()]
    busy = sum(e - s for s, e in naive_clip(naive_union([(s, e) for s, e, _ in k] + c + m),
                                            lo, hi))
    # Per-stream unions, then a sweep counting active streams.
    per_stream = {}
    for s, e, st in k:
        per_stream.setdefault(st, []).append((s, e))
    edges = []
    for ivs in per_stream.values():
        for s, e in naive_clip(naive_union(ivs), lo, hi):
            edges += [(s, 1), (e, -1)]
    edges.sort()
    active, last, total, overlapped = 0, None, 0, 0
    for t, d in edges:
        if last is not None and active:
            total += active * (t - last)
            if active >= 2:
                overlapped += active * (t - last)
        active += d
        last = t
    kernel_union = naive_clip(naive_union([(s, e) for s, e, _ in k]), lo, hi)
    copies = naive_clip(c, lo, hi)
    copy_time = sum(e - s for s, e in copies)
    copy_overlap = sum(naive_overlap(x, kernel_union) for x in copies)
    union_len = sum(e - s for s, e in kernel_union)
    return {
        "gpu_busy_pct": 100 * busy / (hi - lo),
        "kernel_overlap_pct": None if total == 0 else 100 * overlapped / total,
        "concurrency": None if union_len == 0 else total / union_len,
        "copy_compute_overlap_pct": None if copy_time == 0 else 100 * copy_overlap / copy_time,
    }


def close(a, b, tol=0.01):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol


@pytest.mark.parametrize("name", REPORTS)
def test_measured_range_metrics_match_naive_sweep(name: str) -> None:
    trace = load_report(name)
    window = nvtx_ranges.window(trace, "measured")
    assert window[0].size == 1
    lo, hi = int(window[0][0]), int(window[1][0])
    got = metrics.compute(trace, window)
    want = naive_metrics(trace, lo, hi)
    assert got.span_ns == hi - lo
    for key in ("gpu_busy_pct", "kernel_overlap_pct", "copy_compute_overlap_pct"):
        assert close(getattr(got, key), want[key]), (key, getattr(got, key), want[key])
    assert close(got.concurrency, want["concurrency"], tol=1e-3)
    assert close(got.gpu_idle_pct, 100 - want["gpu_busy_pct"])


@pytest.mark.parametrize("name", ["h2d-copy-bad", "default-stream-good", "moe-experts-bad"])
def test_whole_report_metrics_match_naive_sweep(name: str) -> None:
    trace = load_report(name)
    ops = trace.gpu_ops
    lo, hi = int(ops["start"].min()), int(ops["end"].max())
    got = metrics.compute(trace)
    want = naive_metrics(trace, lo, hi)
    assert got.span_ns == hi - lo
    assert close(got.gpu_busy_pct, want["gpu_busy_pct"])
    assert close(got.kernel_overlap_pct, want["kernel_overlap_pct"])
    assert got.kernels == len(trace.kernels)


def test_the_puzzles_show_in_the_numbers() -> None:
    def m(name):
        trace = load_report(name)
        return metrics.compute(trace, nvtx_ranges.window(trace, "measured"))

    # Pinned copies overlap the GEMMs; pageable ones cannot.
    assert m("h2d-copy-bad").copy_compute_overlap_pct == 0.0
    assert m("h2d-copy-good").copy_compute_overlap_pct > 80
    # Per-thread default stream lets the five kernels overlap; the legacy one does not.
    assert m("default-stream-bad").kernel_overlap_pct == 0.0
    assert m("default-stream-good").kernel_overlap_pct > 90
    # Pipelining overlaps copies with compute; one stream cannot.
    assert m("prefetch-pipeline-bad").copy_compute_overlap_pct == 0.0
    assert m("prefetch-pipeline-good").copy_compute_overlap_pct > 80
    # No copies in the region: the metric is null, not 0.
    assert m("default-stream-good").copy_compute_overlap_pct is None


def test_union_gaps_and_overlap_on_exact_cases() -> None:
    u = tl.union([0, 5, 2, 20, 30], [3, 10, 4, 25, 30])   # [30,30) is empty
    assert u[0].tolist() == [0, 5, 20] and u[1].tolist() == [4, 10, 25]
    gs, ge = tl.gaps(u)
    assert gs.tolist() == [4, 10] and ge.tolist() == [5, 20]
    assert tl.overlap_each([0, 3, 9, 26], [2, 21, 30, 27], u).tolist() == [2, 7, 6, 0]
    assert tl.intersect_total(u, tl.union([2, 22], [6, 100])) == 3 + 3
    times, level = tl.coverage_profile([0, 0, 5], [10, 5, 10])
    assert tl.time_at_level(times, level, lambda lv: lv >= 2) == (20, 10)
    assert tl.within([0, 4, 5, 24, 25], u).tolist() == [True, False, True, True, False]


def test_intersect_each_splits_across_windows() -> None:
    windows = (np.array([0, 10], dtype=np.int64), np.array([5, 20], dtype=np.int64))
    s, e, idx = metrics.intersect_each(np.array([3, 12, 30]), np.array([15, 13, 40]), windows)
    assert list(zip(s.tolist(), e.tolist(), idx.tolist(), strict=True)) == [
        (3, 5, 0), (10, 15, 0), (12, 13, 1)]


def test_shared_idle_each_matches_a_nanosecond_grid() -> None:
    """shared_idle_each against a brute-force walk over every nanosecond: at each instant
    the unused share 1 - min(1, sum of shares) and the instant itself are split equally
    among the running intervals. Unsorted input, empty intervals, and batches small
    enough that intervals are carried across many of them."""
    rng = np.random.default_rng(7)
    n = 400
    starts = rng.integers(0, 20_000, n)
    ends = starts + rng.integers(0, 900, n)
    shares = rng.random(n) * 0.6
    idle, own = tl.shared_idle_each(starts, ends, shares, chunk=13)
    grid = np.arange(int(ends.max()))
    running = (starts[:, None] <= grid[None, :]) & (ends[:, None] > grid[None, :])
    count = running.sum(0)
    level = (running * shares[:, None]).sum(0)
    per = np.divide(1.0, count, out=np.zeros(count.size), where=count > 0)
    expect_idle = (running * ((1 - np.minimum(level, 1)) * per)).sum(1)
    expect_own = (running * per).sum(1)
    np.testing.assert_allclose(idle, expect_idle, atol=1e-6)
    np.testing.assert_allclose(own, expect_own, atol=1e-6)
    assert own.sum() == pytest.approx((count > 0).sum())
    # Exact small cases: alone; two that fill the resource together; half overlap.
    assert tl.shared_idle_each([0], [100], [0.25])[0].tolist() == [75.0]
    assert tl.shared_idle_each([0, 0], [100, 100], [0.6, 0.6])[0].tolist() == [0.0, 0.0]
    idle2, own2 = tl.shared_idle_each([0, 50], [100, 150], [0.25, 0.25])
    assert idle2.tolist() == [50.0, 50.0] and own2.tolist() == [75.0, 75.0]
