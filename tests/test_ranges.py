"""The NVTX range table (gpugap.accounting.ranges.reported_ranges) and the labels findings carry
(gpugap.accounting.labels): nesting by path, library domains, numbered instances, limits.

Real reports (tests/data/scenarios, tests/data/captures) are checked against figures
read here straight from their SQLite (independently of gpugap's loader); a few tests
use hand-built NVTX frames put on a real trace (said where they do).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpugap.accounting import labels as nvtx_labels
from gpugap.accounting import ranges as nvtx_ranges
from gpugap.analysis import analyze
from gpugap.cli import main
from gpugap.program import nvtx as program_nvtx
from gpugap.program import understand
from gpugap.report import load
from gpugap.report.table import Table
from tests.conftest import load_report, report_path

CAPTURES = Path(__file__).parent / "data" / "captures"
PUSH_POP = 59


@cache
def capture(name: str):
    return load(CAPTURES / f"{name}.sqlite")


def sqlite_ranges(path: Path) -> list[dict]:
    """Push/pop ranges as the export stores them: name (inline text or registered
    string), domain name (from the domain-create row), thread, start, end."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        domains = {(d, tid >> 24): name for d, tid, name in db.execute(
            "SELECT domainId, globalTid, text FROM NVTX_EVENTS WHERE eventType = 75")}
        rows = db.execute(
            "SELECT n.start, n.end, coalesce(n.text, s.value), coalesce(n.domainId, 0), "
            "n.globalTid FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
            f"WHERE n.eventType = {PUSH_POP} AND n.end IS NOT NULL").fetchall()
    return [{"start": s, "end": e, "name": name, "domain": domains.get((d, g >> 24), ""),
             "gtid": g} for s, e, name, d, g in rows]


def brute_paths(rows: list[dict]) -> list[tuple[str, ...]]:
    """Per range: the names of every range of its thread and domain that encloses it
    (outermost first), then its own: plain containment, no sorting tricks."""
    out = []
    for r in rows:
        outer = [o for o in rows if o is not r and o["gtid"] == r["gtid"]
                 and o["domain"] == r["domain"] and o["start"] <= r["start"]
                 and r["end"] <= o["end"]
                 and (o["start"], -o["end"]) < (r["start"], -r["end"])]
        outer.sort(key=lambda o: (o["start"], -o["end"]))
        out.append((*(o["name"] for o in outer), r["name"]))
    return out


def table(analysis) -> list[tuple[tuple[str, ...], int]]:
    return [(tuple(r.path), r.count) for r in analysis.ranges]


# --- nesting -------------------------------------------------------------------------

H2D_TABLE = [
    (("setup",), 1),
    (("warmup",), 1),
    (("warmup", "h2d copy"), 2),
    (("warmup", "gemms"), 2),
    (("measured",), 1),
    (("measured", "iter"), 8),
    (("measured", "iter", "h2d copy"), 8),
    (("measured", "iter", "gemms"), 8),
    (("check",), 1),
]


def test_h2d_copy_gemms_sit_under_their_own_parents(analysis_of):
    # Issue 12 (5): 8 of the 10 'gemms' are inside measured > iter, 2 inside warmup.
    a = analysis_of("h2d-copy-bad")
    assert table(a) == H2D_TABLE
    assert [r.depth for r in a.ranges] == [len(p) - 1 for p, _ in H2D_TABLE]
    # The same, counted from the SQLite by plain containment.
    rows = [r for r in sqlite_ranges(report_path("h2d-copy-bad")) if r["domain"] == "gpugap"]
    assert Counter(brute_paths(rows)) == Counter(dict(H2D_TABLE))
    # Each row's figures are its own instances': the warm-up's gemms ran 2 x 5 GEMMs
    # in 2 instances, the iterations' 8.
    by_path = {tuple(r.path): r for r in a.ranges}
    warm, steady = by_path[("warmup", "gemms")], by_path[("measured", "iter", "gemms")]
    want = {tuple(p): sum(r["end"] - r["start"] for r, q in zip(rows, brute_paths(rows),
                                                                  strict=True) if q == p)
            for p in (("warmup", "gemms"), ("measured", "iter", "gemms"))}
    assert warm.cpu_ns == want[("warmup", "gemms")]
    assert steady.cpu_ns == want[("measured", "iter", "gemms")]
    assert steady.metrics.kernels == 8 * warm.metrics.kernels // 2


