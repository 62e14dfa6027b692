"""The accounting against a brute-force nanosecond sweep on real captures.

The sweep re-implements the attribution rules (gpugap.accounting.policy's docstring)
per nanosecond with plain numpy arrays: every op painted onto the nanoseconds it covers,
every CUDA call of the responsible thread painted onto its own, no interval algebra
shared with the code under test. Windows are sampled across each capture (start-up,
steady state, around idle gaps); inside each, the sweep's count of nanoseconds per
bucket must equal the accounting's exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gpugap
from gpugap import intervals as tl
from gpugap.accounting import account, policy
from gpugap.accounting import host as hostmod
from gpugap.accounting.buckets import BUSY_IDS, CODE, IDS
from gpugap.accounting.index import AccountingIndex
from gpugap.program import understand as acc_program
from gpugap.report import load
from tests.conftest import corpus_capture, load_report

CAPTURES = Path(__file__).parent / "data" / "captures"
NAMES = ["train-workers0", "decode", "sync-item", "alloc-nocache", "eval-pageable",
         "pipeline", "small-eager", "small-compile", "small-graph", "ddp-manual"]
WINDOW_NS = 150_000
COMPILE_RANK = -1           # compiling outranks every call category (lower ranks first)




def brute_force(trace, dev, lo: int, hi: int) -> dict[str, int]:
    work, settings = dev.work, dev.settings
    n = hi - lo
    prio = {CODE[b]: i for i, b in enumerate(BUSY_IDS)}
    best = np.full(n, len(prio), dtype=np.int64)
    for s, e, b in zip(work.start.tolist(), work.end.tolist(), work.bucket.tolist(),
                       strict=True):
        if e <= lo or s >= hi or e <= s:
            continue
        a, z = max(s, lo) - lo, min(e, hi) - lo
        best[a:z] = np.minimum(best[a:z], prio[b])
    busy_ids = [CODE[b] for b in BUSY_IDS]
    out = np.full(n, -1, dtype=np.int64)
    busy = best < len(prio)
    out[busy] = np.array(busy_ids)[best[busy]]
    # Idle nanoseconds, gap by gap (a gap may extend beyond the window).
    ends = work.end[work.end > work.start]
    w0, w1 = dev.window
    values, freq = np.unique(work.gtid[work.gtid >= 0], return_counts=True)
    main = int(values[np.argmax(freq)])         # the main launching thread
    idle = np.flatnonzero(~busy)
    # Runs of idle nanoseconds.
    run_start = idle[np.r_[True, np.diff(idle) > 1]] if idle.size else idle
    run_end = idle[np.r_[np.diff(idle) > 1, True]] + 1 if idle.size else idle
    api = trace.api
    cats = hostmod.api_categories(trace)
    program = acc_program(trace)
    waits = hostmod.ThreadWaits.of(program, AccountingIndex.of(trace).calls)
    spans = program.compile_spans
    cw_s, cw_e = policy.compile_windows(work, program.devices[dev.device].driver,
                                             tl.union(spans.start, spans.end))
    h2d = (CODE["copy-h2d-pageable"], CODE["copy-h2d-pinned"])
    for ra, rz in zip(run_start.tolist(), run_end.tolist(), strict=True):
        t0 = lo + ra
        ended = ends[ends <= t0]
        gap_start = int(ended.max()) if ended.size else w0
        gap_start = max(gap_start, w0)
        later = np.flatnonzero(work.start > t0)
        later = later[work.end[later] > work.start[later]] if later.size else later
        if later.size:
            nxt = int(later[np.argmin(work.start[later])])
            # the first op starting at the gap's end (ties: the earliest in start order)
            nxt = int(np.flatnonzero(work.start == work.start[nxt])[0])
            gap_end = int(work.start[nxt])
            gtid = int(work.gtid[nxt])
            api_end = work.gather("api_end", [nxt])[0]
        else:
            nxt, gap_end, gtid, api_end = -1, w1, main, np.nan
        seg = np.arange(t0, lo + rz, dtype=np.int64)
        labels = np.full(seg.size, -1, dtype=np.int64)
        if nxt >= 0 and not np.isnan(api_end):
            q0 = max(int(api_end), gap_start)
            if gap_end - q0 >= settings.queued_min_us * 1e3:
                labels[seg >= q0] = CODE["queued-wait"]
        if nxt >= 0 and gtid < 0:
            labels[labels < 0] = CODE["unknown"]
            out[ra:rz] = labels
            continue
        # Batch upload: an H2D copy big enough, not preceded by an H2D of its thread,
        # launched once the iterations have begun.
        it = dev.phases.iterations
        from_ns = it.cpu_start[0] if it is not None else dev.phases.spans["steady"][0]
        is_input = False
        if (nxt >= 0 and work.bucket[nxt] in h2d
                and work.gather("bytes", [nxt])[0] >= settings.input_min_bytes
                and work.api_start[nxt] >= from_ns):
            mine = np.flatnonzero((work.gtid == gtid) & ~np.isnan(work.api_start))
            mine = mine[np.argsort(work.api_start[mine], kind="stable")]
            k = int(np.flatnonzero(mine == nxt)[0])
            is_input = k == 0 or work.bucket[mine[k - 1]] not in h2d
        # Did the gap begin as a batch's results came back (a big device-to-host copy the
        # last op before it), or between two reads back (a loop over read-back values)?
        before = np.flatnonzero(work.start < gap_start)
        prev = int(before[-1]) if before.size else -1
        d2h = (CODE["copy-d2h-pageable"], CODE["copy-d2h-pinned"])
        is_results = bool(prev >= 0 and work.bucket[prev] in d2h
                          and work.end[prev] >= gap_start - 1_000
                          and (work.gather("bytes", [prev])[0] >= settings.input_min_bytes
                               or (nxt >= 0 and work.bucket[nxt] in d2h)))
        # The next op a kernel Triton generated (torch.compile) or cuDNN built for the
        # shape, or a memset (its workspace) right before one?
        def built(i: int) -> bool:
            return bool(work.source[i] == 0 and str(trace.kernels["name"].iloc[
                work.row[i]]).startswith(("triton_", "cudnn_generated_")))
        is_jit = nxt >= 0 and (built(nxt) or (
            work.bucket[nxt] == CODE["memset"] and nxt + 1 < work.start.size
            and built(nxt + 1)))
        # The thread's state: the highest-priority category of the calls covering a ns.
        rows = np.flatnonzero(api["gtid"].to_numpy() == gtid)
        s_all, e_all = api["start"].to_numpy()[rows], api["end"].to_numpy()[rows]
        c_all = cats[rows]
        # nsys's library handle creations count as module loading too.
        nv = trace.nvtx
        inits = nv[nv["library"] & (nv["gtid"] == gtid)
                   & nv["name"].astype(str).str.contains("create|init", case=False)]
        s_all = np.r_[s_all, inits["start"].to_numpy()]
        e_all = np.r_[e_all, inits["end"].to_numpy()]
        c_all = np.r_[c_all, np.full(len(inits), hostmod.MODULE)]
        # Waits on other threads while every launcher of the process waited (OS runtime).
        ws, we = waits.idle(gtid)
        s_all, e_all = np.r_[s_all, ws], np.r_[e_all, we]
        c_all = np.r_[c_all, np.full(ws.size, hostmod.WAIT)]
        # A compiler ran in the gap: compiling from its start to the compile window's end
        # (it outranks every call: COMPILE_RANK below all categories).
        k = int(np.searchsorted(cw_s, gap_end, side="left")) - 1
        compile_end = min(int(cw_e[k]), gap_end) if k >= 0 and cw_e[k] > gap_start else None
        if compile_end is not None:
            s_all, e_all = np.r_[s_all, gap_start], np.r_[e_all, compile_end]
            c_all = np.r_[c_all, COMPILE_RANK]

        def state_at(u: int, s_all=s_all, e_all=e_all, c_all=c_all) -> int:
            covering = (s_all <= u) & (e_all > u)
            return int(c_all[covering].min()) if covering.any() else hostmod.OUTSIDE

        first = int(seg[0])
        edges = np.unique(np.r_[s_all, e_all])
        # Blocked as the gap began? Since when (the lead it lost)?
        c0 = state_at(gap_start)
        lead = 0
        if 0 <= c0 < hostmod.LAUNCH:
            since = gap_start
            for b in edges[edges <= gap_start][::-1].tolist():
                since = b
                if state_at(b - 1) != c0:
                    break
            lead = gap_start - since
        # The gap's remainder (before any queued part), segment by segment between call
        # boundaries: where the module loads begin and end, and, before this window,
        # how much host time was eligible for the aftermath and what blocked last.
        remainder_end = q0 if nxt >= 0 and not np.isnan(api_end) and \
            gap_end - q0 >= settings.queued_min_us * 1e3 else gap_end
        inner = edges[(edges > gap_start) & (edges < remainder_end)]
        points = np.r_[gap_start, inner, remainder_end].astype(np.int64)
        segments = [(a0, z0, state_at(a0)) for a0, z0 in
                    zip(points[:-1].tolist(), points[1:].tolist(), strict=True) if z0 > a0]
        load_spans = [(a0, z0) for a0, z0, c in segments if c == hostmod.MODULE]
        load_from = load_spans[0][0] if load_spans else None
        load_to = load_spans[-1][1] if load_spans else None
        compile_to = load_to if (is_jit or compile_end is not None) and load_to is not None \
            else gap_start
        host_before, initial = 0, -1
        for a0, z0, c in segments:
            if a0 >= first:
                break
            z0 = min(z0, first)
            if 0 <= c < hostmod.LAUNCH:
                initial = c
            elif c not in (COMPILE_RANK, hostmod.WAIT) \
                    and not (load_from is not None and a0 >= load_from and z0 <= load_to) \
                    and not z0 <= compile_to:
                host_before += z0 - a0
        nothing = 99                       # no call, no wait: OUTSIDE once painted
        state = np.full(seg.size, nothing, dtype=np.int64)
        for a0, z0, c in zip(s_all.tolist(), e_all.tolist(), c_all.tolist(), strict=True):
            a, z = max(a0, first) - first, min(z0, first + seg.size) - first
            if z > a:
                state[a:z] = np.minimum(state[a:z], c)
        state[state == nothing] = hostmod.OUTSIDE
        blocking = (state >= 0) & (state < hostmod.LAUNCH)
        loading = (~blocking & (load_from is not None)
                   & (seg >= (load_from or 0)) & (seg < (load_to or 0)))
        idx = np.maximum.accumulate(np.where(blocking, np.arange(seg.size), -1))
        last_block = np.where(idx >= 0, state[np.maximum(idx, 0)], initial)
        # The k-th eligible host nanosecond of the gap is aftermath while k < lead.
        compiling = (seg < compile_to) | (state == COMPILE_RANK)
        long = gap_end - gap_start >= dev.host_work_gap_ns
        eligible = ~blocking & ~loading & ~compiling & (not is_input) \
            & (not (is_results and long)) & (state != hostmod.WAIT)
        host_rank = host_before + np.cumsum(eligible) - 1
        in_lead = eligible & (host_rank < lead)
        host_bucket = [CODE["module-load"], CODE["synchronization"], CODE["allocation"],
                       CODE["blocking-copy"]]
        fill = np.full(seg.size, CODE["host-work"] if long else CODE["launch-bound"])
        if is_input:
            fill = np.full(seg.size, CODE["input"])
        if is_results and long:
            fill = np.full(seg.size, CODE["results"])
        fill = np.where(long & (state == hostmod.WAIT), CODE["thread-wait"], fill)
        fill = np.where(loading, CODE["module-load"], fill)
        fill = np.where(in_lead & (last_block >= 0),
                        np.array(host_bucket)[np.maximum(last_block, 0)], fill)
        fill = np.where(blocking, np.array(host_bucket)[np.minimum(state, 3)], fill)
        fill = np.where(compiling, CODE["compilation"], fill)
        labels = np.where(labels < 0, fill, labels)
        out[ra:rz] = labels
    assert (out >= 0).all()
    counts = np.bincount(out, minlength=len(IDS))
    return {b: int(counts[i]) for i, b in enumerate(IDS)}


def sample_windows(dev, k: int, rng) -> list[int]:
    lo, hi = dev.window
    starts = [lo, dev.phases.spans["steady"][0]]
    long_gaps = np.flatnonzero(dev.gaps.ends() - dev.gaps.starts() > 20_000)
    for g in rng.choice(long_gaps, size=min(k, long_gaps.size), replace=False).tolist():
        starts.append(int(dev.gaps.starts(g)) - WINDOW_NS // 3)
    starts += rng.integers(lo, max(lo + 1, hi - WINDOW_NS), size=k).tolist()
    return [min(max(s, lo), hi - WINDOW_NS) for s in starts]


def tiles(dev) -> None:
    """Each bucket's pieces sorted and disjoint; all of them together, in time order,
    one after another from the window's start to its end."""
    for s, e in dev.by_bucket.values():
        assert (e > s).all() and (s[1:] >= e[:-1]).all()
    s, e, _ = dev.pieces(*dev.window)
    assert s[0] == dev.window[0] and e[-1] == dev.window[1]
    assert (s[1:] == e[:-1]).all() and (e > s).all()
    blocks = dev.partition.block_start
    assert blocks[0] == dev.window[0] and blocks[-1] == dev.window[1]


