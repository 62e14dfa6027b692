"""Jobs: the per-rank reports of DDP jobs (two H200s, torchrun, nsys per rank;
tests/data/captures/ranks, program tests/data/programs/ddp_train.py) analyzed together,
and reports grouped into jobs by what each records (gpugap.analysis.grouping).

tests/data/captures/ranks holds two separate jobs of two ranks each: balanced, and late
(rank 1 does 30 ms of host work before each forward pass); the figures the job reports
are checked against the NCCL kernels read from the SQLite here. tests/data/captures
holds 17 reports of unrelated programs (H100 and H200, captured one after another): no
two of them are one job.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from functools import cache

import numpy as np
import pytest

import gpugap as gpugap_api
from gpugap.analysis.grouping import group, read_identity
from gpugap.analysis.job import (
    analyze_job,
    combine,
    expand_reports,
    group_reports,
    group_summaries,
    summarize_all,
)
from gpugap.cli import main
from gpugap.errors import EXIT_PARTIAL
from gpugap.jsonout import dumps
from tests.conftest import DATA

CAPTURES = DATA / "captures"
RANKS = CAPTURES / "ranks"
ROOT = DATA.parent.parent
# Any percentage printed: the number before a '%'.
PERCENT = re.compile(r"(-?\d+(?:\.\d+)?)%")


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


def test_job_phases_wait_for_the_last_warm_rank():
    """Issue 38: a rank is not steady before every rank of its job is warm. Rank 1 of the
    late job is warm (its steady state starts) after rank 0's second iteration began:
    rank 0's steady state starts one iteration later once the job is settled, and the job
    says whom it waited for."""
    alone = summaries("late")
    assert alone[1].session_start_utc_ns + alone[1].warm_ns \
        > alone[0].session_start_utc_ns + alone[0].warm_ns
    job = analyze_job(job_paths("late"), workers=1)
    assert job.held == {0: "rank 1"}
    settled = {s.index: s for s in job.ranks}
    assert settled[0].warm_ns > alone[0].warm_ns
    assert settled[0].session_start_utc_ns + settled[0].warm_ns \
        >= alone[1].session_start_utc_ns + alone[1].warm_ns
    assert settled[0].iterations == alone[0].iterations - 1
    assert job.to_dict()["held_at_start_up"] == {"0": "rank 1"}
    # Given as they are, the summaries are combined as they are.
    assert combine(alone).held == {}


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
    # Not aligned, the 5 ms lands in each of the 8 all-reduces of an iteration: rank 0
    # would wait 48.5 ms per 36.9 ms iteration, more than the whole of it. The job says
    # the clocks cannot be aligned and tells no wait (no share above 100%).
    unaligned = combine(skewed, align="none")
    assert "the reports' clocks cannot be aligned (rank 0 would wait 48.5 ms per 36.9 ms " \
           "iteration): waits not used" in unaligned.clock
    assert unaligned.wait_ns_per_iteration == {0: None, 1: None}
    assert unaligned.metrics["job.wait_pct"] is None and unaligned.collectives_matched == 0
    assert unaligned.kind == "balanced"          # iteration times within 0.1%


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


@pytest.mark.slow
def test_dask_cluster_gives_the_same_job_byte_for_byte(capsys):
    import distributed  # in the test extra: CI runs this job on Dask
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), "--json", "--workers", "1")
    assert code == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        code, on_dask, _ = gpugap(capsys, "analyze", *job_paths("late"), "--json",
                                  "--scheduler", cluster.scheduler_address)
    assert code == 0
    # The grouping and the jobs follow the reports: compare their bytes as printed.
    assert on_dask.split('"verdicts": ', 1)[1] == out.split('"verdicts": ', 1)[1]
    assert json.loads(on_dask)["jobs"][0]["verdict"]["straggler"] == 1


def test_one_report_keeps_the_single_report_view(capsys):
    code, out, _ = gpugap(capsys, "analyze", job_paths("late")[1])
    assert code == 0 and "JOB" not in out and "VERDICT BOTTLENECK" in out


@pytest.mark.slow
def test_a_broken_report_does_not_sink_the_job(capsys, tmp_path):
    broken = tmp_path / "rank2.sqlite"
    broken.write_bytes(b"not a report at all" * 100)
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), broken, "--workers", "1")
    assert code == EXIT_PARTIAL == 7
    assert "Rank 1 is the straggler" in out
    # It records nothing, so it belongs to no job: its line says why it was not analyzed.
    lines = [ln for ln in out.splitlines() if ln.startswith("…/rank2.sqlite ")]
    assert len(lines) == 1 and " -  " in lines[0] and "not analyzed: " in lines[0]
    # Its whole error, under the table.
    assert len([ln for ln in out.splitlines() if ln.startswith("not analyzed: ")]) == 1
    assert "not analyzed: …/rank2.sqlite is neither an nsys report" in " ".join(out.split())
    code, out, _ = gpugap(capsys, "analyze", *job_paths("late"), broken, "--json",
                          "--workers", "1")
    document = json.loads(out)
    assert code == 7 and document["jobs"][0]["metrics"]["job.failed_reports"] == 0
    assert document["reports"][2]["status"] == "error"
    assert document["verdicts"][2]["job"] is None
    assert document["verdicts"][2]["headline"].startswith("not analyzed: ")
    assert document["alone"] == [str(broken)]
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


@pytest.mark.slow
def test_check_and_baseline_gate_job_metrics(capsys, tmp_path):
    code, out, _ = gpugap(capsys, "check", *job_paths("late"), "--workers", "1", "--no-config",
                          "--max", "job.wait_ms_per_iteration=2", "--max", "job.skew_pct=5")
    # 8.28, not combine()'s 8.47: the job's phases start rank 0's steady state once rank 1
    # is warm (analyze_job settles them; test_job_phases_wait_for_the_last_warm_rank).
    assert code == 1 and "job.wait_ms_per_iteration = 8.28" in out
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


@pytest.mark.slow
def test_job_gates_refuse_the_reports_of_two_jobs(capsys, tmp_path):
    """Two runs' ranks passed together (a directory of runs) were taken as one job of 4
    ranks: a skew of 8.4% that no run had. job.* gates and a job baseline now take the
    ranks of one job, by what the reports record, and say so before any analysis;
    gates on each report still hold for each of them."""
    both = [*job_paths("balanced"), *job_paths("late")]
    code, out, err = gpugap(capsys, "check", *both, "--workers", "1", "--no-config",
                            "--max", "job.skew_pct=5")
    assert code == 2 and out == ""
    assert "these 4 reports are not the ranks of one job (by what they record: 2 jobs)" \
        in err and "job.* gates need the ranks of one job" in err
    baseline = tmp_path / "job.json"
    code, _, err = gpugap(capsys, "baseline", "save", "--job", *both, "--workers", "1",
                          "--no-config", "-o", baseline)
    assert code == 2 and "--job needs the ranks of one job" in err
    assert not baseline.exists()
    code, out, _ = gpugap(capsys, "check", *both, "--no-config", "--max",
                          "gpu_busy_pct=100", "--json")
    assert code == 0 and len(json.loads(out)["reports"]) == 4


# ---------------------------------------------------------------------------------------
# Jobs from what the reports record


def run_cli(*argv) -> subprocess.CompletedProcess:
    """`python -m gpugap ARGV` as a CI log runs it: no TTY, COLUMNS=80."""
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "gpugap", *map(str, argv), "--no-config"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def percentages(text: str) -> list[float]:
    return [float(p) for p in PERCENT.findall(text)]


def every_share(document) -> list[float]:
    """Every number of a JSON document whose key names a share (…_pct, share…)."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and (
                    key.endswith("pct") or "share" in key):
                found.append(float(value))
            else:
                found += every_share(value)
    elif isinstance(document, list):
        for value in document:
            found += every_share(value)
    return found


