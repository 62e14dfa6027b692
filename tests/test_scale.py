"""Same answers at every size, and the fast paths equal the plain ones.

1. A real report tiled 3 times in time (benchmarks/make_large.py, the generator of the
   10-million-kernel benchmark) gives the same accounting and diagnosis, scaled: bucket
   times, counts and costs x3, percentages unchanged, with documented exceptions
   (docs/performance.md):
   - the idle time between two tiles is real GPU idle time, N-1 stretches of it, put in
     the buckets the thread's state says (host work, and the aftermath of the final
     synchronize of the tile before);
   - the phases differ: the original's iterations are its 20 'forward' ranges, the
     tiled report's its 3 'measured' ranges (the outermost repeated level holding the
     work), so launch-gap findings are split over phases differently, and a cause under
     min_share_pct of a phase is left out in one and kept in the other;
   - warmup-latency first-call: "first" is per report: a tiled report has one first
     call of each API, not N.
2. The vectorised, batched and prefetched code paths that make millions of events cheap
   give exactly what a plain implementation gives, on small random and real data.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpugap import intervals as tl
from gpugap.accounting import metrics
from gpugap.analysis import analyze
from gpugap.cli import main
from gpugap.report import load
from tests.conftest import load_report, report_path

ROOT = Path(__file__).resolve().parent.parent
TILES = 3


def _make_large():
    spec = importlib.util.spec_from_file_location("make_large",
                                                  ROOT / "benchmarks" / "make_large.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_large", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("scale") / "moe-x3.sqlite"
    info = _make_large().build(report_path("moe-experts-bad"), out, TILES,
                               gap_ns=1_000_000, quiet=True)
    return out, info


def test_tiling_keeps_every_table_consistent(tiled):
    path, info = tiled
    original = load_report("moe-experts-bad")
    big = load(path)
    assert len(big.kernels) == TILES * len(original.kernels)
    assert len(big.api) == TILES * len(original.api)
    assert len(big.memcpys) == TILES * len(original.memcpys)
    # Every kernel still joins its own launch call: correlation ids stay unique.
    assert (big.kernels["api_start"] >= 0).sum() == \
        TILES * (original.kernels["api_start"] >= 0).sum()
    k0 = original.kernels
    k2 = big.kernels.iloc[2 * len(k0):].reset_index(drop=True)
    shift = 2 * info["period_ns"]
    assert (k2["start"] - k0["start"] == shift).all()
    assert (k2["api_start"] - k0["api_start"] == shift).all()
    assert (k2["name"].astype(str) == k0["name"].astype(str)).all()
    counts = original.nvtx["name"].value_counts()
    assert (big.nvtx["name"].value_counts() == TILES * counts).all()


def test_tiled_report_gives_the_same_answers_scaled(tiled):
    path, _ = tiled
    small, big = analyze(load_report("moe-experts-bad")), analyze(load(path))
    # Percentages of kernel and copy time hold; counts scale.
    for key in ("kernel_overlap_pct", "concurrency", "copy_compute_overlap_pct"):
        assert big.metrics.to_dict()[key] == small.metrics.to_dict()[key], key
    for key in ("kernels", "copies", "memsets", "kernel_time_ns", "copy_time_ns"):
        assert big.metrics.to_dict()[key] == TILES * small.metrics.to_dict()[key], key
    # Every NVTX range: N times the instances, same shares, N times the time.
    by_path = {(r.domain, *r.path): r for r in big.ranges}
    assert len(by_path) == len(big.ranges) == len(small.ranges)
    for r in small.ranges:
        b = by_path[(r.domain, *r.path)]
        assert b.count == TILES * r.count
        for key in ("gpu_busy_pct", "kernel_overlap_pct", "concurrency",
                    "copy_compute_overlap_pct"):
            got, want = b.metrics.to_dict()[key], r.metrics.to_dict()[key]
            assert (got is None) == (want is None), (r.name, key)
            assert want is None or abs(got - want) <= 0.002, (r.name, key, got, want)
        for key in ("kernels", "copies", "memsets", "span_ns", "gpu_busy_ns",
                    "kernel_time_ns"):
            assert b.metrics.to_dict()[key] == TILES * r.metrics.to_dict()[key], (r.name, key)
    # The accounting: every bucket x N, but the N-1 stretches between tiles, which go to
    # host work and the aftermath of each tile's final synchronize.
    s_dev, b_dev = small.accounting.devices[0], big.accounting.devices[0]
    s_tot, b_tot = s_dev.totals_in(), b_dev.totals_in()
    extra = {k: b_tot[k] - TILES * s_tot[k] for k in s_tot if b_tot[k] != TILES * s_tot[k]}
    assert set(extra) == {"host-work", "synchronization"}
    between = (b_dev.window[1] - b_dev.window[0]) - TILES * (s_dev.window[1] - s_dev.window[0])
    assert sum(extra.values()) == between > (TILES - 1) * 1_000_000
    # Findings that do not depend on phases: x N exactly.
    g_small, g_big = totals(small), totals(big)
    for key in (("serialized-streams", "host-launch-bound"), ("small-grid", "undersized-grid")):
        assert g_big[key] == (TILES * g_small[key][0], TILES * g_small[key][1]), key
    assert g_big[("warmup-latency", "first-call")] == g_small[("warmup-latency", "first-call")]


def totals(analysis) -> dict[tuple, tuple[int, int]]:
    """(count, cost) of each rule and cause, over all phases and places."""
    out: dict[tuple, tuple[int, int]] = {}
    for f in analysis.findings:
        count, cost = out.get((f.rule, f.cause), (0, 0))
        out[(f.rule, f.cause)] = (count + f.count, cost + f.cost_ns)
    return out


def test_tiled_report_scales_exactly_inside_the_measured_range(tiled):
    path, _ = tiled
    small = analyze(load_report("moe-experts-bad"), range_name="measured")
    big = analyze(load(path), range_name="measured")
    # Inside the range (no boundary between tiles in it), the accounting scales exactly.
    from gpugap.accounting import ranges as nvtx_ranges

    in_range = [a.accounting.devices[0].totals_in(nvtx_ranges.window(trace, "measured"))
                for a, trace in ((small, load_report("moe-experts-bad")), (big, load(path)))]
    assert in_range[1] == {k: TILES * v for k, v in in_range[0].items()}
    g_small, g_big = totals(small), totals(big)
    for key, (count, cost) in g_small.items():
        if key == ("launch-gap", "host-launch-latency"):
            # Split over different phases; a phase's share under min_share_pct (2% of
            # the range) is left out of the original and kept in the tiled report.
            span = small.metrics.span_ns
            assert 0 <= g_big[key][1] - TILES * cost <= TILES * 0.02 * span
        else:
            assert g_big[key] == (TILES * count, TILES * cost), key
    assert set(g_small) == set(g_big)


# --- the fast paths equal the plain ones ------------------------------------------------

def naive_device_metrics(k, c, m, lo: int, hi: int, windows=None, g=None) -> dict:
    """The metrics' raw sums, the plain way: clip, union, sweep (the original code)."""
    w = windows or (np.array([lo]), np.array([hi]))
    ks, ke, ki = metrics.intersect_each(k["start"], k["end"], w)
    cs, ce, ci = metrics.intersect_each(c["start"], c["end"], w)
    ms, me, _ = metrics.intersect_each(m["start"], m["end"], w)
    empty = np.zeros(0, dtype=np.int64)
    gs, ge, _ = metrics.intersect_each(g["start"], g["end"], w) if g else (empty, empty, None)
    busy = tl.total(tl.union(np.r_[ks, cs, ms, gs], np.r_[ke, ce, me, ge]))
    flag = np.asarray(k["flag"])[ki]
    comm = tl.union(ks[flag == metrics.COMM], ke[flag == metrics.COMM])
    compute = tl.union(np.r_[ks[flag != metrics.COMM], gs], np.r_[ke[flag != metrics.COMM], ge])
    streams = np.asarray(k["stream"])[ki]
    per = defaultdict(list)
    for st, s, e in zip(streams.tolist(), ks.tolist(), ke.tolist(), strict=True):
        per[st].append((s, e))
    ss, se = [], []
    for ivs in per.values():
        u = tl.union([a for a, _ in ivs], [b for _, b in ivs])
        ss += u[0].tolist()
        se += u[1].tolist()
    kernel_union = tl.union(ks, ke)
    times, level = tl.coverage_profile(ss, se)
    overlapped, _ = tl.time_at_level(times, level, lambda lv: lv >= 2)
    return {"busy": busy, "kernel_time": int(sum(e - s for s, e in zip(ss, se, strict=True))),
            "kernel_union": tl.total(kernel_union), "overlapped": overlapped,
            "copy_time": int((ce - cs).sum()),
            "copy_overlap": int(tl.overlap_each(cs, ce, kernel_union).sum()),
            "kernels": int(np.unique(ki[flag != metrics.GRAPH]).size),
            "graphs": int(np.unique(ki[flag == metrics.GRAPH]).size),
            "graph_time": tl.total(tl.union(ks[flag == metrics.GRAPH], ke[flag == metrics.GRAPH])),
            "comm_time": tl.total(comm),
            "comm_hidden": int(tl.overlap_each(comm[0], comm[1], compute).sum()),
            "copies": int(np.unique(ci).size), "memsets": int(ms.size)}


