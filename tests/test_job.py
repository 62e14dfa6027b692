"""Jobs: the per-rank reports of one DDP job (two H200s, torchrun, nsys per rank;
tests/data/captures/ranks, program tests/data/programs/ddp_train.py) analyzed together.

In the late job rank 1 does 30 ms of host work before each forward pass; the figures
the job reports are checked against the NCCL kernels read from the SQLite here.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from functools import cache

import numpy as np

from gpugap.analysis.job import combine, expand_reports, summarize_all
from gpugap.cli import main
from gpugap.errors import EXIT_PARTIAL
from gpugap.jsonout import dumps
from tests.conftest import DATA

RANKS = DATA / "captures" / "ranks"


def job_paths(job: str) -> list[str]:
    return [str(RANKS / f"ddp-ranks-{job}.rank{r}.sqlite") for r in (0, 1)]


@cache
def summaries(job: str):
    return tuple(summarize_all(job_paths(job), workers=1))


def gpugap(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def nccl_starts(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (UTC ns: report time + session start) of every NCCL kernel, in
    start order, straight from the SQLite."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        t0 = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
        rows = db.execute("SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN "
                          "StringIds s ON s.id = k.shortName WHERE s.value LIKE "
                          "'ncclDevKernel%' ORDER BY k.start").fetchall()
    finally:
        db.close()
    times = np.array(rows, dtype=np.int64) + t0
    return times[:, 0], times[:, 1]


def test_ranks_come_from_the_launcher_environment():
    ranks = [s.launcher_env.get("RANK") for s in summaries("late")]
    assert ranks == ["0", "1"]
    job = combine(list(reversed(summaries("late"))))      # order of the files does not matter
    assert [job.rank_numbers[s.index] for s in job.ranks] == [0, 1]
    assert job.rank_source.startswith("RANK")


def test_one_host_shares_one_clock():
    """Both ranks ran on one host: with the session start added, the first collective
    (the AllGather of NCCL's set-up) ends on both ranks within a fraction of a ms."""
    (_, end0), (_, end1) = (nccl_starts(p) for p in job_paths("late"))
    assert abs(int(end0[0]) - int(end1[0])) < 200_000
    job = combine(summaries("late"))
    assert job.clock == "session start times of one host"


def test_late_rank_is_the_straggler_and_rank0_waits_for_it():
    job = combine(summaries("late"))
    assert job.kind == "straggler" and job.straggler == 1
    # Independently: the steady state's NCCL kernels (the last 194: 2 broadcasts and 8
    # all-reduces in the first steady iteration, 8 all-reduces in each of the 23 others),
    # matched by order; each rank waits from its start to the later rank's start.
    (s0, _), (s1, _) = (nccl_starts(p) for p in job_paths("late"))
    s0, s1 = s0[-194:], s1[-194:]
    latest = np.maximum(s0, s1)
    iteration = np.r_[np.zeros(10, int), np.repeat(np.arange(1, 24), 8)]
    expected = np.bincount(iteration, weights=latest - s0).astype(np.int64)
    assert job.collectives_matched == 194 and job.iterations_matched == 24
    assert job.waits_by_iteration[0].tolist() == expected.tolist()
    assert job.wait_ns_per_iteration[0] == int(np.median(expected))   # 8.47 ms
    assert 8.0e6 < job.wait_ns_per_iteration[0] < 9.0e6
    assert job.wait_ns_per_iteration[1] == 0
    assert job.metrics["job.wait_ms_per_iteration"] == round(np.median(expected) / 1e6, 3)
    # The straggler's own verdict is named: host work between its launches.
    assert job.straggler_summary.verdict["cause"] == "host-launch-latency"
    assert job.headline.startswith("Rank 1 is the straggler: rank 0 waits 8.47 ms per "
                                   "iteration inside collectives")
    assert "rank 1's own verdict: Host work between launches" in job.headline


def test_balanced_job_has_no_straggler():
    job = combine(summaries("balanced"))
    assert job.kind == "balanced" and job.straggler is None
    assert job.metrics["job.wait_pct"] < 1.0
    assert job.metrics["job.skew_pct"] < 1.0
    assert job.headline.startswith("No straggler across 2 ranks")


def test_hosts_clocks_are_aligned_on_the_first_collective():
    """Reports of two hosts whose clocks disagree by 5 ms: aligned on the ends of their
    collectives, the waits stay what one clock gives."""
    first, second = summaries("late")
    one_clock = combine([first, second])
    skewed = [dataclasses.replace(first, host="a"),
              dataclasses.replace(second, host="b",
                                  session_start_utc_ns=second.session_start_utc_ns + 5_000_000)]
    job = combine(skewed)
    assert job.clock.startswith("aligned on the ends of 194 collectives (2 hosts")
    assert job.straggler == 1
    assert abs(job.wait_ns_per_iteration[0] - one_clock.wait_ns_per_iteration[0]) < 500_000
    unaligned = combine(skewed, align="none")
    assert abs(unaligned.wait_ns_per_iteration[0] - one_clock.wait_ns_per_iteration[0]) > 1e6


def test_waits_without_iteration_times_name_no_straggler():
    """Collectives matched, but no rank's iterations found: a wait is no share of an
    iteration, so even a zero threshold names no straggler by its waits (it raised
    TypeError formatting the missing iteration time)."""
    no_iterations = [dataclasses.replace(s, iteration_median_ns=None)
                     for s in summaries("late")]
    job = combine(no_iterations, straggler_pct=0.0)
    assert job.collectives_matched == 194
    assert job.kind == "balanced" and job.straggler is None
    assert job.metrics["job.iteration_ms"] is None and job.metrics["job.wait_pct"] is None
    assert job.headline.startswith("No straggler across 2 ranks: no rank waits more than "
                                   "8.47 ms per iteration inside collectives")


def test_worker_processes_give_the_same_job():
    local = dumps(combine(summaries("late")).to_dict())
    pooled = dumps(combine(summarize_all(job_paths("late"), workers=2)).to_dict())
    assert pooled == local


def test_dask_cluster_gives_the_same_job_byte_for_byte(capsys):
    import distributed  # in the test extra: CI runs this job on Dask
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), "--json", "--workers", "1")
    assert code == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        code, on_dask, _ = gpugap(capsys, "analyze", *job_paths("late"), "--json",
                                  "--scheduler", cluster.scheduler_address)
    assert code == 0
    # The job section is the document's last key: compare its bytes as printed.
    assert on_dask.split('"job": ', 1)[1] == out.split('"job": ', 1)[1]
    assert json.loads(on_dask)["job"]["verdict"]["straggler"] == 1