@pytest.fixture(scope="module")
def ranks_jobs():
    """tests/data/captures/ranks/ through the Python API (the CLI's --json carries its
    to_dict() beside each report's analysis)."""
    return gpugap_api.analyze_jobs(RANKS, workers=2)


@pytest.mark.slow
def test_ranks_directory_is_two_jobs_of_two_ranks_at_80_columns():
    done = run_cli("analyze", RANKS, "--workers", "2")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, done.stdout
    # Result first: the line per report, then each job, its verdict before its ranks.
    assert lines[0] == "4 reports: 2 jobs (A, B)"
    assert [ln.split()[:3] for ln in lines[2:6]] == [
        # tests/data/captures/ranks/... is too wide for its column: each by the end
        # of its path that tells it from the others (gpugap.text.shown_paths).
        ["…/ddp-ranks-balanced.rank0.sqlite", "A", "r0"],
        ["…/ddp-ranks-balanced.rank1.sqlite", "A", "r1"],
        ["…/ddp-ranks-late.rank0.sqlite", "B", "r0"],
        ["…/ddp-ranks-late.rank1.sqlite", "B", "r1"]]
    text = done.stdout
    assert text.index("JOB A  BALANCED  2 ranks") < text.index("JOB B  STRAGGLER  2 ranks")
    job_b = text[text.index("JOB B"):]
    assert job_b.index("Rank 1 is the straggler: rank 0 waits 8.28 ms") \
        < job_b.index("Ranks (ms per steady") < job_b.index("rank 1 (…/ddp-ranks-late")
    assert "formed: 2 reports, RANK 0-1 of WORLD_SIZE 2, same TORCHELASTIC_RUN_ID, " \
        "MASTER_ADDR, MASTER_PORT, program ddp_train.py, one host (vm), sessions overlap " \
        "12.7 s" in " ".join(job_b.split())
    assert "file order" not in text
    assert all(0 <= p <= 100 for p in percentages(text)), percentages(text)