def random_intervals(rng, n: int, span: int, streams: int = 1, longest: int = 50):
    start = np.sort(rng.integers(0, span, n))
    end = start + rng.integers(0, longest, n)
    return {"start": start, "end": end, "stream": rng.integers(0, streams, n)}


@pytest.mark.parametrize("seed", range(6))
def test_batched_metrics_equal_the_plain_sweep(monkeypatch, seed):
    monkeypatch.setattr(metrics, "CHUNK", 7)          # many batches, pieces cut anywhere
    rng = np.random.default_rng(seed)
    k = random_intervals(rng, 300, 4000, streams=4)
    # Kernels of every kind: compute, communication, graph executions (graph-level).
    k["flag"] = rng.integers(0, 3, 300).astype(np.int8)
    c = random_intervals(rng, 30, 4000, longest=200)
    m = random_intervals(rng, 10, 4000)
    g = random_intervals(rng, 8, 4000, longest=300)      # node-level replays: busy only
    lo, hi = int(min(k["start"].min(), c["start"].min(), m["start"].min())), \
        int(max(k["end"].max(), c["end"].max(), m["end"].max()))
    got = metrics._device_metrics(k, c, m, None, (lo, hi), g)
    want = naive_device_metrics(k, c, m, lo, hi, g=g)
    want["memsets"] = int((m["end"] > m["start"]).sum())
    assert got == want
    windows = tl.union(rng.integers(0, 4000, 12), rng.integers(0, 4000, 12) + 300)
    got = metrics._device_metrics(k, c, m, windows, (lo, hi), g)
    assert got == naive_device_metrics(k, c, m, lo, hi, windows, g=g)


