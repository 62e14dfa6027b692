"""The export cache of .nsys-rep files: keyed by content (not mtime), in a private
directory only, entries trusted only when they are the user's own regular files, exports
written into a fresh private temporary directory and renamed into place; the export
beside a report is never read in its place (issue 13).

The reports here are stand-ins: the .nsys-rep magic and a marker, "exported" by a fake
nsys that copies a real committed export chosen by the marker (capture A: the CPU-only
report, exit 4; capture B: h2d-copy-good, exit 0), and logs each call. The real nsys
path is covered by tests/test_bad_input.py (test_nsys_rep_is_exported_once_into_the_cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from gpugap.cli import main
from gpugap.errors import EXIT_NO_CUDA, EXIT_USAGE
from gpugap.report import content_key
from gpugap.report.database import NSYS_REP_MAGIC
from tests.conftest import DATA, report_path

CAPTURE_A = DATA / "cpu-only" / "cpu-only-nvtx.sqlite"     # no CUDA: exit 4
CAPTURE_B = report_path("h2d-copy-good")                   # exit 0


@pytest.fixture
def fake_nsys(tmp_path) -> tuple[Path, Path]:
    """(nsys script, its call log)."""
    log = tmp_path / "nsys-calls.log"
    script = tmp_path / "bin" / "nsys"
    script.parent.mkdir()
    script.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "NVIDIA Nsight Systems version 2025.3.1.0-1"; exit 0; fi
echo "$@" >> "{log}"
out=""; prev=""; for a in "$@"; do [ "$prev" = "--output" ] && out="$a"; prev="$a"; done
rep="$a"
if grep -q MUTATE "$rep"; then echo more >> "$rep"; fi
if grep -q CAPTURE-B "$rep"; then cp "{CAPTURE_B}" "$out"; else cp "{CAPTURE_A}" "$out"; fi
""")
    script.chmod(0o755)
    return script, log


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("GPUGAP_CACHE_DIR", str(directory))
    return directory


def capture(path: Path, marker: str) -> Path:
    path.write_bytes(NSYS_REP_MAGIC + b"\0" * 4 + marker.encode() + b"\n")
    return path


def exports(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def analyze(capsys, report: Path, nsys: Path, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["analyze", str(report), "--json", "--nsys", str(nsys), "--no-config",
                 *extra])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *needles: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpugap: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_replaced_report_with_an_older_mtime_is_exported_again(capsys, tmp_path, cache,
                                                              fake_nsys):
    nsys, log = fake_nsys
    rep = capture(tmp_path / "run.nsys-rep", "CAPTURE-A")
    code, out, _ = analyze(capsys, rep, nsys)
    assert code == EXIT_NO_CUDA and json.loads(out)["status"] == "no-cuda-activity"
    assert len(exports(log)) == 1

    # Another capture copied over it, keeping its (older) mtime: cp -p, rsync -t.
    capture(rep, "CAPTURE-B")
    os.utime(rep, (1_000_000, 1_000_000))
    code, out, err = analyze(capsys, rep, nsys)
    assert code == 0, err
    assert json.loads(out)["status"] == "ok" and json.loads(out)["metrics"]["kernels"] > 0
    assert len(exports(log)) == 2

    # The first capture back: its export is still filed under its content.
    capture(rep, "CAPTURE-A")
    assert analyze(capsys, rep, nsys)[0] == EXIT_NO_CUDA
    assert len(exports(log)) == 2
    entries = sorted(p.name for p in cache.iterdir())
    assert entries == sorted(f"{content_key(tmp_path / name)}.sqlite" for name in
                             [capture(tmp_path / "a", "CAPTURE-A").name,
                              capture(tmp_path / "b", "CAPTURE-B").name])


def test_same_bytes_anywhere_reuse_one_export(capsys, tmp_path, cache, fake_nsys):
    nsys, log = fake_nsys
    first = capture(tmp_path / "first.nsys-rep", "CAPTURE-B")
    moved = tmp_path / "elsewhere" / "renamed.nsys-rep"
    moved.parent.mkdir()
    shutil.copy(first, moved)
    assert analyze(capsys, first, nsys)[0] == 0
    assert analyze(capsys, moved, nsys)[0] == 0
    assert len(exports(log)) == 1


def test_cache_is_created_private(capsys, tmp_path, cache, fake_nsys):
    nsys, _ = fake_nsys
    assert analyze(capsys, capture(tmp_path / "r.nsys-rep", "CAPTURE-B"), nsys)[0] == 0
    assert stat.S_IMODE(cache.stat().st_mode) & 0o077 == 0
    (entry,) = cache.iterdir()                       # no partial or temporary leftovers
    assert entry.is_file() and not entry.is_symlink()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777, 0o722])
def test_shared_cache_directory_is_refused(capsys, tmp_path, cache, fake_nsys, mode):
    nsys, log = fake_nsys
    cache.mkdir()
    cache.chmod(mode)
    rep = capture(tmp_path / "r.nsys-rep", "CAPTURE-A")
    before = digest(rep)
    code, out, err = analyze(capsys, rep, nsys)
    assert code == EXIT_USAGE and out == ""
    one_line_error(err, str(cache), "writable by group or others", "GPUGAP_CACHE_DIR")
    assert exports(log) == [] and list(cache.iterdir()) == []
    assert digest(rep) == before