def test_cli_job_view(capsys):
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), "--workers", "1")
    assert code == 0
    assert "JOB STRAGGLER" in out and "Rank 1 is the straggler" in out
    assert "rank 1 (ddp-ranks-late.rank1.sqlite): Host work between launches" in out
    assert "ranks from RANK recorded in each report's environment" in out
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), "--json", "--workers", "1")
    document = json.loads(out)
    assert [r["report"] for r in document["reports"]] == job_paths("late")
    assert document["reports"][1]["verdict"]["cause"] == "host-launch-latency"
    assert [r["rank"] for r in document["job"]["ranks"]] == [0, 1]


def test_one_report_keeps_the_single_report_view(capsys):
    code, out, _ = gpugap(capsys, "analyze", job_paths("late")[1])
    assert code == 0 and "JOB" not in out and "VERDICT BOTTLENECK" in out


def test_a_broken_report_does_not_sink_the_job(capsys, tmp_path):
    broken = tmp_path / "rank2.sqlite"
    broken.write_bytes(b"not a report at all" * 100)
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), broken, "--workers", "1")
    assert code == EXIT_PARTIAL == 7
    assert "Rank 1 is the straggler" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("not analyzed: ")]
    assert len(lines) == 1 and "rank2.sqlite" in lines[0]
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), broken, "--json",
                          "--workers", "1")
    document = json.loads(out)
    assert code == 7 and document["job"]["metrics"]["job.failed_reports"] == 1
    assert document["reports"][2]["status"] == "error"
    assert document["job"]["failed"][0]["report"] == str(broken)
    # Nothing readable: exit 2.
    code, _, err = gpugap(capsys, "analyze", broken, broken.with_name("other.sqlite"))
    assert code == 2 and "none of the 2 reports could be analyzed" in err


def test_a_directory_and_a_glob_name_the_reports(tmp_path):
    for p in job_paths("late"):
        shutil.copy(p, tmp_path)
    (tmp_path / "notes.txt").write_text("not a report")
    found = expand_reports([tmp_path])
    assert [p.name for p in found] == ["ddp-ranks-late.rank0.sqlite",
                                       "ddp-ranks-late.rank1.sqlite"]
    assert expand_reports([str(tmp_path / "*.rank1.sqlite")]) == [found[1]]


def test_check_and_baseline_gate_job_metrics(capsys, tmp_path):
    code, out, _ = gpugap(capsys, "check", *job_paths("late"), "--workers", "1", "--no-config",
                          "--max", "job.wait_ms_per_iteration=2", "--max", "job.skew_pct=5")
    assert code == 1 and "job.wait_ms_per_iteration = 8.47" in out
    baseline = tmp_path / "job.json"
    code, _, _ = gpugap(capsys, "baseline", "save", "--job", *job_paths("balanced"),
                        "--workers", "1", "--no-config", "-o", baseline)
    assert code == 0
    saved = json.loads(baseline.read_text())["whole"]
    assert saved["job.wait_ms_per_iteration"]["median"] < 0.2
    code, out, _ = gpugap(capsys, "check", *job_paths("balanced"), "--workers", "1",
                          "--no-config", "--baseline", baseline, "--json")
    assert code == 0, out
    code, out, _ = gpugap(capsys, "check", *job_paths("late"), "--workers", "1",
                          "--no-config", "--baseline", baseline, "--json")
    failed = {g["metric"] for r in json.loads(out)["reports"] for g in r["gates"]
              if g["status"] == "fail"}
    assert code == 1 and "job.wait_ms_per_iteration" in failed