# Corpus captures whose gaps hold the later causes: waiting on another thread (a server
# waiting for requests), work on results read back (an evaluation loop's numpy).
CORPUS_NAMES = ["pt-server", "pt-eval-numpy"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES + CORPUS_NAMES)
def test_accounting_matches_nanosecond_sweep(name):
    trace = load(CAPTURES / f"{name}.sqlite" if name in NAMES else corpus_capture(name))
    acc = account(trace)
    rng = np.random.default_rng(7)
    for dev in acc.devices.values():
        # The buckets tile the window exactly.
        lo, hi = dev.window
        assert sum(dev.totals_in().values()) == hi - lo
        tiles(dev)
        for a in sample_windows(dev, 4, rng):
            expected = brute_force(trace, dev, a, a + WINDOW_NS)
            got = dev.totals(a, a + WINDOW_NS).iloc[0].to_dict()
            assert {b: int(v) for b, v in got.items()} == expected, (name, a)


@pytest.mark.slow
def test_phases_of_real_programs():
    """Iterations found from NVTX ranges (numbered or not, nested or not) and, without
    ranges, from the repeating kernel sequence."""
    expect = {"train-workers0": ("nvtx", "step N", 40), "decode": ("nvtx", "token N", 64),
              "sync-item": ("nvtx", "iteration", 50), "eval-pageable": ("nvtx", "batch N", 35),
              "pipeline": ("nvtx", "iter N", 30), "alloc-nocache": ("kernels", None, 29),
              "gemm": ("kernels", None, 60)}
    for name, (source, it_name, count) in expect.items():
        ph = account(load(CAPTURES / f"{name}.sqlite")).devices[0].phases
        assert ph.iterations is not None, name
        assert ph.iterations.source == source, name
        if it_name:
            assert ph.iterations.name == it_name, name
        assert len(ph.iterations) == count, name
        assert ph.warmup >= 1
        spans = ph.spans
        assert spans["start-up"][1] == spans["warm-up"][0]
        assert spans["warm-up"][1] == spans["steady"][0]
        assert spans["steady"][1] == spans["tail"][0]
        assert spans["start-up"][0] == ph.window[0] and spans["tail"][1] == ph.window[1]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["decode", "sync-item", "alloc-nocache"])