def test_reach_search_in_batches_equals_the_running_max(monkeypatch):
    """metrics finds each window's first candidate interval from the running max of the
    ends, built a batch (of 7 here) at a time."""
    monkeypatch.setattr(metrics, "CHUNK", 7)
    rng = np.random.default_rng(8)
    for _ in range(100):
        ends = rng.integers(0, 1_000, int(rng.integers(0, 60)))
        t = rng.integers(-10, 1_100, 30)
        want = np.searchsorted(np.maximum.accumulate(ends), t, side="right")
        assert np.array_equal(metrics._reach_search(ends, t), want)


def test_slice_max_equals_the_plain_max():
    """The range table's projected ends take the max of slices of every kernel's end
    without copying them: what max() of each slice gives."""
    from gpugap.accounting.ranges import _slice_max

    rng = np.random.default_rng(9)
    for _ in range(300):
        n = int(rng.integers(0, 20))
        values = rng.integers(-50, 50, n)
        lo = rng.integers(0, n + 1, 8)
        hi = np.clip(lo + rng.integers(-2, n + 2, 8), 0, n)
        empty = rng.integers(-100, 100, 8)
        want = [values[a:b].max() if b > a else e
                for a, b, e in zip(lo.tolist(), hi.tolist(), empty.tolist(), strict=True)]
        assert _slice_max(values, lo, hi, empty).tolist() == (want if n else empty.tolist())


def test_union_helpers_equal_the_plain_ones():
    rng = np.random.default_rng(7)
    for _ in range(50):
        s = rng.integers(0, 1000, 60)
        e = s + rng.integers(-5, 80, 60)
        order = np.argsort(s, kind="stable")
        want = tl.union(s[order], e[order])
        assert all(np.array_equal(a, b) for a, b in zip(tl.union(s, e), want, strict=True))
        g = rng.integers(0, 3, 60)
        pos = e > s
        gg, gs, ge = metrics.union_by_group(g[pos], s[pos], e[pos])
        for group in range(3):
            sel = (g == group) & (e > s)
            u = tl.union(s[sel], e[sel])
            assert np.array_equal(gs[gg == group], u[0])
            assert np.array_equal(ge[gg == group], u[1])


@pytest.mark.parametrize("batch", [1 << 20, 7])
def test_join_on_correlation_ids_equals_the_sort_join(batch, monkeypatch):
    """match_rows joins the ops (in batches: of 7 here) to their launch calls as a sort
    join does."""
    from gpugap.report import loader
    from gpugap.report.loader import match_rows

    monkeypatch.setattr(loader, "OPS_BATCH", batch)
    rng = np.random.default_rng(3)
    for pids in ([7], [7, 9, 11]):
        api_pid = rng.choice(pids, 500)
        api_corr = rng.integers(-2, 400, 500)
        op_pid = rng.choice(pids, 300)
        op_corr = rng.integers(-2, 420, 300)
        key = (api_pid.astype(np.int64) << 32) | (api_corr & 0xFFFFFFFF)
        valid = np.flatnonzero(api_corr > 0)
        order = np.argsort(key[valid], kind="stable")
        sorted_keys, rows = key[valid][order], valid[order]
        op_key = (op_pid.astype(np.int64) << 32) | (op_corr & 0xFFFFFFFF)
        pos = np.minimum(np.searchsorted(sorted_keys, op_key), sorted_keys.size - 1)
        want = np.where(sorted_keys[pos] == op_key, rows[pos], -1)
        assert np.array_equal(match_rows(op_pid, op_corr, api_pid, api_corr), want)
        # Already in id order (as exported): the no-sort path.
        api_corr = np.arange(1, 501)
        got = match_rows(op_pid, op_corr, np.full(500, pids[0]), api_corr)
        want = np.where((op_pid == pids[0]) & (op_corr >= 1), op_corr - 1, -1)
        assert np.array_equal(got, want)
        # Ops in runs of one launch (a graph's kernels): each run searched once.
        size = rng.integers(1, 6, op_pid.size)
        got = match_rows(np.repeat(op_pid, size), np.repeat(op_corr, size),
                         np.full(500, pids[0]), api_corr)
        assert np.array_equal(got, np.repeat(want, size))
        # Ops' ids of the keys' own type (int32, as exports have them).
        got = match_rows(op_pid, op_corr.astype(np.int32), np.full(500, pids[0]),
                         api_corr.astype(np.int32))
        assert np.array_equal(got, want)


