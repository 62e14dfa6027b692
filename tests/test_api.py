"""The Python front door (gpugap.load / analyze / analyze_many, Analysis.frames()) on
real captures, and docs/api.md's examples, run as they are written."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpugap
from gpugap.accounting import IDS, PHASES

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "data" / "captures"
TRAIN = CAPTURES / "train-workers0.sqlite"


def doc_blocks() -> list[str]:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
def test_api_md_examples_run_in_order(monkeypatch, capsys):
    """Every ```python block of docs/api.md, in one namespace, from the repository root
    (the blocks carry their own asserts)."""
    blocks = doc_blocks()
    assert len(blocks) >= 6
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/api.md block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Input-bound (data loading): 80.7% of the steady state" in out
    assert "range='NAME'" in out


def test_readme_python_runs(monkeypatch):
    """README's "From Python" block, as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    frame = eval("analysis.frames().accounting", namespace)
    assert len(frame) and set(frame["phase"].astype(str)) >= {"steady"}


@pytest.mark.slow
def test_import_gpugap_is_light():
    """import gpugap loads no pandas: the names are imported on first use."""
    code = ("import sys, gpugap; assert 'pandas' not in sys.modules, 'pandas'; "
            "gpugap.analyze; print(gpugap.__version__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == gpugap.__version__
    assert {"load", "analyze", "analyze_many", "Trace", "Analysis"} <= set(dir(gpugap))


@pytest.mark.slow
def test_an_analysis_imports_pandas_only_for_the_users_dataframes():
    """`gpugap analyze --json` of a real capture never imports pandas (issue 25: it
    costs more than analysing a small report); the DataFrames a user asks for do."""
    code = ("import sys, io, contextlib\n"
            "from gpugap.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    code = main(['analyze', '--json', '--no-config', sys.argv[1]])\n"
            "assert code == 0, code\n"
            "assert 'pandas' not in sys.modules, 'analyze imported pandas'\n"
            "import gpugap\n"
            "analysis = gpugap.analyze(sys.argv[1])\n"
            "assert 'pandas' not in sys.modules, 'gpugap.analyze imported pandas'\n"
            "assert len(analysis.frames().findings) and 'pandas' in sys.modules\n"
            "assert len(gpugap.load(sys.argv[1]).kernels)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(TRAIN)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_load_gives_wide_integer_columns():
    trace = gpugap.load(TRAIN)
    for name in ("kernels", "memcpys", "memsets", "graphs", "api", "syncs", "nvtx",
                 "streams", "devices", "threads"):
        frame = getattr(trace, name)
        for column, dtype in frame.dtypes.items():
            if pd.api.types.is_integer_dtype(dtype):
                width = np.dtype(getattr(dtype, "subtype", dtype)).itemsize   # Sparse[int64]
                assert width >= 4, (name, column, dtype)
    k = trace.kernels
    assert k["blocks"].dtype == np.int64 and k["threads_per_block"].dtype == np.int64
    # int8 streams made 7 * 10 read -86 (as the issue reported); here it is 70 and more.
    assert int((k["stream"] * 10).min()) == 10 * int(k["stream"].min()) >= 0
    assert (k["blocks"] * k["threads_per_block"] > 0).all()


def test_demangled_names_beside_short_ones():
    k = gpugap.load(CAPTURES / "small-compile.sqlite").kernels
    assert {"name", "demangled"} <= set(k.columns)
    fill = k[k["name"] == "vectorized_elementwise_kernel"]["demangled"].astype(str)
    # One short name, several template instances, each spelled out in full.
    assert fill.nunique() == 3
    assert fill.str.startswith("void at::native::vectorized_elementwise_kernel<").all()
    # Triton kernels have no mangled name: both columns carry the same text.
    triton = k[k["name"].astype(str).str.startswith("triton_")]
    assert len(triton) and (triton["name"].astype(str) == triton["demangled"].astype(str)).all()


def test_demangled_name_in_json_evidence():
    analysis = gpugap.analyze(ROOT / "reports/default-stream/h200-sample/bad.sqlite",
                              range="measured")
    finding = analysis.findings_of("serialized-streams")[0].to_dict()
    first = finding["evidence"]["transitions"][0]["first"]
    # The range's first transition: its kernels' names as the program wrote them.
    assert first["name"] and first["demangled"] == first["name"] == "add_one"


def test_analyze_path_and_trace_agree():
    by_path = gpugap.analyze(TRAIN)
    by_trace = gpugap.analyze(gpugap.load(TRAIN))
    assert by_path.to_dict()["findings"] == by_trace.to_dict()["findings"]
    assert by_path.verdict.headline == by_trace.verdict.headline


@pytest.mark.slow
def test_frames_add_up_on_a_real_capture():
    analysis = gpugap.analyze(TRAIN)
    frames = analysis.frames()
    assert isinstance(frames, gpugap.Frames)
    ph = frames.phases
    assert list(ph["phase"]) == list(PHASES)
    assert ph["start_ns"].iloc[1:].tolist() == ph["end_ns"].iloc[:-1].tolist()
    assert ph.set_index("phase").loc["steady", "iterations"] == 39
    acc = frames.accounting
    assert set(acc["bucket"].astype(str)) <= set(IDS)
    summed = acc.groupby(["device", "phase"], observed=True)["ns"].sum()
    assert (summed == ph.set_index(["device", "phase"])["ns"][summed.index]).all()
    steady = acc[acc["phase"] == "steady"].set_index("bucket")
    assert steady["pct"].sum() == pytest.approx(100.0, abs=0.01)
    assert steady.loc["input", "pct"] > 50                    # the verdict's bucket
    it = frames.iterations
    assert len(it) == 40 and it["label"].iloc[0] == "step 0"
    assert (it[list(IDS)].sum(axis=1) == it["ns"]).all()
    f = frames.findings
    assert len(f) == len(analysis.findings)
    assert f["cost_ns"].dtype == np.int64
    # A process id is int64 as the trace's ids are (-1 where none is known, as a
    # finding made without one would have): never pandas' nullable Int64.
    assert f["pid"].dtype == np.int64
    assert f["pid"].tolist() == [-1 if x.pid is None else x.pid for x in analysis.findings]
    assert (f["pid"] == int(gpugap.load(TRAIN).kernels["pid"].iloc[0])).all()
    assert f.iloc[0]["rule"] == analysis.findings[0].rule
    rg = frames.ranges
    assert rg.iloc[0]["path"] == "step N" and rg.iloc[0]["count"] == 40


def test_frames_without_gpu_work_are_empty_not_missing():
    analysis = gpugap.analyze(ROOT / "tests/data/cpu-only/cpu-only-nvtx.sqlite",
                              require_gpu=False)
    assert analysis.status == "no-cuda-activity"
    frames = analysis.frames()
    for name in ("findings", "phases", "accounting", "iterations"):
        frame = getattr(frames, name)
        assert frame.empty and len(frame.columns), name
    assert len(frames.ranges)                   # its NVTX ranges are still listed


def test_errors_speak_python():
    with pytest.raises(gpugap.UsageError) as err:
        gpugap.analyze(TRAIN, range="no-such-range")
    assert "range='NAME'" in str(err.value) and "--" not in str(err.value)
    # The command line gets the same error with its flag.
    assert "--range NAME" in err.value.cli_message()
    with pytest.raises(gpugap.UsageError, match="unknown rule 'no-such-rule' in thresholds"):
        gpugap.analyze(TRAIN, thresholds={"no-such-rule": {"x": 1}})
    with pytest.raises(gpugap.UsageError, match="unknown rule no-such-rule"):
        gpugap.analyze(TRAIN, rules=["no-such-rule"])
    with pytest.raises(gpugap.ReportError, match="no such file"):
        gpugap.load("no-such-report.sqlite")
    with pytest.raises(gpugap.NoCudaActivity):
        gpugap.analyze(ROOT / "tests/data/cpu-only/cpu-only-nvtx.sqlite")
    with pytest.raises(TypeError, match="report must be a path"):
        gpugap.load(42)
    with pytest.raises(TypeError, match="thresholds must be a mapping"):
        gpugap.analyze(TRAIN, thresholds=[("launch-gap", 1)])


def test_library_error_texts_name_no_flags():
    """Every error raised in the library names options through gpugap.errors.option, so
    none of its messages spells a command-line flag for Python callers."""
    flag = re.compile(r"(Error|GpugapError)\((f?\"[^\"]*\s--[a-z])")
    offenders = []
    for path in (ROOT / "gpugap").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("gpugap/cli/"):
            continue                  # the command line speaks flags
        text = path.read_text(encoding="utf-8")
        offenders += [f"{rel}: {m.group(2)}" for m in flag.finditer(text)]
    assert not offenders, offenders


@pytest.mark.slow
def test_analyze_many_is_a_job_with_a_frame():
    ranks = sorted((CAPTURES / "ranks").glob("ddp-ranks-late.rank*.sqlite"))
    job = gpugap.analyze_many(ranks, workers=1)
    assert isinstance(job, gpugap.Job)
    frame = job.frame()
    assert frame["rank"].tolist() == [0, 1]
    assert {"iteration_median_ms", "wait_ms_per_iteration", "top_rule"} <= set(frame.columns)
    assert job.kind == "straggler"
    # A directory expands to its reports; a bad one is listed, not raised.
    with pytest.raises(gpugap.UsageError, match="workers must be a positive integer"):
        gpugap.analyze_many(ranks, workers=0)
    mixed = gpugap.analyze_many([*ranks, os.fspath(ROOT / "README.md")], workers=1)
    assert len(mixed.ranks) == 2 and len(mixed.failed) == 1
    assert "1 report(s) not analyzed (Job.failed)" in repr(mixed)
    assert "not analyzed: " in mixed._repr_html_()


@pytest.mark.slow
def test_jobs_display_themselves_in_a_notebook():
    """A Job or Jobs on its own in a cell: a few lines of text (its repr was every
    rank's every field, 16-65 kB), and in Jupyter the terminal's view as HTML."""
    jobs = gpugap.analyze_jobs(CAPTURES / "ranks", workers=1)
    text = repr(jobs)
    assert text.startswith("4 reports: 2 jobs (A, B)")
    assert max(len(line) for line in text.splitlines()) <= 80 and len(text) < 2000
    late = jobs.job("B")
    text = repr(late)
    assert text.startswith("Job of 2 ranks (straggler): Rank 1 is the straggler")
    assert "rank 1 (straggler): ddp-ranks-late.rank1.sqlite" in text
    assert max(len(line) for line in text.splitlines()) <= 80 and len(text) < 2000
    view = late._repr_html_()
    assert html.escape(late.headline) in view and "<h3>Job B: 2 ranks, straggler</h3>" in view
    assert "ddp-ranks-late.rank0.sqlite" in view and "1 *</td>" in view   # the straggler
    for row in late.table():
        assert html.escape(row["top_cause"]["headline"]) in view       # each rank's own
    assert "Formed:</b> 2 reports, RANK 0-1 of WORLD_SIZE 2" in view
    whole = jobs._repr_html_()
    assert whole.count("<h3>Job ") == 2 and "4 reports: 2 jobs (A, B)" in whole
    assert all(html.escape(row["headline"]) in whole for row in jobs.verdicts())
    # Made without the front door: the text stands in.
    from gpugap.analysis.job import analyze_jobs

    assert analyze_jobs([CAPTURES / "ranks"], workers=1)._repr_html_() is None


# --- pandas-shaped results -------------------------------------------------------------

@pytest.fixture(scope="module")
def train():
    """train-workers0 analyzed once through the front door, with its trace."""
    trace = gpugap.load(TRAIN)
    return trace, gpugap.analyze(trace)


def test_results_read_as_attributes_and_as_mappings(train):
    _, analysis = train
    frames = analysis.frames()
    assert frames["accounting"] is frames.accounting
    assert frames.keys() == ["findings", "ranges", "phases", "accounting", "iterations"]
    assert [name for name, _ in frames.items()] == frames.keys()
    assert analysis.metrics["gpu_busy_pct"] == analysis.metrics.gpu_busy_pct > 0
    assert dict(analysis.metrics) == analysis.metrics.to_dict()
    finding = analysis.findings[0]
    assert finding["rule"] == finding.rule == "launch-gap"
    assert "claim" not in finding and "marks" not in finding.keys()    # internals
    assert analysis.verdict["cause"] == "input"
    assert analysis["verdict"] is analysis.verdict
    assert analysis["program"]["frameworks"] == ["PyTorch"]
    assert analysis.program.processes[0]["threads"][0]["role"] == "launcher"
    assert analysis.ranges[0]["metrics"]["kernels"] == analysis.ranges[0].metrics.kernels
    assert analysis.get("no-such-key", 7) == 7
    with pytest.raises(KeyError, match="'gpu_busy': Metrics has .*gpu_busy_pct"):
        analysis.metrics["gpu_busy"]


def test_to_json_is_what_analyze_json_prints(train, capsys, monkeypatch):
    from gpugap.cli import main

    _, analysis = train
    monkeypatch.chdir(ROOT)
    gemm = "tests/data/captures/gemm.sqlite"
    assert main(["analyze", gemm, "--json", "--no-config"]) == 0
    printed = capsys.readouterr().out
    assert printed == gpugap.analyze(gemm).to_json() + "\n"
    # Every result object writes itself with the same serializer.
    assert json.loads(analysis.findings[0].to_json()) == \
        json.loads(analysis.to_json())["findings"][0]
    assert json.loads(analysis.verdict.to_json())["headline"] == analysis.verdict.headline
    frames = json.loads(analysis.frames().to_json())
    assert frames["findings"][0]["device"] == 0 and frames["phases"][0]["phase"] == "start-up"


TIME_OR_ID = re.compile(r"^(start|end|api_start|api_end|gtid|pid|tid|corr|device|stream|"
                        r"context|event|graph_node|graph_id|graph_exec_id|src_device|"
                        r"dst_device|.*_ns)$")


@pytest.mark.parametrize("capture", ["train-workers0", "small-graph-node"])
def test_every_time_and_id_column_of_a_trace_is_an_integer(capture):
    trace = gpugap.load(CAPTURES / f"{capture}.sqlite")
    checked = 0
    for name in ("kernels", "memcpys", "memsets", "graphs", "api", "syncs", "nvtx",
                 "streams", "devices", "threads", "processes", "osrt", "event_waits",
                 "gpu_ops"):
        for column, dtype in getattr(trace, name).dtypes.items():
            if TIME_OR_ID.match(column):
                assert pd.api.types.is_integer_dtype(dtype), (name, column, dtype)
                checked += 1
    assert checked > 60
    k = trace.kernels
    for column in ("start", "end", "api_start", "api_end", "gtid"):
        assert k[column].dtype == np.int64, column
    assert (k["gtid"] >= 0).all() and (k["api_start"] < k["start"]).all()
    nodes = k["graph_node"]
    if capture == "small-graph-node":        # node-level graph tracing: ids kept exact
        from_graphs = nodes[nodes >= 0]
        assert nodes.dtype == np.int64 and len(from_graphs) == trace.graphs["nodes"].sum()
        assert set((from_graphs // 2**32).tolist()) == set(trace.graphs["graph_id"].tolist())
    else:                                    # none from a graph: stored sparse, -1
        assert str(nodes.dtype) == "Sparse[int64, -1]" and (nodes == -1).all()


def test_builder_edge_case_unmatched_launch_reads_minus_one():
    """No real capture lacks its launch calls (they start with the program): a report
    whose kernel has no launch call, made in memory, reads -1 there, still int64."""
    from gpugap.report.builder import TraceBuilder

    b = TraceBuilder()
    b.kernel("a", start_us=100, dur_us=10)
    b.kernel("b", start_us=200, dur_us=10, api=None)
    k = b.build().kernels.sort_values("start")
    assert k[["api_start", "api_end", "gtid"]].dtypes.eq(np.int64).all()
    assert k["gtid"].tolist()[1] == -1 and k["api_start"].tolist()[1] == -1
    assert k["gtid"].tolist()[0] >= 0 and k["api_start"].tolist()[0] > 0


def test_frames_have_numeric_percentages_in_a_range_scope():
    analysis = gpugap.analyze(ROOT / "reports/default-stream/h200-sample/bad.sqlite",
                              range="measured")
    frames = analysis.frames()
    ranges = frames["ranges"]
    for column in ranges.columns:
        if column.endswith("_pct") or column == "concurrency":
            assert ranges[column].dtype == np.float64, column
        elif column.endswith("_ns") or column in ("count", "kernels", "depth"):
            assert ranges[column].dtype == np.int64, column
    assert ranges["copy_compute_overlap_pct"].isna().all()     # no copies: NaN
    for name, frame in frames.items():
        # Object columns hold text only (pandas 2 keeps strings as object; 3 as str),
        # except the findings' lists of streams...
        mixed = [c for c in frame.columns if pd.api.types.is_object_dtype(frame[c])
                 and not frame[c].map(lambda v: v is None or isinstance(v, str)).all()]
        assert not mixed or name == "findings", (name, mixed)
        for column in frame.columns:
            if column.endswith("_ns") or column == "ns":
                assert pd.api.types.is_integer_dtype(frame[column]), (name, column)
            if column.endswith("pct"):
                assert frame[column].dtype == np.float64, (name, column)


def test_thresholds_named_as_the_cli_names_them():
    gemm = CAPTURES / "gemm.sqlite"
    dotted = gpugap.analyze(gemm, thresholds={"launch-gap.min_gap_us": 50},
                            rules=["launch-gap"])
    nested = gpugap.analyze(gemm, thresholds={"launch-gap": {"min_gap_us": 50}},
                            rules=["launch-gap"])
    assert dotted.thresholds["launch-gap"]["min_gap_us"] == 50.0
    assert dotted.to_dict()["findings"] == nested.to_dict()["findings"]
    with pytest.raises(ValueError) as err:
        gpugap.analyze(TRAIN, thresholds={"launch-gap.min_gap": 50})
    assert str(err.value) == ("rule launch-gap has no threshold min_gap (thresholds); it "
                              "has: min_gap_us, min_share_pct, max_examples")
    assert isinstance(err.value, gpugap.UsageError)
    with pytest.raises(ValueError, match="bad thresholds key 'launch-gap'; write"):
        gpugap.analyze(TRAIN, thresholds={"launch-gap": 50})


def test_an_analysis_displays_itself_in_a_notebook(train):
    _, analysis = train
    view = analysis._repr_html_()
    assert html.escape(analysis.verdict.headline) in view
    for f in analysis.findings:
        assert f"{f.rule} [{f.cause}]" in view
    assert "input" in view and "80.7%" in view                  # the breakdown
    assert '<iframe class="gpugap-timeline" srcdoc="' in view   # the timeline page
    assert html.escape('id="gpugap-data"') in view
    text = repr(analysis)
    assert text.startswith("Analysis of ") and "Verdict: Input-bound" in text
    assert max(len(line) for line in text.splitlines()) <= 80 and len(text) < 1000
    # One made without the front door has no picture to draw: its repr stands in.
    from gpugap.analysis import analyze

    assert analyze(train[0])._repr_html_() is None
