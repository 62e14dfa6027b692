"""Across nsys versions: older exports lack tables and columns, name them differently,
or leave enums out. Older CUDA captures cannot be made here (Debian's nsys 2023.4 cannot
trace CUDA 13), so these reports are derived from a real 2025.3 export by removing what
older schemas lack: hand-built edge cases, named so."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from gpugap.analysis import analyze
from gpugap.program import oscalls
from gpugap.report import load
from gpugap.report.database import Database
from tests.conftest import load_report, report_path


def derived(tmp_path, name: str, statements: list[str]):
    path = tmp_path / f"handbuilt_{name}.sqlite"
    shutil.copy(report_path("default-stream-bad"), path)
    with sqlite3.connect(path) as conn:
        for sql in statements:
            conn.execute(sql)
    return path


def verdicts(trace):
    a = analyze(trace, range_name="measured")
    return sorted((f.rule, f.cause, f.count) for f in a.findings), a.metrics


OLDER_SCHEMA = [
    # 3.1.7 (2023.2): no greenContextId/graphNodeId/sharedMemoryLimitConfig/mangledName,
    "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN greenContextId",
    "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN graphNodeId",
    "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN sharedMemoryLimitConfig",
    "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN mangledName",
    "ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN greenContextId",
    # EXPORT_META_DATA instead of META_DATA_EXPORT, no META_DATA_CAPTURE,
    "ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA",
    "DROP TABLE META_DATA_CAPTURE",
    # and the NULL stream in TARGET_INFO_CUDA_NULL_STREAM, not CONTEXT_INFO.
    "CREATE TABLE TARGET_INFO_CUDA_NULL_STREAM AS SELECT nullStreamId AS streamId, hwId, "
    "vmId, processId, deviceId, contextId FROM TARGET_INFO_CUDA_CONTEXT_INFO",
    "DROP TABLE TARGET_INFO_CUDA_CONTEXT_INFO",
]


def test_older_schema_gives_the_same_diagnosis(tmp_path):
    old = load(derived(tmp_path, "schema_3_1_7", OLDER_SCHEMA))
    assert old.info.nsys_version == "2025.3.2.0"          # read from EXPORT_META_DATA
    assert old.info.cuda_traced is None                    # unknown without the table
    assert sorted(s for _, s in old.legacy_streams()) == [7]
    assert verdicts(old) == verdicts(load_report("default-stream-bad"))


def test_missing_optional_tables_are_tolerated(tmp_path):
    path = derived(tmp_path, "no_optional_tables", [
        "DROP TABLE TARGET_INFO_GPU", "DROP TABLE OSRT_API", "DROP TABLE ThreadNames",
        "DROP TABLE IF EXISTS CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "DROP TABLE TARGET_INFO_CUDA_STREAM",
        "DROP TABLE ANALYSIS_DETAILS"])
    trace = load(path)
    assert trace.devices.empty and trace.threads.empty and trace.osrt.empty
    # No OS runtime trace: the program's waits and writes are unknown, not absent.
    assert load_report("default-stream-bad").osrt_traced and not trace.osrt_traced
    assert oscalls.read(trace, [int(p) for p in trace.kernels["pid"].unique()]) is None
    # No ANALYSIS_DETAILS: the session's spans are none (the job grouping's timing).
    without, given = Database(path), Database(report_path("default-stream-bad"))
    try:
        assert without.session_spans == [] and given.session_spans != []
    finally:
        without.close()
        given.close()
    assert any("no TARGET_INFO_GPU table" in w for w in trace.info.warnings)
    findings, metrics = verdicts(trace)
    # Without stream flags the NULL stream is still known from the context table, so
    # the legacy-stream verdict survives; without device limits, SM counts default.
    assert sum(n for rule, cause, n in findings
               if (rule, cause) == ("serialized-streams", "legacy-default-stream")) == 29
    assert metrics.kernel_overlap_pct == 0.0


def test_missing_enum_tables_fall_back_and_warn(tmp_path):
    path = derived(tmp_path, "no_mem_kind_enum", ["DROP TABLE ENUM_CUDA_MEM_KIND"])
    trace = load(path)
    assert any("ENUM_CUDA_MEM_KIND" in w for w in trace.info.warnings)
    assert set(trace.memcpys["src_kind"].astype(str)) <= {"<0>", "<1>", "<2>", "Unknown"}


@pytest.mark.parametrize("table", ["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL"])
def test_analysis_survives_or_explains(tmp_path, table):
    from gpugap.errors import GpugapError

    path = derived(tmp_path, f"without_{table}", [f"DROP TABLE {table}"])
    if table == "StringIds":
        with pytest.raises(GpugapError, match="not an nsys export"):
            load(path)
    else:
        trace = load(path)
        assert trace.kernels.empty and len(trace.memcpys) > 0
        assert analyze(trace).metrics.kernels == 0