def test_launch_columns_in_batches_equal_one_batch(monkeypatch):
    """attach_launches copies each op's launch call in batches of ops (7 here): the same
    frames as in one batch."""
    from gpugap.report import loader

    path = CAPTURES / "train-workers.sqlite"
    whole = load(path)
    monkeypatch.setattr(loader, "OPS_BATCH", 7)
    sliced = load(path)
    for name in ("kernels", "memcpys", "memsets", "api"):
        pd.testing.assert_frame_equal(getattr(sliced, name), getattr(whole, name))


def test_interval_algebra_equals_the_nanosecond_sets():
    """pieces/intersect/subtract/merge/total_between against Python sets of integers."""
    rng = np.random.default_rng(11)

    def as_set(iv):
        return {t for s, e in zip(iv[0].tolist(), iv[1].tolist(), strict=True)
                for t in range(s, e)}

    for _ in range(60):
        a = tl.union(*(lambda s: (s, s + rng.integers(0, 40, s.size)))(
            np.sort(rng.integers(0, 600, 25))))
        b = tl.union(*(lambda s: (s, s + rng.integers(0, 40, s.size)))(
            np.sort(rng.integers(0, 600, 25))))
        assert as_set(tl.intersect(a, b)) == as_set(a) & as_set(b)
        assert as_set(tl.subtract(a, b)) == as_set(a) - as_set(b)
        assert as_set(tl.merge(a, b)) == as_set(a) | as_set(b)
        ps, pe, idx = tl.pieces(a[0], a[1], b)
        for s, e, i in zip(ps.tolist(), pe.tolist(), idx.tolist(), strict=True):
            assert a[0][i] <= s < e <= a[1][i] and set(range(s, e)) <= as_set(b)
        lo = np.sort(rng.integers(0, 600, 5))
        hi = lo + rng.integers(0, 200, 5)
        got = tl.total_between(b, lo, hi)
        want = [len(as_set(b) & set(range(x, y))) for x, y in zip(lo, hi, strict=True)]
        assert got.tolist() == want


def test_streamed_first_vs_typical_equals_the_sorted_one(monkeypatch):
    from gpugap import scan
    from gpugap.rules import warmup_latency as wl

    monkeypatch.setattr(scan, "ROWS", 13)
    rng = np.random.default_rng(2)
    config = {"min_excess_us": 0.05, "min_ratio": 2, "min_calls": 2}
    for _ in range(30):
        n = 200
        start = np.sort(rng.integers(0, 10_000, n))
        end = start + rng.choice([1, 2, 3, 100, 400], n)
        key = rng.integers(0, 9, n)
        want = wl._first_vs_typical_idx(start, end, key, config)

        def rows_of(part, start=start, end=end, key=key):
            return end[part] - start[part], key[part]

        assert wl._first_vs_typical_stream(n, rows_of, config, 9) == want


def test_merged_ops_are_the_stable_order_by_start():
    trace = load_report("prefetch-pipeline-bad")
    ops = trace.op_index.merged()
    frames = (trace.kernels, trace.memcpys, trace.memsets)
    start = np.concatenate([f["start"].to_numpy() for f in frames])
    source = np.repeat(np.arange(3), [len(f) for f in frames])
    row = np.concatenate([np.arange(len(f)) for f in frames])
    order = np.argsort(start, kind="stable")
    assert np.array_equal(ops.start, start[order])
    assert np.array_equal(ops.source, source[order])
    assert np.array_equal(ops.row, row[order])


CAPTURES = ROOT / "tests" / "data" / "captures"