def test_nesting_in_json_and_terminal(capsys):
    path = str(report_path("h2d-copy-bad"))
    assert main(["analyze", path, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(tuple(r["path"]), r["count"]) for r in doc["ranges"]] == H2D_TABLE
    assert [r["depth"] for r in doc["ranges"]] == [len(p) - 1 for p, _ in H2D_TABLE]
    assert doc["ranges_omitted"] == 0
    main(["analyze", path])
    text = capsys.readouterr().out
    table_text = text[text.index("NVTX ranges"):]
    rows = [line.split("│")[1].rstrip() for line in table_text.splitlines()
            if line.startswith("│")]
    assert rows == [" setup", " warmup", "   h2d copy", "   gemms", " measured", "   iter",
                    "     h2d copy", "     gemms", " check"]


def test_scoped_table_keeps_the_scope_instances(trace_of):
    a = analyze(trace_of("h2d-copy-bad"), range_name="iter")
    assert table(a) == [(("measured", "iter"), 8), (("measured", "iter", "h2d copy"), 8),
                        (("measured", "iter", "gemms"), 8)]


def test_parents_equal_plain_containment_on_random_stacks():
    # Hand-built: random push/pop stacks on two threads and two domains.
    from gpugap.report.loader import nesting_depth

    rng = np.random.default_rng(7)
    rows = []
    for gtid in (1, 2):
        for domain in ("", "mine"):
            t, stack = 0, []
            for _ in range(300):
                # Pushes may share a time (a range and the first one nested in it begin
                # together; one begins as the one before it ends); pops move on.
                if stack and (len(stack) > 5 or rng.random() < 0.45):
                    t += int(rng.integers(1, 3))
                    s, name = stack.pop()
                    rows.append({"start": s, "end": t, "name": name, "domain": domain,
                                 "gtid": gtid})
                else:
                    t += int(rng.integers(0, 2))
                    stack.append((t, f"r{int(rng.integers(0, 6))}"))
            while stack:
                t += 1
                s, name = stack.pop()
                rows.append({"start": s, "end": t, "name": name, "domain": domain,
                             "gtid": gtid})
    frame = pd.DataFrame(rows).sort_values(["gtid", "domain", "start", "end"],
                                           ascending=[True, True, True, False],
                                           ignore_index=True)
    frame["depth"] = nesting_depth(frame["start"].to_numpy(), frame["end"].to_numpy(),
                                   frame["gtid"].to_numpy(), pd.factorize(frame["domain"])[0])
    frame = frame.sample(frac=1, random_state=3).reset_index(drop=True)   # any order
    parent = nvtx_ranges.parents(Table.from_pandas(frame))
    paths = []
    for i in range(len(frame)):
        chain = [i]
        while parent[chain[-1]] >= 0:
            chain.append(int(parent[chain[-1]]))
        paths.append(tuple(frame["name"].iloc[j] for j in reversed(chain)))
    assert Counter(paths) == Counter(brute_paths(frame.to_dict("records")))


# --- library domains -------------------------------------------------------------------

def test_cub_ranges_stay_out_unless_all_domains(capsys):
    # sync-item: nonzero() and boolean masks run CUB, whose ranges are in the CCCL domain.
    rows = sqlite_ranges(CAPTURES / "sync-item.sqlite")
    cub = Counter(r["name"] for r in rows if r["domain"] == "CCCL")
    assert cub == {"cub::DeviceReduce::Sum": 150, "cub::DeviceSelect::Flagged": 150,
                   "cub::DeviceRadixSort": 50}
    trace = capture("sync-item")
    plain = analyze(trace)
    assert table(plain) == [(("iteration",), 50)]
    every = analyze(trace, all_domains=True)
    listed = {(r.domain, r.name): r.count for r in every.ranges}
    assert {name: listed[("CCCL", name)] for name in cub} == cub
    # Iterations come from the program's 'iteration' ranges, never from CUB's; findings
    # never name a CUB range as their place.
    for dev in plain.accounting.devices.values():
        assert dev.phases.iterations.source == "nvtx"
        assert dev.phases.iterations.name == "iteration"
    assert all("cub::" not in part for f in plain.findings for part in f.ranges)
    # The command line: absent by default, listed with --all-domains.
    path = str(CAPTURES / "sync-item.sqlite")
    main(["analyze", path, "--json"])
    assert {r["domain"] for r in json.loads(capsys.readouterr().out)["ranges"]} == {""}
    main(["analyze", path, "--json", "--all-domains"])
    names = {(r["domain"], r["name"]) for r in json.loads(capsys.readouterr().out)["ranges"]}
    assert {("CCCL", n) for n in cub} <= names and ("cuBLAS", "cublasCreate_v2") in names


def test_nccl_ranges_stay_out_unless_all_domains():
    trace = capture("ddp-manual")
    nccl = Counter(r["name"] for r in sqlite_ranges(CAPTURES / "ddp-manual.sqlite")
                   if r["domain"] == "NCCL")
    assert nccl["ncclAllReduce"] > 100
    assert {r.domain for r in analyze(trace).ranges} == {""}
    every = {(r.domain, r.name): r.count for r in analyze(trace, all_domains=True).ranges}
    assert every[("NCCL", "ncclAllReduce")] == nccl["ncclAllReduce"]


def test_the_domain_decides_not_a_qualified_name(trace_of):
    # Hand-built from a real trace: 'gemms' renamed to C++-qualified names, in the
    # program's domain, then in a library's.
    trace = trace_of("h2d-copy-bad")
    nv = trace.nvtx.copy()
    gemms = (nv["name"] == "gemms").to_numpy()
    nv.loc[gemms, "name"] = "MyModel::forward"
    mine = analyze(trace.replace(nvtx=nv))
    assert (("measured", "iter", "MyModel::forward"), 8) in table(mine)
    nv.loc[gemms, "name"] = "cub::DeviceReduce::Sum"
    nv["domain"] = nv["domain"].astype(object)
    nv.loc[gemms, "domain"] = "cccl"                    # any case
    lib_trace = trace.replace(nvtx=nv)
    lib = analyze(lib_trace)
    assert all("Sum" not in r.name for r in lib.ranges)
    assert (("measured", "iter", "h2d copy"), 8) in table(lib)
    every = analyze(lib_trace, all_domains=True)
    assert {(r.domain, r.name, r.count) for r in every.ranges if r.domain == "cccl"} \
        == {("cccl", "cub::DeviceReduce::Sum", 10)}
    # --range can still name a library's range explicitly.
    assert len(nvtx_ranges.select(lib_trace, "cub::DeviceReduce::Sum")) == 10


def test_library_mask_by_domain():
    nv = Table({"name": np.array(["a", "cub::X::y", "ncclAllReduce", "b", "c"], dtype=object),
                "domain": np.array(["", "", "NCCL", "nvshmem", "CCCL"], dtype=object),
                "library": np.zeros(5, dtype=bool)})
    assert program_nvtx.library_mask(nv).tolist() == [False, False, True, True, True]


# --- numbered instances and limits ---------------------------------------------------

def test_numbered_instances_are_one_row():
    trace = capture("decode")
    tokens = [r for r in sqlite_ranges(CAPTURES / "decode.sqlite")
              if r["name"].startswith("token ")]
    a = analyze(trace)
    assert table(a) == [(("prefill",), 1), (("generate",), 1),
                        (("generate", "token N"), len(tokens))]
    scoped = analyze(trace, range_name="token N")
    assert scoped.ranges[0].count == len(tokens)
    assert len(nvtx_ranges.select(trace, "token N")) == len(tokens)


def test_a_lone_numbered_name_is_kept():
    assert nvtx_ranges.folded_names(np.array(["epoch 1", "step 1", "step 2", "x"],
                                             dtype=object)).tolist() \
        == ["epoch 1", "step N", "step N", "x"]


# --- --range names fold as --iteration's do (issue 23, point 3) -----------------------

def sqlite_steps() -> list[str]:
    """small-compile's 'step 0' ... 'step 99', read straight from its SQLite."""
    return sorted((r["name"] for r in sqlite_ranges(CAPTURES / "small-compile.sqlite")
                   if r["name"].startswith("step ")), key=lambda n: int(n.split()[1]))


@pytest.fixture(scope="module")
def small_compile_step():
    """gpugap.analyze(trace, range="step") of small-compile, as docs/analyze.md writes it."""
    import gpugap

    return gpugap.analyze(capture("small-compile"), range="step")


def test_range_step_selects_every_numbered_step_as_iteration_step_does():
    trace, steps = capture("small-compile"), sqlite_steps()
    assert len(steps) == 100
    for name in ("step", "step N"):
        assert sorted(nvtx_ranges.select(trace, name)["name"].tolist(),
                      key=lambda n: int(n.split()[1])) == steps
    # An exact name is itself: one instance.
    assert nvtx_ranges.select(trace, "step 7")["name"].tolist() == ["step 7"]
    # --iteration step finds the same 100 instances (gpugap.program.iterations).
    assert understand(trace, iteration="step").devices[0].iterations.labels == steps


def test_unknown_range_lists_the_folded_names(capsys):
    code = main(["analyze", str(CAPTURES / "small-compile.sqlite"), "--range", "nope",
                 "--no-config"])
    err = capsys.readouterr().err
    assert code == 2
    assert "(ranges: step N (100 instances)); pick one of those with --range" in err
    assert "step 0" not in err and "Traceback" not in err
    with pytest.raises(Exception, match=r"ranges: token N \(64 instances\), generate, "
                                        r"prefill\)"):
        nvtx_ranges.select(capture("decode"), "nope")


def test_range_step_keeps_its_warm_up_apart(small_compile_step):
    """--range step on small-compile: the phases stay inside the range. The compilation
    before step 0 and the recompilation at step 70 are warm-up, one-time costs listed
    apart; the verdict judges the steady steps (launch-bound), one finding per cause and
    phase."""
    a = small_compile_step
    assert a.scope.range_name == "step" and a.ranges[0].count == 100
    assert {f.phase for f in a.findings} <= {"range", "warm-up"}
    keys = [(f.rule, f.cause, f.device, f.phase, tuple(f.ranges)) for f in a.findings]
    assert len(keys) == len(set(keys))
    inst = a.instances
    assert (inst.count, inst.warm_up, inst.steady) == (100, 3, 97)
    assert inst.warm_up_names == ["step 0", "step 1", "step 70"]
    compilation = a.findings_of("launch-gap", "compilation")
    assert compilation and {f.phase for f in compilation} == {"warm-up"}
    assert str(compilation[0].severity) == "info"
    v = a.verdict
    assert v.scope == "range step" and v.finding == "launch-gap/launch-bound@0:range"
    (bound,) = a.findings_of("launch-gap", "launch-bound")
    assert v.share_pct == v.breakdown["launch-bound"] == pytest.approx(bound.share_pct, abs=0.01)


def test_range_n_and_python_api_agree_with_range_step(small_compile_step):
    n = analyze(capture("small-compile"), range_name="step N")
    assert [(f.id, f.cost_ns) for f in n.findings] == \
        [(f.id, f.cost_ns) for f in small_compile_step.findings]
    assert n.verdict.share_pct == small_compile_step.verdict.share_pct


def hand_built(trace, names: list[str], depth1: bool) -> pd.DataFrame:
    """Hand-built NVTX frame on the kernels' launching thread: 'run' around it all and
    one back-to-back range per name inside it (depth 1), or the names alone (depth 0)."""
    k = trace.kernels
    gtid = int(k["gtid"].mode().iloc[0])
    launch = k["api_start"][k["api_start"] >= 0].to_numpy(dtype=np.int64)
    lo, hi = int(launch.min()) - 1000, int(launch.max()) + 1000
    edges = np.linspace(lo, hi, len(names) + 1).astype(np.int64)
    rows = [{"start": int(a), "end": int(b) - 1, "name": n, "depth": int(depth1)}
            for a, b, n in zip(edges[:-1], edges[1:], names, strict=True)]
    if depth1:
        rows.insert(0, {"start": lo - 1, "end": hi + 1, "name": "run", "depth": 0})
    frame = pd.DataFrame(rows)
    frame = frame.assign(domain="", gtid=gtid, pid=gtid >> 24 & 0xFFFFFF,
                         tid=gtid & 0xFFFFFF, library=False, kind="push/pop")
    frame["name"] = frame["name"].astype(object)
    return frame[list(trace.nvtx.columns)].astype(trace.nvtx.dtypes.to_dict())


def test_rows_are_capped_largest_first_with_their_parents(trace_of):
    trace = trace_of("moe-experts-bad")
    names = [f"blk{i:04d}/fwd" for i in range(300)]
    nv = hand_built(trace, names, depth1=True)
    # Make a few ranges long: they must be the ones listed.
    t = trace.replace(nvtx=nv)
    got = nvtx_ranges.reported_ranges(t)
    assert len(got.rows) == nvtx_ranges.TABLE_MAX_ROWS
    assert got.omitted == 301 - nvtx_ranges.TABLE_MAX_ROWS
    assert got.rows[0].path == ("run",)
    dur = (nv["end"] - nv["start"]).to_numpy()[1:]
    kept = {r.path[-1] for r in got.rows[1:]}
    biggest = set(np.array(names)[np.argsort(-dur, kind="stable")][:len(kept)].tolist())
    assert min(dur[[names.index(n) for n in kept]]) >= max(
        dur[[names.index(n) for n in set(names) - kept]])
    assert len(kept & biggest) >= len(kept) - 2        # ties in length may swap
    a = analyze(t)
    assert len(a.ranges) == 40 and a.ranges_omitted == 261
    assert a.to_dict()["ranges_omitted"] == 261


def test_finding_labels_leave_out_levels_of_one_off_names(trace_of):
    trace = trace_of("moe-experts-bad")
    times = trace.kernels["start"].to_numpy()
    many = nvtx_labels.MAX_LABEL_NAMES + 10
    # Distinct names under 'run': findings are placed in 'run'.
    t = trace.replace(nvtx=hand_built(
        trace, [f"blk{i:04d}/fwd" for i in range(many)], depth1=True))
    codes, labels = nvtx_labels.folded_label_codes(t, times)
    assert set(labels[codes].tolist()) <= {"run", ""}
    raw = set(nvtx_labels.range_labels(t, times).tolist())
    assert len([s for s in raw if s.startswith("run > blk")]) > 50    # raw labels keep them
    # Distinct names at the top: one placeholder.
    t = trace.replace(nvtx=hand_built(
        trace, [f"blk{i:04d}/fwd" for i in range(many)], depth1=False))
    codes, labels = nvtx_labels.folded_label_codes(t, times)
    assert set(labels[codes].tolist()) <= {nvtx_labels.MANY_RANGES, ""}
    # Numbered names fold first, so a loop of many steps is one level like any other.
    t = trace.replace(nvtx=hand_built(
        trace, [f"step {i}" for i in range(many)], depth1=True))
    codes, labels = nvtx_labels.folded_label_codes(t, times)
    assert set(labels[codes].tolist()) <= {"run > step N", "run", ""}
    assert "run > step N" in set(labels[codes].tolist())
    # Findings on the distinct-name trace stay few.
    findings = analyze(trace.replace(nvtx=hand_built(
        trace, [f"blk{i:04d}/fwd" for i in range(many)], depth1=True))).findings
    assert len(findings) <= 2 * len(analyze(trace).findings) + 5


def test_shallow_names_keep_their_order():
    # check/diff measure every shallow name; order of first appearance of any instance.
    trace = load_report("h2d-copy-bad")
    assert nvtx_ranges.shallow_names(trace) == ["setup", "warmup", "h2d copy", "gemms",
                                                "measured", "iter", "check"]


@pytest.mark.parametrize("name", ["grid-sweep-bad", "prefetch-pipeline-bad",
                                  "cublas-warmup-good"])
def test_every_user_range_is_counted_once_on_real_reports(name):
    """Every row's instances are exactly the ranges whose (plain containment) path it is,
    up to the table's depth; library domains excluded."""
    trace = load_report(name)
    rows = [r for r in sqlite_ranges(report_path(name))
            if r["domain"].casefold() not in {d.casefold() for d in
                                              program_nvtx.LIBRARY_DOMAINS}]
    got = {(r.domain, *r.path): r.count for r in analyze(trace).ranges}
    names = nvtx_ranges.folded_names(np.array(sorted({r["name"] for r in rows}),
                                              dtype=object))
    fold = dict(zip(sorted({r["name"] for r in rows}), names.tolist(), strict=True))
    want = Counter((r["domain"], *(fold[n] for n in p))
                   for r, p in zip(rows, brute_paths(rows), strict=True)
                   if len(p) - 1 <= nvtx_ranges.TABLE_MAX_DEPTH)
    assert got == dict(want)