def test_cache_directory_of_another_user_is_refused(capsys, tmp_path, cache, fake_nsys,
                                                   monkeypatch):
    nsys, log = fake_nsys
    cache.mkdir(mode=0o700)
    owner = cache.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)    # we are someone else now
    code, _, err = analyze(capsys, capture(tmp_path / "r.nsys-rep", "CAPTURE-A"), nsys)
    assert code == EXIT_USAGE
    one_line_error(err, "belongs to another user", "GPUGAP_CACHE_DIR")
    assert exports(log) == []


def test_cache_path_that_is_a_file_is_refused(capsys, tmp_path, cache, fake_nsys):
    nsys, _ = fake_nsys
    cache.write_text("not a directory")
    code, _, err = analyze(capsys, capture(tmp_path / "r.nsys-rep", "CAPTURE-A"), nsys)
    assert code == EXIT_USAGE
    one_line_error(err, str(cache), "GPUGAP_CACHE_DIR")


def test_planted_symlink_entry_is_not_trusted(capsys, tmp_path, cache, fake_nsys):
    """A symlink under the entry's name (pointing at another report's export) is not
    read: the report is exported and the link replaced, its target untouched."""
    nsys, log = fake_nsys
    rep = capture(tmp_path / "r.nsys-rep", "CAPTURE-A")
    planted = tmp_path / "planted.sqlite"
    shutil.copy(CAPTURE_B, planted)
    before = digest(planted)
    cache.mkdir(mode=0o700)
    entry = cache / f"{content_key(rep)}.sqlite"
    entry.symlink_to(planted)
    code, out, _ = analyze(capsys, rep, nsys)
    assert code == EXIT_NO_CUDA and json.loads(out)["status"] == "no-cuda-activity"
    assert len(exports(log)) == 1
    assert not entry.is_symlink() and digest(entry) == digest(CAPTURE_A)
    assert digest(planted) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="planting a file owned by another user "
                                              "needs root")
def test_planted_entry_owned_by_someone_else_is_not_trusted(capsys, tmp_path, cache,
                                                           fake_nsys):
    nsys, log = fake_nsys
    rep = capture(tmp_path / "r.nsys-rep", "CAPTURE-A")
    cache.mkdir(mode=0o700)
    entry = cache / f"{content_key(rep)}.sqlite"
    shutil.copy(CAPTURE_B, entry)
    os.chown(entry, 65534, 65534)
    code, out, _ = analyze(capsys, rep, nsys)
    assert code == EXIT_NO_CUDA and json.loads(out)["status"] == "no-cuda-activity"
    assert len(exports(log)) == 1
    assert entry.stat().st_uid == os.geteuid() and digest(entry) == digest(CAPTURE_A)


def test_export_goes_through_a_fresh_private_directory(capsys, tmp_path, cache, fake_nsys):
    """Symlinks at the partial-file names gpugap used to write (predictable: name, key,
    pid) lead nowhere: nsys writes into a new directory with an unpredictable name."""
    nsys, log = fake_nsys
    rep = capture(tmp_path / "r.nsys-rep", "CAPTURE-B")
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    cache.mkdir(mode=0o700)
    for name in (f".r-{content_key(rep)}.sqlite.{os.getpid()}.partial.sqlite",
                 f".{content_key(rep)}.sqlite.{os.getpid()}.partial.sqlite"):
        (cache / name).symlink_to(victim)
    assert analyze(capsys, rep, nsys)[0] == 0
    assert victim.read_text() == "do not touch"
    (call,) = exports(log)
    output = Path(call.split("--output ")[1].split(" ")[0])
    assert output.parent.parent == cache and output.parent.name.startswith(".export-")
    assert not output.parent.exists()                # removed once renamed into place
    assert (cache / f"{content_key(rep)}.sqlite").is_file()


def test_report_changing_during_the_export_is_not_cached(capsys, tmp_path, cache,
                                                         fake_nsys):
    nsys, _ = fake_nsys
    rep = capture(tmp_path / "r.nsys-rep", "CAPTURE-B MUTATE")
    code, _, err = analyze(capsys, rep, nsys)
    assert code == EXIT_USAGE
    one_line_error(err, "changed while nsys exported it")
    assert list(cache.iterdir()) == []


def test_export_beside_the_report_is_not_read_in_its_place(capsys, tmp_path, cache,
                                                          fake_nsys):
    """REPORT.sqlite beside REPORT.nsys-rep, newer, from another capture: gpugap exports
    the .nsys-rep itself; the file beside it is left alone."""
    nsys, log = fake_nsys
    rep = capture(tmp_path / "run.nsys-rep", "CAPTURE-A")
    beside = tmp_path / "run.sqlite"
    shutil.copy(CAPTURE_B, beside)
    before = digest(beside)
    code, out, _ = analyze(capsys, rep, nsys)
    assert code == EXIT_NO_CUDA and json.loads(out)["status"] == "no-cuda-activity"
    assert len(exports(log)) == 1
    assert digest(beside) == before
    # Passed directly, the export is read as any .sqlite.
    assert analyze(capsys, beside, nsys)[0] == 0