@pytest.mark.parametrize("name", ["ddp-manual", "train-workers", "small-graph-node"])
def test_op_order_slices_equal_the_merged_arrays(name):
    """OpOrder builds the merged ops slice by slice or at positions, without the arrays
    of the whole device: the same values and types as MergedOps (one device of two, and
    the whole report)."""
    trace = load(CAPTURES / f"{name}.sqlite")
    ix = trace.op_index
    rng = np.random.default_rng(5)
    for device in [None, *ix.devices]:
        order = ix.order(device)
        whole = ix.merged(device)
        columns = ("start", "end", "source", "row")
        n = len(whole)
        assert len(order) == n
        cuts = np.unique(np.r_[0, rng.integers(0, n + 1, 12), n])
        for o0, o1 in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
            for name_, got in zip(columns, order.slice(o0, o1), strict=True):
                want = getattr(whole, name_)[o0:o1]
                assert got.dtype == want.dtype and np.array_equal(got, want)
        at = rng.integers(0, n, 200)
        for name_, got in zip(columns, order.take(at), strict=True):
            assert np.array_equal(got, getattr(whole, name_)[at])
        times = np.r_[whole.start, whole.start + 1, whole.start - 1]
        for side in ("left", "right"):
            assert np.array_equal(order.searchsorted(times, side),
                                  np.searchsorted(whole.start, times, side))
        assert order.bounds() == (int(whole.start.min()),
                                  int(np.maximum(whole.end, whole.start).max()))


def plain_launched_before(work, at):
    """The op each thread launched just before each op at *at*, from the whole launch
    order (launch time, then position), as the accounting once built it."""
    launched = work.api_start
    known = np.flatnonzero(~np.isnan(launched))
    order = known[np.argsort(launched[known], kind="stable")]
    gtid = work.gtid
    by_thread = order[np.argsort(gtid[order], kind="stable")]
    before = np.full(len(work), -1, dtype=np.int64)
    same = gtid[by_thread][1:] == gtid[by_thread][:-1]
    before[by_thread[1:][same]] = by_thread[:-1][same]
    return before[at]


@pytest.mark.parametrize("name", ["train-workers", "small-compile", "ddp-manual",
                                  "small-graph-node"])
def test_launch_walks_equal_the_whole_launch_order(name, monkeypatch):
    """launched_before, launched_by and ends_launched_before walk the ops in slices (of
    5 here) per thread: what the launch order of every op at once gives."""
    from gpugap.accounting.work import device_work
    from gpugap.program import ops as work_module

    monkeypatch.setattr(work_module, "CHUNK_OPS", 5)
    trace = load(CAPTURES / f"{name}.sqlite")
    for device in trace.op_index.devices:
        work = device_work(trace, device)
        at = np.arange(len(work))
        assert np.array_equal(work.launched_before(at), plain_launched_before(work, at))
        launched = work.api_start
        order = np.flatnonzero(~np.isnan(launched))
        order = order[np.argsort(launched[order], kind="stable")]
        times, reach = launched[order], np.maximum.accumulate(work.end[order])
        t = np.r_[times, times + 1, times - 1, 0, 2**62].astype(np.float64)
        k = np.searchsorted(times, t, side="left")
        want = np.where(k > 0, reach[np.maximum(k - 1, 0)], -1)
        assert np.array_equal(work.ends_launched_before(t), want)
        count, reach = work.launched_by(t)
        assert np.array_equal(count, k) and np.array_equal(reach, want)
        # The program model's launches read once (ops.Launches): the same answers, from
        # the sorted launches and, past SORTED_MAX ops, from the walk.
        count, reach = work_module.Launches(work).launched_by(t)
        assert np.array_equal(count, k) and np.array_equal(reach, want)
        with monkeypatch.context() as m:
            m.setattr(work_module, "SORTED_MAX", 0)
            launches = work_module.Launches(work)
            launches.release()
            count, reach = launches.launched_by(t)
        assert np.array_equal(count, k) and np.array_equal(reach, want)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["train-workers", "small-compile", "ddp-manual",
                                  "decode"])
def test_gaps_read_back_from_the_partition_equal_the_union_holes(name, monkeypatch):
    """Gaps are found walking the ops 5 at a time and, once the accounting is built, read
    back from its pieces (blocks of 7 gaps): the holes of the ops' union in the window,
    the op after each (as the walk finds it too), the main launching thread and gap_of
    as computed from the whole arrays."""
    from gpugap.accounting import account, attribution
    from gpugap.program import ops as work_module

    monkeypatch.setattr(work_module, "CHUNK_OPS", 5)
    monkeypatch.setattr(attribution, "CHUNK_GAPS", 7)
    for dev in account(load(CAPTURES / f"{name}.sqlite")).devices.values():
        work, gaps = dev.work, dev.gaps
        gs, ge = tl.gaps(tl.union(work.start, work.end), *dev.window)
        nxt = np.searchsorted(work.start, ge, side="left")
        nxt = np.where(nxt < len(work), nxt, -1)
        assert np.array_equal(gaps.starts(), gs)
        assert np.array_equal(gaps.ends(), ge)
        assert np.array_equal(gaps.next_ops(), nxt)
        scanned_starts, scanned_next, _, _ = attribution._scan(work, dev.window)
        assert np.array_equal(scanned_starts, gs)
        assert np.array_equal(scanned_next, nxt)
        assert np.array_equal(gaps.ends(np.arange(3, len(gaps), 5)), ge[3::5])
        threads = pd.Series(work.gtid[work.gtid >= 0]).value_counts()
        assert gaps.main_gtid == int(threads.index[0])
        t = np.r_[gs, ge, gs - 1, ge - 1, dev.window[0] - 1, dev.window[1]]
        k = np.searchsorted(gs, t, side="right") - 1
        want = np.where((k >= 0) & (t < ge[np.maximum(k, 0)]), k, -1)
        assert np.array_equal(dev.gap_of(t), want)