@pytest.mark.slow
def test_ranks_directory_through_the_python_api(ranks_jobs):
    jobs = ranks_jobs
    assert isinstance(jobs, gpugap_api.Jobs) and jobs.alone == []
    assert [(g.name, sorted(g.ranks.values())) for g, _ in jobs.jobs] == [("A", [0, 1]),
                                                                          ("B", [0, 1])]
    frame = jobs.frame()
    assert frame["job"].tolist() == ["A", "A", "B", "B"]
    assert frame["rank"].tolist() == [0, 1, 0, 1]
    late = jobs.job("B")
    assert late.kind == "straggler" and late.straggler == 1
    assert late.straggler_summary.report.endswith("ddp-ranks-late.rank1.sqlite")
    assert jobs.job("A").kind == "balanced"
    # What --json prints of the grouping.
    document = json.loads(dumps(jobs.to_dict()))
    assert [(j["name"], [(r["report"].rsplit("/", 1)[1], r["rank"]) for r in j["reports"]],
             j["verdict"]["kind"], j["verdict"]["straggler"]) for j in document["jobs"]] == [
        ("A", [("ddp-ranks-balanced.rank0.sqlite", 0), ("ddp-ranks-balanced.rank1.sqlite", 1)],
         "balanced", None),
        ("B", [("ddp-ranks-late.rank0.sqlite", 0), ("ddp-ranks-late.rank1.sqlite", 1)],
         "straggler", 1)]
    assert [(v["job"], v["rank"]) for v in document["verdicts"]] == [
        ("A", 0), ("A", 1), ("B", 0), ("B", 1)]
    assert document["jobs"][1]["how"].startswith("2 reports, RANK 0-1 of WORLD_SIZE 2")
    assert document["alone"] == []
    shares = every_share(document)
    assert shares and all(0 <= p <= 100 for p in shares)
    # analyze_many takes the ranks of one job: the two jobs together are refused.
    with pytest.raises(gpugap_api.UsageError, match="these 4 reports are not the ranks of "
                                                    "one job .by what they record: 2 jobs."):
        gpugap_api.analyze_many(RANKS, workers=1)


@pytest.fixture(scope="module")
def captures_view():
    """`gpugap analyze tests/data/captures/` (17 unrelated reports) at 80 columns: the
    whole analysis, run once (about 15 s of CPU)."""
    return run_cli("analyze", CAPTURES, "--workers", "2")


