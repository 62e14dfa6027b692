"""The Python front door (gpugap.load / analyze / analyze_many, Analysis.frames()) on
real captures, and docs/api.md's examples, run as they are written."""

from __future__ import annotations

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


def test_import_gpugap_is_light():
    """import gpugap loads no pandas: the names are imported on first use."""
    code = ("import sys, gpugap; assert 'pandas' not in sys.modules, 'pandas'; "
            "gpugap.analyze; assert 'pandas' in sys.modules; print(gpugap.__version__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == gpugap.__version__
    assert {"load", "analyze", "analyze_many", "Trace", "Analysis"} <= set(dir(gpugap))


def test_load_gives_wide_integer_columns():
    trace = gpugap.load(TRAIN)
    for name in ("kernels", "memcpys", "memsets", "graphs", "api", "syncs", "nvtx",
                 "streams", "devices", "threads"):
        frame = getattr(trace, name)
        for column, dtype in frame.dtypes.items():
            if pd.api.types.is_integer_dtype(dtype):
                assert np.dtype(dtype).itemsize >= 4, (name, column, dtype)
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