def test_exclusive_partition_equals_the_nanosecond_ranking():
    """host.exclusive ranks only the intervals that overlap others: its pieces are the
    maximal runs of the best-ranked code at each nanosecond."""
    from gpugap.accounting import host

    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(1, 30))
        spread = 10 if trial % 2 else 400              # overlapping, or mostly apart
        start = rng.integers(0, spread, n)
        end = start + rng.integers(0, 30, n)
        codes = rng.integers(0, 6, n).astype(np.int8)   # 5 is ranked nowhere
        order = [3, 0, 4, 1, 2]
        s, e, c = host.exclusive(start, end, codes, order)
        best = np.full(spread + 40, len(order))
        for a, z, code in zip(start.tolist(), end.tolist(), codes.tolist(), strict=True):
            if code in order:
                best[a:z] = np.minimum(best[a:z], order.index(code))
        t = np.flatnonzero(best < len(order))
        label = best[t]
        new = np.r_[True, (np.diff(t) > 1) | (label[1:] != label[:-1])] if t.size else t
        first = np.flatnonzero(new)
        last = np.r_[first[1:] - 1, t.size - 1] if t.size else first
        assert s.tolist() == t[first].tolist()
        assert e.tolist() == (t[last] + 1).tolist()
        assert c.tolist() == [order[i] for i in label[first].tolist()]


def test_shared_idle_taken_in_pieces_equals_the_whole_sweep():
    """small-grid takes each batch's idle SM time from a sweep (intervals.SharedIdle)
    instead of every kernel's at once: the same floats, whatever the pieces."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        n = 300
        start = np.sort(rng.integers(0, 5_000, n))
        end = start + rng.choice([0, 1, 5, 50, 800, 4_000], n)
        shares = rng.random(n)
        idle, own = tl.shared_idle_each(start, end, shares, chunk=17)
        sweep = tl.SharedIdle(start, end, lambda at, w=shares: w[at], chunk=17)
        cuts = np.unique(np.r_[0, rng.integers(0, n, 6), n])
        got = [sweep.take(a, b) for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(),
                                                strict=True)]
        assert np.array_equal(np.concatenate([g[0] for g in got]), idle)
        assert np.array_equal(np.concatenate([g[1] for g in got]), own)
    with pytest.raises(ValueError):
        tl.SharedIdle(start, end, shares).take(5, 10)


def plain_runs(code, new_range, max_same):
    """serialized-streams' runs over every transition at once (its first version)."""
    m = code.size
    idx = np.arange(m)
    same = code == 0
    cs = np.cumsum(same)
    last_other = np.maximum.accumulate(np.where(same, -1, idx))
    streak_pos = cs - np.where(last_other >= 0, cs[np.maximum(last_other, 0)], 0)
    too_long = same & (streak_pos > max_same)
    carrier = np.maximum.accumulate(np.where(code > 0, idx, -1))
    carried = np.where(carrier >= 0, code[np.maximum(carrier, 0)], -2)
    previous = np.r_[-2, carried[:-1]]
    boundary = ((code == -1) | (carried != previous) | (carried == -2) | (previous == -2)
                | too_long | new_range)
    run = np.cumsum(boundary)
    keep = np.flatnonzero((code != -1) & ~too_long & (carried != -2))
    bounds = np.flatnonzero(np.r_[True, run[keep][1:] != run[keep][:-1]]) if keep.size \
        else keep
    return keep, bounds, carried[keep][bounds]


@pytest.mark.slow
def test_serialized_runs_in_batches_equal_the_whole_sweep(monkeypatch):
    from gpugap import scan
    from gpugap.rules import serialized_streams as ss

    rng = np.random.default_rng(6)
    for _ in range(300):
        m = int(rng.integers(0, 60))
        code = rng.choice([-1, 0, 0, 0, 1, 2, 3, 4, 5], m).astype(np.int8)
        ranges = rng.integers(0, 3, m)
        new_range = np.r_[False, ranges[1:] != ranges[:-1]] if m else np.zeros(0, bool)
        max_same = int(rng.integers(0, 5))
        want = plain_runs(code, new_range, max_same)
        for chunk in (1, 3, 7, 1 << 18):
            monkeypatch.setattr(scan, "ROWS", chunk)
            got = ss._runs({"code": code, "new_range": new_range},
                           {"max_same_stream": max_same})
            for w, g in zip(want, got, strict=True):
                assert np.array_equal(w, g)