def test_time_slices_change_nothing(name, monkeypatch):
    """The accounting works in slices of CHUNK_GAPS gaps and walks the ops CHUNK_OPS at a
    time; slices of 7 gaps and 5 ops give the same bucket times in every iteration as
    one slice for the whole report."""
    from gpugap.accounting import attribution
    from gpugap.program import ops as work

    trace = load(CAPTURES / f"{name}.sqlite")
    whole = account(trace).devices[0]
    monkeypatch.setattr(attribution, "CHUNK_GAPS", 7)
    monkeypatch.setattr(work, "CHUNK_OPS", 5)
    sliced = account(load(CAPTURES / f"{name}.sqlite")).devices[0]
    tiles(sliced)
    lo, hi = whole.phases.iteration_windows()
    assert whole.totals(lo, hi).equals(sliced.totals(lo, hi))
    assert whole.totals_in() == sliced.totals_in()


@pytest.mark.slow
@pytest.mark.parametrize("path", [CAPTURES / "sync-item.sqlite", CAPTURES / "eval-pageable.sqlite",
                                  CAPTURES.parent / "scenarios" / "moe-experts-bad.sqlite",
                                  CAPTURES.parent / "scenarios" / "default-stream-bad.sqlite"])
def test_settling_block_by_block_changes_nothing(path, monkeypatch):
    """Findings settle block by block; blocks of 7 gaps (and ops walked 5 at a time) give
    the same costs, shares, consequences and per-iteration figures as one block."""
    from gpugap.accounting import attribution
    from gpugap.analysis import analyze
    from gpugap.program import ops as work

    def said(a):
        return [(f.rule, f.cause, f.phase, f.cost_ns, f.share_pct, f.consequence_of,
                 f.count, f.per_iteration) for f in a.findings]

    whole = analyze(load(path))
    monkeypatch.setattr(attribution, "CHUNK_GAPS", 7)
    monkeypatch.setattr(work, "CHUNK_OPS", 5)
    sliced = analyze(load(path))
    assert sliced.accounting.devices[0].partition.block_start.size > 5       # many blocks
    assert said(sliced) == said(whole)
    assert sliced.verdict.to_dict() == whole.verdict.to_dict()


