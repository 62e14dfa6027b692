"""Validation at the loading boundary (issue 13): what the loader does with values no real
export holds, and how a report that lost its GPU data is noticed. Every report here is a
real export damaged on purpose in a temporary copy: hand-built edge cases, named so."""

from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest

from gpugap.cli import main
from gpugap.errors import ReportError
from gpugap.report import load, reader
from gpugap.report.database import Database
from tests.conftest import DATA, load_report, report_path

REAL = ["moe-experts-bad", "default-stream-bad", "h2d-copy-bad", "cublas-warmup-good"]


def derived(tmp_path, name: str, statements: list[str], source="default-stream-bad"):
    """A copy of a real report (a scenario's name, or a path) with *statements* run on it."""
    path = tmp_path / f"handbuilt_{name}.sqlite"
    shutil.copy(report_path(source) if isinstance(source, str) else source, path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()
    return path


def loosen(table: str) -> list[str]:
    """SQL that rebuilds *table* without its constraints (NOT NULL, keys), so that any
    value can be written into it."""
    return [f"CREATE TABLE loose AS SELECT * FROM {table}", f"DROP TABLE {table}",
            f"ALTER TABLE loose RENAME TO {table}"]


def analyze_json(capsys, path) -> tuple[int, dict | None, str]:
    code = main(["analyze", str(path), "--json", "--no-config"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


@pytest.mark.parametrize("name", REAL)
def test_real_reports_have_no_problems(name):
    info = load_report(name).info
    assert info.problems == {} and not info.gpu_data_lost
    assert not info.nsys_older_than_cuda and info.cuda_version == "13.0"
    assert info.capture_end_ns is not None


@pytest.mark.slow
def test_real_captures_have_not_lost_gpu_data():
    for path in sorted((DATA / "captures").glob("*.sqlite")):
        info = load(path).info
        assert not info.gpu_data_lost and info.problems == {}, (path.name, info.warnings)


def test_bad_times_are_dropped_and_counted(tmp_path):
    path = derived(tmp_path, "bad_times", [
        *loosen("CUPTI_ACTIVITY_KIND_KERNEL"), *loosen("CUPTI_ACTIVITY_KIND_RUNTIME"),
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = NULL WHERE rowid = 1",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = 'soon' WHERE rowid = 2",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = 9e999 WHERE rowid = 3",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 5 WHERE rowid = 4",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = 4611686018427387904 WHERE rowid = 5",
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET \"end\" = -9223372036854775808 "
        "WHERE rowid % 50 = 0"])
    trace = load(path)
    assert len(trace.kernels) == 40 - 5
    p = trace.info.problems
    assert p["kernels:no-time"] == 3 and p["kernels:backwards"] == 1
    assert p["kernels:beyond"] == 1 and p["CUDA API calls:no-time"] == 11
    assert any(w.startswith("3 kernels without a valid start/end time") for w in
               trace.info.warnings)
    for frame in (trace.kernels, trace.api):
        assert (frame["start"] > 0).all() and (frame["end"] >= frame["start"]).all()
        assert frame["end"].max() < 2**62


def test_a_missing_column_is_never_read_as_its_name(tmp_path):
    path = derived(tmp_path, "no_nvtx_end", ["ALTER TABLE NVTX_EVENTS DROP COLUMN \"end\""])
    trace = load(path)      # SQLite would read "end" as the string 'end'
    assert len(trace.nvtx) and (trace.nvtx["end"] >= trace.nvtx["start"]).all()
    assert any("never closed" in w for w in trace.info.warnings)

    path = derived(tmp_path, "no_kernel_end",
                   ["ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN \"end\""])
    trace = load(path)
    assert trace.kernels.empty and len(trace.memcpys)
    assert any("CUPTI_ACTIVITY_KIND_KERNEL lacks column(s) end: table ignored" in w
               for w in trace.info.warnings)


def test_wrongly_typed_values_read_as_missing(tmp_path):
    path = derived(tmp_path, "retyped", [
        *loosen("CUPTI_ACTIVITY_KIND_KERNEL"),
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 'many', blockX = X'00ff', "
        "registersPerThread = 1.5, streamId = -3, correlationId = 9e999 WHERE rowid <= 4",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridY = 100000 WHERE rowid = 5"])
    k = load(path).kernels
    assert len(k) == 40
    assert k["grid_x"].min() >= 1 and k["block_x"].min() >= 1 and k["grid_y"].max() == 65535
    assert k["stream"].min() >= 0 and k["corr"].min() >= 0
    assert (k["blocks"] > 0).all()


def test_unknown_device_gets_a_placeholder(capsys, tmp_path):
    path = derived(tmp_path, "unknown_device", [
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 3 WHERE rowid = 7",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 100000 WHERE rowid = 8"])
    trace = load(path)
    assert sorted(trace.devices["device"]) == [0, 3] and len(trace.kernels) == 39
    assert trace.info.problems == {"kernels:device": 1, "devices:unknown": 1}
    row = trace.device_row(3)
    assert row["sm_count"] == 132 and row["name"] is None
    # The rules see a kernel on a device TARGET_INFO_GPU lacks (serialized-streams
    # indexed the devices it knew: IndexError).
    from tests.test_fuzz import check_document

    code, doc, err = analyze_json(capsys, path)
    assert code == 0 and "Traceback" not in err and check_document(doc) == []


def test_names_null_blob_dangling_and_bad_utf8(tmp_path):
    path = derived(tmp_path, "names", [
        *loosen("CUPTI_ACTIVITY_KIND_KERNEL"),
        "UPDATE StringIds SET value = X'ff00' WHERE id = "
        "(SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 1)",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 987654321 WHERE rowid = 2",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = NULL WHERE rowid = 3",
        "UPDATE StringIds SET value = CAST(X'6b65726e656cff' AS TEXT) WHERE id = "
        "(SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = 4)"])
    trace = load(path)
    names = set(trace.kernels["name"].astype(str))
    assert "<987654321>" in names and "<unnamed>" in names and "kernel\ufffd" in names
    assert all(isinstance(n, str) for n in names)
    assert trace.info.problems["StringIds:value"] == 1


def test_invalid_utf8_table_name_is_tolerated(tmp_path):
    path = derived(tmp_path, "bad_table_name", [
        "CREATE TABLE junk (a INTEGER)", "PRAGMA writable_schema = ON",
        "UPDATE sqlite_master SET name = CAST(X'6a756e6bff' AS TEXT), "
        "tbl_name = CAST(X'6a756e6bff' AS TEXT), "
        "sql = CAST(X'435245415445205441424c4520226a756e6bff222028612920' AS TEXT) "
        "WHERE name = 'junk'"])
    trace = load(path)
    assert "junk\ufffd" in trace.info.tables and len(trace.kernels) == 40


def test_error_quoting_a_non_utf8_name_is_one_line_exit_2(capsys, tmp_path):
    """Two tables given the same non-UTF-8 name: SQLite's 'malformed schema' message
    quotes the name, and Python failed to decode the message (a UnicodeDecodeError
    escaped the handler for SQLite errors)."""
    rename = ("UPDATE sqlite_master SET name = CAST(X'6a756e6bff' AS TEXT), "
              "tbl_name = CAST(X'6a756e6bff' AS TEXT), "
              "sql = CAST(X'435245415445205441424c4520226a756e6bff222028612920' AS TEXT) "
              "WHERE name = '{}'")
    path = derived(tmp_path, "same_bad_name_twice", [
        "CREATE TABLE junk1 (a INTEGER)", "CREATE TABLE junk2 (a INTEGER)",
        "PRAGMA writable_schema = ON", rename.format("junk1"), rename.format("junk2")])
    code, doc, err = analyze_json(capsys, path)
    assert code == 2 and doc is None and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "corrupt" in err or "could not be read" in err


def test_metadata_is_validated(tmp_path):
    path = derived(tmp_path, "metadata", [
        *(sql for t in ("META_DATA_CAPTURE", "ENUM_CUDA_MEMCPY_OPER", "ENUM_CUPTI_STREAM_TYPE",
                        "ANALYSIS_DETAILS", "NVTX_EVENTS", "TARGET_INFO_CUDA_STREAM",
                        "TARGET_INFO_GPU") for sql in loosen(t)),
        "UPDATE ANALYSIS_DETAILS SET startTime = 'x', stopTime = 9e999",
        "UPDATE META_DATA_CAPTURE SET value = NULL WHERE rowid % 2 = 0",
        "UPDATE META_DATA_CAPTURE SET name = X'00' WHERE rowid % 3 = 0",
        "UPDATE ENUM_CUDA_MEMCPY_OPER SET id = NULL WHERE rowid = 1",
        "UPDATE ENUM_CUPTI_STREAM_TYPE SET name = NULL, label = X'ff'",
        "UPDATE TARGET_INFO_GPU SET smCount = 'lots', maxWarpsPerSm = -1, "
        "computeMajor = 'nine'",
        "UPDATE TARGET_INFO_CUDA_STREAM SET flag = 'x' WHERE rowid = 1",
        "UPDATE NVTX_EVENTS SET domainId = 'd', globalTid = -5 WHERE rowid = 1"])
    trace = load(path)
    assert trace.info.capture_start_ns is None and trace.info.capture_end_ns is None
    dev = trace.devices.iloc[0]
    assert dev["sm_count"] == 132 and dev["max_warps_per_sm"] == 64
    assert dev["compute_capability"] is None
    assert "ANALYSIS_DETAILS holds no valid capture start/stop time: ignored" in \
        trace.info.warnings
    assert (trace.nvtx["gtid"] >= 0).all()


def test_huge_rowid_does_not_reserve_memory(tmp_path, monkeypatch):
    path = derived(tmp_path, "huge_rowid", [
        "CREATE TABLE one AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1",
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM one",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = 1073741824 "
        "WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)", "DROP TABLE one"])
    db = Database(path)
    try:
        bound = reader.row_bound(db, "CUPTI_ACTIVITY_KIND_KERNEL")
    finally:
        db.close()
    assert 41 <= bound <= path.stat().st_size // reader.MIN_ROW_BYTES < 2**30
    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)       # the fast path, with that bound
    assert len(load(path).kernels) == 41


def test_too_broken_to_analyze_is_one_line_exit_2(capsys, tmp_path):
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET")
    path = derived(tmp_path, "no_valid_times",
                   [sql for t in tables for sql in [*loosen(t), f"UPDATE {t} SET start = 'x'"]])
    with pytest.raises(ReportError, match="too broken to analyze"):
        load(path)
    code, doc, err = analyze_json(capsys, path)
    assert code == 2 and doc is None
    assert len(err.strip().splitlines()) == 1 and err.startswith("gpugap: error: ")


def test_garbage_timestamps_give_no_impossible_costs(capsys, tmp_path):
    from tests.test_fuzz import check_document

    path = derived(tmp_path, "garbage_times", [
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET \"end\" = 9223372036854775807 "
        "WHERE rowid % 7 = 0",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 1 WHERE rowid = 3",
        "UPDATE NVTX_EVENTS SET \"end\" = 7777 WHERE rowid % 3 = 0"], source="moe-experts-bad")
    code, doc, _ = analyze_json(capsys, path)
    assert code == 0
    assert [p for p in check_document(doc) if "queued_ns" not in p] == []
    assert any("ending before they start" in w for w in doc["warnings"])


def test_kernels_whose_launch_call_was_dropped_count_nothing_between(capsys, tmp_path):
    """Fuzz case 1365 (seed 13): launch calls ending at 2^63-1 are dropped, so some
    kernels lose their launch time; serialized-streams counted the legacy-stream launches
    'between' A's launch and B's unknown one (read as 0) as a negative number."""
    from tests.test_fuzz import check_document

    path = derived(tmp_path, "dropped_launches", [
        *loosen("CUPTI_ACTIVITY_KIND_RUNTIME"),
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET \"end\" = 9223372036854775807 "
        "WHERE rowid % 7 = 3"])
    code, doc, _ = analyze_json(capsys, path)
    assert code == 0 and check_document(doc) == []
    transitions = [t for f in doc["findings"]
                   for t in (f.get("evidence") or {}).get("transitions", [])]
    legacy = [t["legacy_ops_launched_between"] for t in transitions
              if "legacy_ops_launched_between" in t]
    assert legacy and min(legacy) >= 0


def test_garbled_launch_times_give_no_share_over_100_pct(capsys, tmp_path):
    """Fuzz case 1070 of seed 14: one launch call in seven starts at 2^31+5 ns (inside
    the capture, so a valid, if seconds long, call). The iterations mapped from those
    launches have a median length of 0 ns, and the verdict divided a bucket's time per
    iteration by it: 'copy D2H pinned: 919547.1% of each iteration'."""
    from tests.test_fuzz import check_document

    path = derived(tmp_path, "garbled_launch_times", [
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 2147483653 WHERE rowid % 7 = 3"],
        source=DATA / "captures" / "eval-pinned.sqlite")
    code, doc, _ = analyze_json(capsys, path)
    assert code == 0 and check_document(doc) == []
    verdicts = [doc["verdict"], *(d["verdict"] for d in doc["devices"])]
    assert all(0 <= (v.get("share_pct") or 0) <= 100 for v in verdicts)


def test_capture_window_contradicting_the_events_is_ignored(tmp_path):
    path = derived(tmp_path, "early_stop", ["UPDATE ANALYSIS_DETAILS SET stopTime = 1000, "
                                            "startTime = 10"])
    trace = load(path)
    assert len(trace.kernels) == 40 and trace.info.capture_end_ns is None
    assert any("ANALYSIS_DETAILS" in w and "ignored" in w for w in trace.info.warnings)


# --- a report that lost its GPU data (issue 13, part 6) --------------------------------

def test_handbuilt_most_kernels_deleted_is_gpu_data_lost(capsys, tmp_path):
    """What an nsys too old for the CUDA it traced leaves: the launch calls, few or no
    kernels (the real case: 1036 runtime calls, 2 kernels). Made from a real export by
    deleting most kernel rows."""
    path = derived(tmp_path, "lost_kernels", [
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > 2"], source="moe-experts-bad")
    trace = load(path)
    assert trace.info.gpu_data_lost and not trace.info.nsys_older_than_cuda
    line = next(w for w in trace.info.warnings if w.startswith("GPU data lost"))
    assert "5182 of 5184 kernel launch calls have no kernel" in line
    code, doc, _ = analyze_json(capsys, path)
    assert code == 0 and any(w.startswith("GPU data lost") for w in doc["warnings"])


def test_handbuilt_all_kernels_deleted_is_gpu_data_lost(tmp_path):
    path = derived(tmp_path, "no_kernels", ["DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL"])
    trace = load(path)
    assert trace.info.gpu_data_lost


def test_handbuilt_nsys_older_than_cuda(tmp_path):
    """The export says nsys 2023.4 wrote it, the driver CUDA 13.0."""
    old = "UPDATE META_DATA_EXPORT SET value = '2023.4.4.54' " \
          "WHERE name = 'EXPORT_PRODUCT_VERSION'"
    trace = load(derived(tmp_path, "old_nsys", [old]))
    assert trace.info.nsys_older_than_cuda and trace.info.cuda_version == "13.0"
    assert any("older than the CUDA 13.0 it traced" in w for w in trace.info.warnings)
    # Its 40 kernels all arrived: the launches show nothing was lost.
    assert not trace.info.gpu_data_lost
    lost = load(derived(tmp_path, "old_nsys_few_launches", [
        old, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL",
        "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN (SELECT id FROM StringIds "
        "WHERE value LIKE 'cuLaunchKernel%')"]))
    assert lost.info.gpu_data_lost


def test_launches_captured_into_graphs_are_not_lost_data():
    # small-graph: 20 kernel launches made while capturing a graph have no kernel of
    # their own (the graph launches run them).
    from gpugap.report.loader import launches_without_kernels

    trace = load(DATA / "captures" / "small-graph.sqlite")
    api = trace.table("api")
    launched = np.zeros(len(api), dtype=bool)
    from gpugap.report.loader import attach_launches

    attach_launches(trace.table("kernels"), api, launched)
    assert launches_without_kernels(api, launched) == (464, 0)


# --- gpugap check fails on a report that lost GPU data, unless told otherwise ----------

def check_json(capsys, *argv) -> tuple[int, dict, str]:
    code = main(["check", *map(str, argv), "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_check_fails_on_lost_gpu_data_unless_allowed(capsys, tmp_path, monkeypatch):
    """The hand-built lost-data report (a real export that kept 2 of its 5184 kernels):
    a gate it holds passes, yet check fails on the lost data, with one gate line that
    says why and how to opt out; --allow-lost-gpu-data (or allow_lost_gpu_data = true in
    the config) makes it a skip."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    path = derived(tmp_path, "lost_kernels", [
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > 2"], source="moe-experts-bad")
    gate = ["--max", "findings.count=100000"]
    code, doc, _ = check_json(capsys, path, *gate, "--no-config")
    assert code == 1 and doc["passed"] is False
    assert doc["summary"] == {"gates": 2, "passed": 1, "failed": 1, "skipped": 0}
    lost, held = doc["reports"][0]["gates"]
    assert (lost["kind"], lost["metric"], lost["status"], lost["value"]) == \
        ("data", "gpu_data_lost", "fail", True)
    assert lost["name"] == "whole: gpu_data_lost = false"
    assert "lost GPU data: most of its kernel launch calls have no kernel" in lost["message"]
    assert "--allow-lost-gpu-data" in lost["message"]
    assert held["status"] == "pass"
    assert any(w.startswith("GPU data lost") for w in doc["reports"][0]["warnings"])

    # The terminal: one FAIL line naming the problem and the way out; the summary line.
    assert main(["check", str(path), *gate, "--no-config"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    fail_at = [i for i, ln in enumerate(lines) if ln.startswith("FAIL ")]
    assert len(fail_at) == 1
    # The message wraps under its label to fit 80 columns: read its paragraph.
    end = next(i for i in range(fail_at[0] + 1, len(lines))
               if not lines[i].startswith("     "))
    assert "lost GPU data" in " ".join(ln.strip() for ln in lines[fail_at[0]:end])
    assert "gpugap check failed: 1 of 2 gates failed" in out

    # JUnit: a failure of type gpugap.data.
    junit = tmp_path / "junit.xml"
    assert main(["check", str(path), *gate, "--no-config", "--junit", str(junit)]) == 1
    capsys.readouterr()
    assert 'type="gpugap.data"' in junit.read_text()

    # Opting out: the option, or the config key.
    code, doc, _ = check_json(capsys, path, *gate, "--no-config", "--allow-lost-gpu-data")
    assert code == 0 and doc["passed"] is True
    assert doc["summary"] == {"gates": 2, "passed": 1, "failed": 0, "skipped": 1}
    assert doc["reports"][0]["gates"][0]["status"] == "skip"
    config = tmp_path / "gpugap.toml"
    config.write_text("allow_lost_gpu_data = true\n")
    code, doc, _ = check_json(capsys, path, *gate)
    assert code == 0 and doc["reports"][0]["gates"][0]["status"] == "skip"
    config.write_text('allow_lost_gpu_data = "yes"\n')
    assert main(["check", str(path), *gate]) == 2
    err = capsys.readouterr().err
    assert "allow_lost_gpu_data must be true or false" in err and len(err.splitlines()) == 1


def test_check_of_old_nsys_without_kernels_names_the_nsys(capsys, tmp_path, monkeypatch):
    """nsys 2023.4 on CUDA 13, few launches left to show the kernels arrived (hand-built
    from a real export): the gate line names the nsys and the CUDA."""
    monkeypatch.chdir(tmp_path)
    path = derived(tmp_path, "old_nsys_lost", [
        "UPDATE META_DATA_EXPORT SET value = '2023.4.4.54' "
        "WHERE name = 'EXPORT_PRODUCT_VERSION'",
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > 1",
        "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN (SELECT id FROM StringIds "
        "WHERE value LIKE 'cuLaunchKernel%') AND rowid % 10 != 0"])
    assert load(path).info.gpu_data_lost
    code, doc, _ = check_json(capsys, path, "--max", "findings.count=100000", "--no-config")
    assert code == 1
    message = doc["reports"][0]["gates"][0]["message"]
    assert "written by nsys 2023.4.4.54, older than the CUDA 13.0 it traced" in message


def test_check_of_complete_reports_has_no_data_gate(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, doc, _ = check_json(capsys, report_path("moe-experts-bad"),
                              "--max", "findings.count=100000", "--no-config")
    assert code == 0
    assert [g["kind"] for g in doc["reports"][0]["gates"]] == ["max"]