@pytest.mark.parametrize("name", ["train-workers", "small-compile", "ddp-manual",
                                  "pipeline"])
def test_batch_uploads_are_the_runs_of_host_to_device_copies(name):
    """The copies that begin a batch's upload, found with numpy, equal those of a walk
    over the device's ops one at a time: the first of each run of host-to-device copies
    one after another, the run 64 KiB or more."""
    from gpugap.accounting.policy import H2D, batch_uploads
    from gpugap.accounting.work import device_work

    trace = load(CAPTURES / f"{name}.sqlite")
    for device in trace.op_index.devices:
        work = device_work(trace, device)
        is_h2d = np.isin(work.bucket, H2D).tolist()
        nbytes = np.nan_to_num(work.gather("bytes", np.arange(len(work)))).tolist()
        want, start, total = [], None, 0.0
        for p in [*range(len(work)), None]:
            if p is not None and is_h2d[p]:
                start, total = (p, 0.0) if start is None else (start, total)
                total += nbytes[p]
                continue
            if start is not None and total >= 65536:
                want.append(start)
            start = None
        got = batch_uploads(work, np.flatnonzero(is_h2d), 65536)
        assert got.tolist() == want


def test_range_labels_equal_the_per_time_strings():
    from gpugap.accounting.labels import range_labels

    trace = load_report("grid-sweep-bad")
    times = np.sort(np.r_[trace.kernels["start"].to_numpy(), trace.nvtx["start"].to_numpy()])
    nv = trace.nvtx[~trace.nvtx["library"]]
    want = np.full(times.shape, "", dtype=object)
    for depth in range(2):
        level = nv[nv["depth"] == depth].sort_values("start")
        s, e = level["start"].to_numpy(), level["end"].to_numpy()
        names = level["name"].to_numpy(dtype=object)
        k = np.searchsorted(s, times, side="right") - 1
        ok = (k >= 0) & (times < e[np.maximum(k, 0)])
        if depth > 0:
            ok &= want != ""
        part = np.where(ok, names[np.maximum(k, 0)], "")
        want = np.where(ok, np.where(want == "", part, want + " > " + part), want)
    assert (range_labels(trace, times) == want).all()


def frames_equal(a, b) -> None:
    for name in ("kernels", "memcpys", "memsets", "api", "syncs", "nvtx"):
        x, y = getattr(a, name), getattr(b, name)
        assert list(x.columns) == list(y.columns), name
        for col in x.columns:
            assert x[col].astype(object).equals(y[col].astype(object)), (name, col)


def test_fast_reader_equals_sqlite3(monkeypatch):
    from gpugap.report import reader

    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)       # every table through ADBC
    fast = load(report_path("h2d-copy-bad"))
    monkeypatch.setattr(reader, "adbc_available", lambda: False)
    plain = load(report_path("h2d-copy-bad"))
    frames_equal(fast, plain)
    assert analyze(fast).to_dict() == analyze(plain).to_dict()


def test_fast_reader_falls_back_on_values_it_cannot_type(monkeypatch, tmp_path):
    import shutil
    import sqlite3

    from gpugap.report import reader

    path = tmp_path / "handbuilt_text_in_int.sqlite"
    shutil.copy(report_path("default-stream-bad"), path)
    with sqlite3.connect(path) as conn:      # a REAL where CUPTI writes integers
        conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 2.5 WHERE rowid = 30")
    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)
    trace = load(path)
    assert trace.kernels["grid_x"].max() >= 1 and len(trace.kernels) == 40


def test_prefetched_cli_run_equals_a_plain_one(capsys, monkeypatch):
    from gpugap.report import reader

    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)       # let the small report prefetch
    path = str(report_path("moe-experts-bad"))
    assert main(["analyze", "--json", "--no-config", path]) == 0
    prefetched = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(reader, "adbc_available", lambda: False)
    assert main(["analyze", "--json", "--no-config", path]) == 0
    assert json.loads(capsys.readouterr().out) == prefetched


@pytest.mark.parametrize("parts", [2, 3])
def test_reading_in_rowid_parts_equals_one_read(monkeypatch, parts):
    """A big table is read in rowid ranges at once (one per core; Database.read and the
    prefetch): the arrays put end to end equal one read of the table, dtypes (narrowed
    integers) included, with or without a WHERE."""
    from gpugap.report import database, reader
    from gpugap.report.columns import big_reads

    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)            # the ADBC path
    monkeypatch.setattr(database, "SPLIT_ROWS", 1000)
    monkeypatch.setattr(database, "MAX_PARTS", parts)
    monkeypatch.setattr(database.os, "cpu_count", lambda: parts)
    path = report_path("moe-experts-bad")
    db = database.Database(path)
    try:
        # The tables big enough to split (the copies and memsets are not).
        split_reads = [r for r in big_reads(db)
                       if reader.row_bound(db, r.table) >= parts * database.SPLIT_ROWS]
        assert {r.table for r in split_reads} >= {"CUPTI_ACTIVITY_KIND_KERNEL",
                                                  "CUPTI_ACTIVITY_KIND_RUNTIME"}
        for read in split_reads:
            ranges = database.row_parts(db, read.table, reader.row_bound(db, read.table))
            assert len(ranges) == parts
            for where in (read.where, " AND ".join(w for w in (read.where, "start % 3 = 0")
                                                   if w)):
                whole = reader.read_columns(db, read.table, list(read.cols), where)
                for split in (database.read_parts(path, read.table, list(read.cols), where,
                                                  ranges),
                              db.read(read.table, list(read.cols), where)):
                    assert list(split) == list(whole)
                    for name, values in whole.items():
                        assert split[name].dtype == values.dtype, (read.table, name)
                        assert np.array_equal(split[name], values), (read.table, name)
    finally:
        db.close()


