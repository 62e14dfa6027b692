"""Bad input: one line naming the problem and the fix, the documented exit code, no
traceback, and the input byte-identical afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from gpugap.cli import main
from gpugap.errors import EXIT_MEMORY, EXIT_NO_CUDA, EXIT_NSYS, EXIT_USAGE
from gpugap.report import nsys as nsys_mod
from tests.conftest import DATA, report_path

CPU_ONLY = DATA / "cpu-only"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["analyze", *args])
    out, err = capsys.readouterr()
    return code, out, err


def fingerprint(path: Path) -> tuple[str, float] | None:
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime


def assert_one_line(err: str, *needles: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("gpugap: error: ")
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def no_nsys(monkeypatch, tmp_path):
    """An environment where no nsys can be found anywhere."""
    monkeypatch.delenv("GPUGAP_NSYS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(nsys_mod, "INSTALL_GLOBS", ())


@pytest.fixture
def cache(monkeypatch, tmp_path):
    directory = tmp_path / "cache"
    monkeypatch.setenv("GPUGAP_CACHE_DIR", str(directory))
    return directory


def test_missing_path(capsys, tmp_path):
    code, out, err = run(capsys, str(tmp_path / "nope.sqlite"))
    assert code == EXIT_USAGE and out == ""
    assert_one_line(err, "no such file", "check the path")


def test_directory(capsys, tmp_path):
    code, _, err = run(capsys, str(tmp_path))
    assert code == EXIT_USAGE
    assert_one_line(err, "is a directory", "pass a .nsys-rep or .sqlite")


def test_empty_file(capsys, tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    code, _, err = run(capsys, str(empty))
    assert code == EXIT_USAGE
    assert_one_line(err, "is empty", "nsys export --type sqlite")
    assert empty.stat().st_size == 0


@pytest.mark.parametrize("suffix", [".sqlite", ".nsys-rep", ".txt"])
def test_not_a_report(capsys, tmp_path, suffix):
    text = tmp_path / f"notes{suffix}"
    text.write_text("this is not a profile\n")
    before = fingerprint(text)
    code, _, err = run(capsys, str(text))
    assert code == EXIT_USAGE
    assert_one_line(err, "neither an nsys report", "nsys export --type sqlite")
    assert fingerprint(text) == before


def test_sqlite_that_is_not_an_nsys_export(capsys, tmp_path):
    # Hand-built: no real run produces an SQLite file without nsys's tables.
    db = tmp_path / "handbuilt_not_nsys.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
        conn.execute("INSERT INTO people VALUES ('ada')")
    before = fingerprint(db)
    code, _, err = run(capsys, str(db))
    assert code == EXIT_USAGE
    assert_one_line(err, "not an nsys export", "nsys export --type sqlite")
    assert fingerprint(db) == before


def test_nvprof_database_is_named(capsys, tmp_path):
    # Hand-built: the shape of nvprof's database (its CUPTI tables carry _id_).
    db = tmp_path / "handbuilt_nvprof.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (_id_ INTEGER, start INTEGER)")
    code, _, err = run(capsys, str(db))
    assert code == EXIT_USAGE
    assert_one_line(err, "nvprof database", "profile with nsys")


def test_no_cuda_activity_is_exit_4_with_ranges_in_json(capsys):
    report = CPU_ONLY / "cpu-only-nvtx.sqlite"
    before = fingerprint(report)
    code, out, err = run(capsys, str(report), "--json")
    assert code == EXIT_NO_CUDA
    assert_one_line(err, "no CUDA activity", "-t cuda")
    doc = json.loads(out)
    assert doc["status"] == "no-cuda-activity" and doc["metrics"] is None
    assert doc["nsys_version"] == "2023.4.4.54"
    assert [r["name"] for r in doc["ranges"]][:2] == ["outer_step", "inner N"]
    assert fingerprint(report) == before


def test_truncated_report(capsys, tmp_path):
    real = report_path("default-stream-good")
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(real.read_bytes()[: real.stat().st_size // 2])
    before = fingerprint(cut)
    code, _, err = run(capsys, str(cut))
    assert code == EXIT_USAGE
    assert_one_line(err, "truncated", "copy or export the report again")
    assert fingerprint(cut) == before


def test_corrupt_report(capsys, tmp_path):
    real = report_path("default-stream-good")
    data = bytearray(real.read_bytes())
    # Scribble over everything after the first page (the schema survives, the data not).
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xa5" * (len(data) - page)
    bad = tmp_path / "scribbled.sqlite"
    bad.write_bytes(bytes(data))
    before = fingerprint(bad)
    code, _, err = run(capsys, str(bad))
    assert code == EXIT_USAGE
    assert_one_line(err, "corrupt", "copy or export the report again")
    assert fingerprint(bad) == before


def test_nsys_rep_without_nsys(capsys, tmp_path, no_nsys, cache):
    rep = tmp_path / "r.nsys-rep"
    shutil.copy(report_path("default-stream-bad").with_suffix(".nsys-rep"), rep)
    before = fingerprint(rep)
    code, _, err = run(capsys, str(rep))
    assert code == EXIT_NSYS
    assert_one_line(err, "nsys", "not found", "--nsys PATH")
    assert fingerprint(rep) == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.nsys-rep"]


def test_explicit_nsys_that_is_not_executable(capsys, tmp_path, cache):
    rep = tmp_path / "r.nsys-rep"
    shutil.copy(report_path("default-stream-bad").with_suffix(".nsys-rep"), rep)
    code, _, err = run(capsys, str(rep), "--nsys", str(tmp_path / "missing-nsys"))
    assert code == EXIT_NSYS
    assert_one_line(err, "--nsys is not an executable file")


@pytest.mark.needs_nsys
def test_nsys_rep_newer_than_nsys(capsys, tmp_path, cache):
    """A report written by nsys 2025.3 and the oldest nsys gpugap supports, Debian's 2023.4
    (installed by .ci/install-nsys.sh), which cannot read it."""
    tool = nsys_mod.find_nsys()
    assert nsys_mod.version_tuple(tool.version) < (2025, 3), tool
    rep = tmp_path / "from-2025.nsys-rep"
    shutil.copy(report_path("default-stream-bad").with_suffix(".nsys-rep"), rep)
    before = fingerprint(rep)
    code, _, err = run(capsys, str(rep))
    assert code == EXIT_NSYS
    assert_one_line(err, "newer Nsight Systems", tool.version, "--nsys")
    assert fingerprint(rep) == before
    assert [p.name for p in tmp_path.iterdir() if p.name != "cache"] == [rep.name]


@pytest.mark.needs_nsys
def test_nsys_rep_is_exported_once_into_the_cache(capsys, tmp_path, cache, monkeypatch):
    rep_dir = tmp_path / "reports"
    rep_dir.mkdir()
    rep = rep_dir / "cpu.nsys-rep"
    shutil.copy(CPU_ONLY / "cpu-only-nvtx.nsys-rep", rep)
    before = fingerprint(rep)
    code, out, err = run(capsys, str(rep), "--json")
    assert code == EXIT_NO_CUDA, err
    assert json.loads(out)["ranges"][0]["name"] == "outer_step"
    # Nothing written beside the input; the export went to the cache.
    assert [p.name for p in rep_dir.iterdir()] == ["cpu.nsys-rep"]
    exports = list(cache.glob("*.sqlite"))
    assert len(exports) == 1 and fingerprint(rep) == before
    stamp = exports[0].stat().st_mtime_ns
    # The second time needs no nsys at all: the fresh cache entry is reused.
    monkeypatch.setenv("GPUGAP_NSYS", str(tmp_path / "no-such-nsys"))
    code, out, _ = run(capsys, str(rep), "--json")
    assert code == EXIT_NO_CUDA and json.loads(out)["ranges"]
    assert exports[0].stat().st_mtime_ns == stamp


def test_bad_usage_is_exit_2(capsys):
    code, _, err = run(capsys, str(report_path("h2d-copy-bad")), "--rule", "no-such-rule")
    assert code == EXIT_USAGE
    assert_one_line(err, "unknown rule no-such-rule", "blocking-memcpy")
    code, _, err = run(capsys, str(report_path("h2d-copy-bad")), "--range", "nope")
    assert code == EXIT_USAGE
    assert_one_line(err, "no NVTX range named 'nope'", "measured")
    code, _, err = run(capsys, str(report_path("h2d-copy-bad")), "--set", "launch-gap.bogus=1")
    assert code == EXIT_USAGE
    assert_one_line(err, "has no threshold bogus")


def test_read_only_open_leaves_no_side_files(capsys, tmp_path):
    report = tmp_path / "r.sqlite"
    shutil.copy(report_path("h2d-copy-good"), report)
    os.chmod(report, 0o444)
    before = fingerprint(report)
    code, _, _ = run(capsys, str(report), "--json")
    assert code == 0
    assert fingerprint(report) == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.sqlite"]   # no -journal, -wal, -shm


def test_page_found_unreadable_when_the_fast_reader_finishes(capsys, tmp_path, monkeypatch):
    """A zeroed page that ADBC before 1.13 reports only when the statement is finalized
    (fuzz case 89; the lowest versions CI installs are 1.7): the rows it read are dropped
    and the sqlite3 reader names the damage. Hand-built from a real export."""
    from gpugap.report import reader

    path = tmp_path / "handbuilt_zeroed_page.sqlite"
    data = bytearray(report_path("grid-sweep-bad").read_bytes())
    page = int.from_bytes(data[16:18], "big")
    k = 61                                          # the page fuzz case 89 zeroed
    data[k * page:(k + 1) * page] = bytes(page)
    path.write_bytes(bytes(data))
    monkeypatch.setattr(reader, "FAST_MIN_ROWS", 0)  # every table through ADBC
    code, out, err = run(capsys, str(path))
    assert code == EXIT_USAGE, out
    assert_one_line(err, "malformed")


def test_report_at_a_path_longer_than_sqlite_opens(capsys, tmp_path, monkeypatch):
    """SQLite gives up on full paths of 512 bytes or more (symlinks resolved): such a
    report is read through a hard link in the temporary directory, which goes after."""
    deep = tmp_path.joinpath(*["d" * 120] * 5)
    deep.mkdir(parents=True)
    report = deep / "r.sqlite"
    shutil.copy(report_path("h2d-copy-good"), report)
    links = tmp_path / "tmp"
    links.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(links))
    before = fingerprint(report)
    code, out, err = run(capsys, str(report), "--json")
    assert len(os.fsencode(report)) > 600
    assert code == 0, err
    assert json.loads(out)["verdict"]
    assert fingerprint(report) == before
    assert list(links.iterdir()) == []        # the link is removed on close


def test_wal_mode_report_with_data_still_in_its_log(capsys, tmp_path):
    """A real export copied into a WAL-mode database whose pages are still in the -wal
    (a writer holds it open, no checkpoint): named as such, not "empty", and untouched."""
    report = tmp_path / "r.sqlite"
    source = sqlite3.connect(report_path("h2d-copy-good"))
    writer = sqlite3.connect(report)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        source.backup(writer)
        writer.commit()
        before = fingerprint(report)
        code, out, err = run(capsys, str(report))
        assert code == EXIT_USAGE and out == ""
        assert_one_line(err, "WAL mode", "r.sqlite-wal", "checkpoint")
        assert fingerprint(report) == before
    finally:
        writer.close()
        source.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_says_so_and_leaves_no_output(capsys, tmp_path, monkeypatch, signum):
    """Ctrl-C or SIGTERM while the report loads (held there, so the signal lands mid-
    run): one line, exit 128 + the signal, no output file, the handlers given back."""
    import gpugap.cli.root as root

    def slow_load(*args, **kwargs):
        threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
        time.sleep(30)
    monkeypatch.setattr(root, "load_trace", slow_load)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    html = tmp_path / "t.html"
    code, out, err = run(capsys, str(report_path("h2d-copy-good")), "--html", str(html))
    assert code == 128 + signum
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [f"gpugap: interrupted ({signal.Signals(signum).name}); not written: {html}"]
    assert list(tmp_path.iterdir()) == []
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


_INTERRUPT_WHILE_IMPORTING = """
import os, signal, sys