@pytest.mark.slow
def test_unrelated_reports_form_no_job(captures_view):
    done = captures_view
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, done.stdout
    assert lines[0] == "17 reports: no job, 17 on their own"
    # Its subfolders are not read, and it says so (on stderr: stdout may be --json).
    assert done.stderr.splitlines() == [
        f"gpugap: note: {CAPTURES}: its subfolders are not read (ranks, runs hold "
        "reports); pass them too to include them"]
    rows = [ln for ln in lines if ln.split()[:1] and ln.split()[0].endswith(".sqlite")]
    assert len(rows) == 17 and all(row.split()[1] == "-" for row in rows)
    assert "JOB" not in done.stdout and "straggler" not in done.stdout
    assert all(0 <= p <= 100 for p in percentages(done.stdout)), percentages(done.stdout)
    # The grouping alone (the Python API, metadata only) says the same, in a blink.
    grouping = gpugap_api.group_reports(CAPTURES)
    assert grouping.jobs == [] and len(grouping.alone) == 17


def test_grouping_reads_what_each_report_records():
    identity = read_identity(job_paths("late")[1])
    assert identity.rank == 1 and identity.world_size == 2 and identity.local_rank == 1
    assert identity.program == "python3 /work/main/tests/data/programs/ddp_train.py"
    assert dict(identity.launch) == {
        "TORCHELASTIC_RUN_ID": "d59a4400-a60c-4163-8850-30fcb92b0660",
        "MASTER_ADDR": "localhost", "MASTER_PORT": "38353"}
    assert identity.host == "vm" and identity.end_ns - identity.start_ns > 12e9
    # The whole tree: the ranks' two jobs, and the single reports alone.
    grouping = group_reports([CAPTURES, RANKS, CAPTURES / "runs"])
    assert [[grouping.identities[m].report.rsplit("/", 1)[1] for m in job.members]
            for job in grouping.jobs] == [
        ["ddp-ranks-balanced.rank0.sqlite", "ddp-ranks-balanced.rank1.sqlite"],
        ["ddp-ranks-late.rank0.sqlite", "ddp-ranks-late.rank1.sqlite"]]
    assert len(grouping.alone) == 17 + 7


def test_duplicate_ranks_and_other_programs_never_merge_edited_identities():
    """Cases no capture holds, made from the late job's real identities: a second run
    with the same launch variables (run id 'none', one port) at the same time, and the
    same launch running another program."""
    rank0, rank1 = (read_identity(p) for p in job_paths("late"))
    # Started 5 ms later (a run started at the very same nanosecond is the same capture:
    # a duplicate, tested below).
    twin0, twin1 = (dataclasses.replace(i, report=i.report + ".again",
                                        start_ns=i.start_ns + 5_000_000,
                                        end_ns=i.end_ns + 5_000_000) for i in (rank0, rank1))
    grouping = group([rank0, twin0, rank1, twin1])
    assert sorted(sorted(job.ranks.values()) for job in grouping.jobs) == [[0, 1], [0, 1]]
    assert all(len(set(job.ranks.values())) == len(job.members) for job in grouping.jobs)
    other = dataclasses.replace(rank1, program="python3 /elsewhere/eval.py")
    assert group([rank0, other]).jobs == []
    # A run of the same launch an hour later is another job.
    later = dataclasses.replace(rank1, start_ns=rank1.start_ns + 3600 * 10**9,
                                end_ns=rank1.end_ns + 3600 * 10**9)
    assert group([rank0, later]).jobs == []
    # Reports that record no rank join only when the same program runs at the same time:
    # ranks from the order of the files, and the job says so.
    bare0, bare1 = (dataclasses.replace(i, env={}) for i in (rank0, rank1))
    (job,) = group([bare1, bare0]).jobs
    assert job.ranks == {0: 0, 1: 1} and job.rank_source.startswith("file order")
    assert job.how.startswith("2 reports, no rank recorded (ranks in file order)")


def test_every_share_is_bounded_edited_iteration_times():
    """Iteration times 1000 times apart (what unrelated reports could give): the skew is
    a share of the slowest iteration, at most 100%."""
    first, second = summaries("late")
    slow = dataclasses.replace(second, iteration_median_ns=second.iteration_median_ns * 1000,
                               collective_start=second.collective_start[:0],
                               collective_end=second.collective_end[:0],
                               collective_iteration=second.collective_iteration[:0])
    job = combine([first, slow])
    assert 99.0 < job.metrics["job.skew_pct"] <= 100.0
    assert job.headline.startswith("Rank 1 is the slowest: its iterations take 36.9 s, the "
                                   "fastest rank's 36.9 ms (a skew of 99.9% of its "
                                   "iteration; no collectives to match across ranks)")
    assert all(0 <= p <= 100 for p in percentages(job.headline))