def test_window_totals_equal_the_pieces_clipped_to_each_window(monkeypatch):
    """Partition.totals cuts time at every window edge and sums whole blocks from their
    cached totals: on blocks of 500 gaps, for windows of every kind (overlapping, nested,
    empty, beyond the device's window, whole iterations), each row equals the time of the
    pieces clipped to its window, bucket by bucket."""
    from gpugap.accounting import attribution, partition

    monkeypatch.setattr(attribution, "CHUNK_GAPS", 500)
    monkeypatch.setattr(partition, "TOTALS_PIECES", 700)   # codes present a few at a time
    dev = account(load(CAPTURES / "decode.sqlite")).devices[0]
    lo, hi = dev.window
    rng = np.random.default_rng(3)
    starts = rng.integers(lo - 10_000, hi, 300)
    ends = starts + rng.integers(0, (hi - lo) // 3, 300)
    it_lo, it_hi = dev.phases.iteration_windows()
    wlo = np.r_[starts, it_lo, lo, hi, lo + 5, lo - 100]
    whi = np.r_[ends, it_hi, hi, hi + 100, lo + 5, lo]
    got = dev.partition.totals(wlo, whi)
    s, e, c = dev.pieces(lo, hi)
    for row, (a, z) in enumerate(zip(wlo.tolist(), whi.tolist(), strict=True)):
        inside = np.clip(np.minimum(e, z) - np.maximum(s, a), 0, None)
        want = np.bincount(c, weights=inside, minlength=len(IDS)).astype(np.int64)
        assert np.array_equal(got[row], want), (a, z)
    assert dev.partition.block_count > 5
    block = np.repeat(np.arange(dev.partition.block_count), np.diff(dev.partition.block_first))
    assert np.array_equal(dev.partition.block_totals(), np.bincount(
        block * len(IDS) + dev.partition.code, weights=dev.partition.length,
        minlength=dev.partition.block_count * len(IDS)).reshape(-1, len(IDS)))


def test_blocked_calls_go_to_the_bucket_their_category_names():
    """Time inside a blocking call goes to the bucket named as its category (looked up
    by name, not by the order of host.CATEGORIES); other categories have none."""
    for category in hostmod.BLOCKING_CATEGORIES:
        assert IDS[policy.BLOCKED_BUCKET[category]] == hostmod.CATEGORIES[category]
    for category in (hostmod.LAUNCH, hostmod.OUTSIDE, hostmod.WAIT, hostmod.COMPILE):
        assert policy.BLOCKED_BUCKET[category] == -1


def test_the_accounting_owns_min_gap_us():
    """launch-gap's min_gap_us is the accounting's threshold, declared once: the rule's
    default reads it, and a value set for it reaches the accounting's Settings by the
    setting's name (any value but the default decides alone, without adapting to a
    framework's pace); a rule not selected sets nothing."""
    from gpugap.rules import select
    from gpugap.rules.launch_gap import RULE
    from gpugap.rules.thresholds import accounting_settings, effective

    def settings_for(overrides, rules=None):
        rules = select(rules)
        return accounting_settings(rules, effective(rules, overrides))

    assert RULE.thresholds["min_gap_us"].default == policy.MIN_GAP_US
    assert RULE.thresholds["min_gap_us"].setting == "min_gap_us"
    assert policy.Settings().min_gap_us == policy.MIN_GAP_US
    assert settings_for(None) == settings_for({"launch-gap": {"min_gap_us": 100}}) \
        == policy.Settings()
    assert settings_for({"launch-gap": {"min_gap_us": 50}}) == policy.Settings(
        min_gap_us=50.0, adaptive_gap=False)
    assert settings_for({"launch-gap": {"min_gap_us": 50}}, ["small-grid"]) \
        == policy.Settings()


@pytest.mark.parametrize("name", ["corpus:jax-host-input", "corpus:pt-dataloader-tail",
                                  "captures/ddp-overlap"])
def test_last_calls_are_each_thread_s_latest_end(name):
    """ApiCalls.last_calls (walking back from the end of the report) against every
    thread's calls at once, on real captures of many threads (XLA's pool), a loader,
    and a DDP rank."""
    calls = AccountingIndex.of(load_report(name)).calls
    threads = np.unique(calls.gtid)
    assert threads.size > 1
    assert calls.last_calls(threads) == {int(g): int(calls.end[calls.gtid == g].max())
                                         for g in threads.tolist()}


def test_idle_runs_are_the_runs_of_idle_buckets():
    """partition.idle_runs tells idle from busy by code (the busy buckets come first in
    buckets.IDS): each gap is a maximal run of pieces of idle buckets, at either end of
    the pieces too; the codes present are those that occur."""
    from gpugap.accounting import partition

    assert [CODE[b] for b in BUSY_IDS] == list(range(partition.FIRST_IDLE))
    assert len(IDS) < 32                      # _codes_present: a bit of an int32 each
    rng = np.random.default_rng(5)
    c = rng.integers(0, len(IDS), 2000).astype(np.int8)
    c[rng.random(c.size) < 0.4] = CODE[BUSY_IDS[0]]
    s = np.cumsum(rng.integers(1, 9, c.size))
    e = s + 1
    idle = [IDS[k] not in BUSY_IDS for k in c.tolist()]
    for i0, i1 in ((0, c.size), (0, 0), (3, 4), (17, 950)):
        want = []
        for i in range(i0, i1):
            if idle[i] and (i == i0 or not idle[i - 1]):
                j = i
                while j + 1 < i1 and idle[j + 1]:
                    j += 1
                want.append((int(s[i]), int(e[j])))
        gs, ge = partition.idle_runs(s[i0:i1], e[i0:i1], c[i0:i1])
        assert list(zip(gs.tolist(), ge.tolist(), strict=True)) == want
    assert np.array_equal(partition._codes_present(c), np.unique(c))
    assert partition._codes_present(c[:0]).size == 0


def test_values_read_back_one_at_a_time_are_results_work():
    """JAX's differentially-private SGD example reads 99 device scalars back one at a
    time (list(jnp.linspace(...)) in compute_epsilon) and works on each with numpy
    between the reads: that host time is results work, and the catalogue names the loop.
    A scalar read each step followed by the next step's launches (.item(): sync-item,
    decode_eos_sync's .tolist() per token) is not."""
    trace = load(corpus_capture("pub-jax-dpsgd"))
    dev = account(trace).devices[0]
    lo, hi = dev.window
    held, _, _ = dev.held_gaps("results", tl.as_intervals([lo], [hi]))
    # The 99 reads' gaps, 40 ms and more of host work between them.
    assert held.size >= 99 and dev.totals_in()["results"] > 40e6
    analysis = gpugap.analyze(trace)
    top = analysis.findings_of("launch-gap", "results-work")
    assert top and top[0].evidence["between_reads_pct"] >= 95
    assert top[0].evidence["pitfall"] == "results-read-by-value"
    assert "np.asarray(x)" in top[0].fix and "99 values" in top[0].fix
    for quiet in (load(CAPTURES / "sync-item.sqlite"),
                  load(corpus_capture("ext-b4-decode_eos_sync"))):
        assert account(quiet).devices[0].totals_in()["results"] == 0


def test_the_last_repetition_ends_with_the_loop():
    """A loop found from its repeating GPU work ends where the last repetition's ops stop
    matching the one before: cuda-samples' conjugateGradient copies its 4 MiB solution
    back after the loop (a synchronous cudaMemcpy to pageable memory, 4.5 ms), which is
    the program's tail, not a 30x longer last iteration; the verdict is the loop's own
    launch overhead."""
    trace = load(corpus_capture("pub-cuda-conjugategradient"))
    ph = account(trace).devices[0].phases
    lasted = np.diff(ph.iterations.bounds)
    assert lasted[-1] <= 2 * np.median(lasted)
    copies = trace.memcpys
    result = copies[(copies["bytes"] >= 4 << 20)
                    & (copies["start"] > ph.iterations.bounds[0])]      # not the set-up's
    assert len(result) == 1
    assert ph.phase_codes(result["start"].to_numpy()).tolist() == [3]     # the tail
    assert gpugap.analyze(trace).verdict.cause == "launch-bound"


def test_loops_run_in_turn_are_one_steady_state():
    """Triton's layer-norm tutorial times its backward kernel, then torch's (a do_bench
    of 651 calls, then one of 890): two loops of about the same weight, run in turn on
    autograd's thread. The steady state holds both, and the first loop's launch
    overhead (its GPU 57% busy, the second's 96%) is the verdict, not a healthy second
    loop with the first one taken for start-up. A training loop's few evaluation
    steps after it weigh far less and stay out."""
    trace = load(corpus_capture("pub-triton-layer-norm"))
    it = acc_program(trace).devices[0].iterations
    assert it.loops == [651, 890] and len(it) == 1541
    assert "2 loops in turn" in it.how
    assert gpugap.analyze(trace).verdict.cause == "launch-bound"
    alone = acc_program(load(corpus_capture("pub-jax-mnist-classifier"))).devices[0]
    assert alone.iterations.loops == [] and len(alone.iterations) == 300


def test_a_kernel_cudnn_builds_for_each_new_shape_is_compiled_there():
    """nanoGPT's sample.py on cuDNN's SDPA: each new sequence length of the first sample
    makes cuDNN build its attention kernel (about 42 ms with no CUDA call, then
    cuLibraryLoadData, a workspace memset, then 'cudnn_generated_fort_native_sdpa_...'):
    compilation on first use, 62 times in the warm-up, and none once the lengths repeat
    in the second sample."""
    analysis = gpugap.analyze(load(corpus_capture("pub-nanogpt-sample")))
    built = analysis.findings_of("launch-gap", "compilation")
    warm = [f for f in built if f.phase == "warm-up"]
    assert warm and warm[0].cost_ns > 2.5e9 and warm[0].count >= 60
    assert not [f for f in built if f.phase == "steady"]