class SignalOnTyper:                    # the signal lands as the command's modules import
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            os.kill(os.getpid(), signal.{signal})
        return None

sys.meta_path.insert(0, SignalOnTyper())
from gpugap.cli import main             # what the gpugap script does first
sys.exit(main(["analyze", sys.argv[1], "--json"]))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_while_the_command_imports(tmp_path, signum):
    """The first half second of `gpugap` imports typer, rich and the commands; Ctrl-C
    there was a KeyboardInterrupt traceback and SIGTERM a silent death (found by
    tests/test_fuzz.py's signal fuzzer). Now the same line and exit code as later."""
    import subprocess
    import sys

    name = signal.Signals(signum).name
    proc = subprocess.run([sys.executable, "-c", _INTERRUPT_WHILE_IMPORTING.format(
        signal=name), str(report_path("h2d-copy-good"))], capture_output=True, text=True,
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1])),
        timeout=60)
    assert (proc.returncode, proc.stdout) == (128 + signum, ""), proc.stderr
    assert proc.stderr.splitlines() == [f"gpugap: interrupted ({name})"]


def test_out_of_memory_names_the_stage(capsys, monkeypatch):
    """MemoryError (held here inside the analysis; a real one needs a report of millions
    of kernels under a memory limit, shown in docs/analyze.md): one line naming the stage
    and what to do, exit 8."""
    import gpugap.analysis

    def no_memory(*args, **kwargs):
        raise MemoryError
    monkeypatch.setattr(gpugap.analysis, "analyze", no_memory)
    code, out, err = run(capsys, str(report_path("h2d-copy-good")), "--json")
    assert code == EXIT_MEMORY and out == ""
    assert_one_line(err, "out of memory while analyzing", "--range")


@pytest.mark.parametrize("length", [300, 5000])
@pytest.mark.parametrize("command", ["analyze", "diff", "check", "baseline"])
def test_names_the_system_refuses_are_one_line(capsys, tmp_path, command, length):
    """A file name longer than the filesystem allows (300 and 5,000 characters): one
    line, reason first, the path's middle cut so the fix is never lost."""
    report = str(tmp_path / ("x" * length)) + ".sqlite"
    argv = {"analyze": ["analyze", report], "diff": ["diff", report, report],
            "check": ["check", report, "--min", "gpu_busy_pct=1"],
            "baseline": ["baseline", "save", report, "--output",
                         str(tmp_path / "b.json")]}[command]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and out == ""
    assert_one_line(err, "File name too long", "check the path")
    assert len(err) < 600