def test_grouped_summaries_keep_each_job_apart():
    """The summaries of both jobs, in one list (positions 0-3): two jobs, each its own
    verdict, the late one named."""
    both = [dataclasses.replace(s, index=i)
            for i, s in enumerate([*summaries("balanced"), *summaries("late")])]
    jobs = group_summaries(both)
    assert [job.kind for _, job in jobs.jobs] == ["balanced", "straggler"]
    assert jobs.job("B").straggler == 1
    assert jobs.job("B").rank_source == "RANK recorded in each report's environment"


# --- the same capture twice is one report, not two ranks (issue 40) -----------------

def test_two_copies_of_one_report_are_duplicates_not_a_job(tmp_path, capsys):
    """Two copies of train-workers0 in a directory: the same host, program and session
    to the nanosecond, so one capture given twice; no job, the copy says whose it is."""
    for name in ("a.sqlite", "b.sqlite"):
        shutil.copyfile(CAPTURES / "train-workers0.sqlite", tmp_path / name)
    grouping = gpugap_api.group_reports(tmp_path)
    assert (grouping.jobs, grouping.alone, grouping.duplicates) == ([], [0], {1: 0})
    code, out, _ = gpugap(capsys, "analyze", tmp_path, "--workers", "1", "--no-config")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "2 reports: no job, 1 on its own, 1 duplicate"
    assert lines[3] == "…/b.sqlite  dup  a duplicate of …/a.sqlite (the same capture)"
    assert "JOB" not in out and "Reports marked dup are the same capture" in out
    code, out, _ = gpugap(capsys, "analyze", tmp_path, "--json", "--workers", "1",
                          "--no-config")
    doc = json.loads(out)
    assert doc["duplicates"] == [{"report": str(tmp_path / "b.sqlite"),
                                  "of": str(tmp_path / "a.sqlite")}]
    assert [r["duplicate_of"] for r in doc["verdicts"]] == [None, str(tmp_path / "a.sqlite")]


def test_a_copy_of_a_rank_leaves_its_job_whole(tmp_path):
    """The ranks of job A and a copy of rank 0: still job A of 2 ranks; the copy is a
    duplicate, not a rank of a second job; job gates refuse them together."""
    paths = job_paths("balanced")
    copy = tmp_path / "copy-of-rank0.sqlite"
    shutil.copyfile(paths[0], copy)
    grouping = group([read_identity(p) for p in [*paths, copy]])
    assert [j.members for j in grouping.jobs] == [[0, 1]]
    assert (grouping.alone, grouping.duplicates) == ([], {2: 0})
    with pytest.raises(gpugap_api.UsageError, match=r"1 job and 1 duplicate: .*"
                                                    r"copy-of-rank0.sqlite is the same "
                                                    r"capture as .*rank0.sqlite"):
        gpugap_api.analyze_many([*paths, copy], workers=1)


def test_reports_without_session_times_are_duplicates_by_their_bytes():
    from gpugap.analysis.grouping import ReportIdentity

    ids = [ReportIdentity(report=n, program="p", content=c)
           for n, c in (("a", "h1"), ("b", "h2"), ("c", "h1"))]
    assert group(ids).duplicates == {2: 0}


def test_ranks_on_one_gpu_at_once_share_it_edited_summaries():
    """Ranks whose steady states ran on one GPU at the same time share it (issue 38): the
    job says so first. No capture here has two ranks on one GPU, so the two real ranks'
    summaries are edited to name one GPU (their steady states do overlap in time); with
    their own GPUs they share nothing."""
    alone = summaries("balanced")
    assert alone[0].gpu_uuid and alone[0].gpu_uuid != alone[1].gpu_uuid
    assert combine(alone).shared_gpus == {}
    same = [dataclasses.replace(s, gpu_uuid="GPU-same") for s in alone]
    job = combine(same)
    assert job.shared_gpus == {"GPU-same": [0, 1]}
    assert job.headline.startswith("Ranks 0, 1 share one GPU (GPU-same)")
    assert job.to_dict()["shared_gpus"] == {"GPU-same": [0, 1]}