def test_a_failing_part_fails_the_read(monkeypatch):
    """An error in one part's thread is the read's error (one line: unreadable), never
    a read with a part missing."""
    from gpugap.errors import ReportError
    from gpugap.report import database, reader

    monkeypatch.setattr(database, "SPLIT_ROWS", 1000)
    monkeypatch.setattr(database.os, "cpu_count", lambda: 2)
    db = database.Database(report_path("moe-experts-bad"))
    real = reader.read_columns
    calls = []

    def second_fails(source, table, columns, where="", capacity=None, fast_from=None):
        calls.append(where)
        if "rowid >" in where:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(source, table, columns, where, capacity, fast_from)

    monkeypatch.setattr(database, "read_columns", second_fails)
    try:
        with pytest.raises(ReportError, match="could not be read"):
            db.read("CUPTI_ACTIVITY_KIND_RUNTIME", [reader.Col("start", '"start"')])
        assert len(calls) == 2
    finally:
        db.close()


def test_narrow_types_keep_values():
    trace = load_report("grid-sweep-bad")
    k = trace.kernels
    assert k["stream"].dtype.itemsize <= 4 and k["corr"].dtype == np.int32
    blocks = (k["grid_x"].astype(np.int64) * k["grid_y"] * k["grid_z"]).to_numpy()
    assert np.array_equal(k["blocks"].to_numpy(np.int64), blocks)
    assert isinstance(trace.api["name"].dtype, pd.CategoricalDtype)


def test_fast_path_leaves_the_report_untouched(capsys, monkeypatch, tmp_path):
    import hashlib
    import os
    import shutil

    from gpugap.report import reader

    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)   # prefetch, ADBC and OSRT windows
    report = tmp_path / "r.sqlite"
    shutil.copy(report_path("cublas-warmup-bad"), report)
    os.chmod(report, 0o444)
    before = (hashlib.sha256(report.read_bytes()).hexdigest(), report.stat().st_mtime)
    assert main(["analyze", "--json", "--no-config", str(report)]) == 0
    capsys.readouterr()
    assert (hashlib.sha256(report.read_bytes()).hexdigest(), report.stat().st_mtime) == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.sqlite"]


def test_top_calls_by_code_equal_by_name():
    from gpugap.rules.evidence import _top_coded

    def by_name(names, ns, n):          # the plain way: a dict per name
        totals: dict[str, tuple[int, int]] = {}
        for name, v in zip(names, ns, strict=True):
            t, c = totals.get(name, (0, 0))
            totals[name] = (t + v, c + 1)
        items = sorted(totals.items())
        items.sort(key=lambda kv: -kv[1][0])
        return [(name, calls, total) for name, (total, calls) in items[:n]]

    rng = np.random.default_rng(4)
    texts = np.array(list("abcdefgh"), dtype=object)
    for _ in range(300):
        codes = rng.integers(0, 8, rng.integers(1, 40))
        ns = rng.choice([1, 2, 3, 5, 10], codes.size)
        n = int(rng.integers(1, 6))
        assert _top_coded(codes, texts, ns, n) == by_name(texts[codes].tolist(), ns.tolist(), n)


def test_a_small_report_is_read_through_mapped_memory(capsys, monkeypatch):
    """The connections (sqlite3's and the fast reader's) map a report under
    database.MMAP_MAX_BYTES (SQLite's mmap_size) and read a bigger one page by page; the
    answers are the same either way."""
    from gpugap.report import database, reader

    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)      # the fast reader's connections too
    path = report_path("moe-experts-bad")
    answers = []
    for limit in (1 << 30, 0):
        monkeypatch.setattr(database, "MMAP_MAX_BYTES", limit)
        db = database.Database(path)
        try:
            mapped = db.conn.execute("PRAGMA mmap_size").fetchone()[0]
        finally:
            db.close()
        assert mapped == (path.stat().st_size if limit else 0)
        assert main(["analyze", "--json", "--no-config", str(path)]) == 0
        answers.append(json.loads(capsys.readouterr().out))
    assert answers[0] == answers[1]
