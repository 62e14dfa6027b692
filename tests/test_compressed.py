"""Compressed exports read directly (issue 40): the corpus's .sqlite.xz as committed,
.gz, .zst (with the zstandard module, else one line saying how); decompressed into a
private temporary directory, never beside the input, removed once the trace is gone."""

from __future__ import annotations

import gc
import gzip
import lzma
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpugap
from gpugap.cli import main
from gpugap.errors import EXIT_USAGE, ReportError
from gpugap.files import expand_reports
from tests.conftest import corpus_capture

ROOT = Path(__file__).parent.parent
CORPUS = ROOT / "tests" / "corpus" / "captures"
GEMM = ROOT / "tests" / "data" / "captures" / "gemm.sqlite"


def headline(report: Path | str) -> tuple[str | None, list[tuple[str, str, int]]]:
    a = gpugap.analyze(report)
    return (a.verdict.headline if a.verdict else None,
            [(f.rule, f.cause, f.cost_ns) for f in a.findings])


def test_the_corpus_xz_reads_as_its_export():
    """jax-jit-train.sqlite.xz as committed: the same analysis as the export inside it
    (its OS runtime calls too, which are read after loading)."""
    packed = CORPUS / "jax-jit-train.sqlite.xz"
    assert headline(packed) == headline(corpus_capture("jax-jit-train"))


def test_a_gzip_export_reads_as_the_plain_one(tmp_path):
    packed = tmp_path / "gemm.sqlite.gz"
    with open(GEMM, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert headline(packed) == headline(GEMM)


def test_zstd_reads_with_the_zstandard_module(tmp_path):
    import zstandard  # in the [test] extra: a missing module fails here

    packed = tmp_path / "gemm.sqlite.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(GEMM.read_bytes()))
    assert headline(packed) == headline(GEMM)


def test_zstd_without_the_module_says_how(tmp_path, monkeypatch, capsys):
    packed = tmp_path / "gemm.sqlite.zst"
    packed.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 64)
    monkeypatch.setitem(sys.modules, "zstandard", None)         # import fails
    assert main(["analyze", str(packed), "--no-config"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err == (
        f"gpugap: error: {packed} is zstd-compressed, and reading it needs the zstandard "
        f"module: pip install zstandard, or decompress it first (zstd -d {packed})\n")


def test_decompressed_in_the_temporary_directory_never_beside_the_input(tmp_path):
    """Run with TMPDIR of its own: the input's folder holds the input alone, during and
    after; the temporary folder is empty once gpugap is done."""
    inputs, scratch = tmp_path / "in", tmp_path / "tmp"
    inputs.mkdir()
    scratch.mkdir()
    packed = inputs / "gemm.sqlite.xz"
    with open(GEMM, "rb") as src, lzma.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "gpugap", "analyze", str(packed), "--json",
                           "--no-config"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert '"report": "' + str(packed) in done.stdout
    assert sorted(os.listdir(inputs)) == ["gemm.sqlite.xz"]
    assert os.listdir(scratch) == []


def test_the_copy_lives_as_long_as_the_trace(tmp_path):
    packed = tmp_path / "gemm.sqlite.gz"
    with open(GEMM, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace = gpugap.load(packed)
    copy = Path(trace.info.sqlite_path)
    assert copy.is_file() and copy.parent != tmp_path and copy.name == "gemm.sqlite"
    del trace
    gc.collect()
    assert not copy.parent.exists()


@pytest.mark.parametrize("damage", ["truncated", "not-an-export", "export-truncated"])
def test_a_damaged_archive_is_one_line(tmp_path, capsys, damage):
    """Named as given, never by its temporary copy."""
    packed = tmp_path / "gemm.sqlite.xz"
    if damage == "truncated":
        packed.write_bytes(lzma.compress(GEMM.read_bytes())[:5000])
        why = "is xz-compressed but cannot be decompressed"
    elif damage == "not-an-export":
        packed.write_bytes(lzma.compress(b"hello, world\n" * 100))
        why = "is xz-compressed, and what it holds is neither an nsys report"
    else:
        packed.write_bytes(lzma.compress(GEMM.read_bytes()[:300_000]))
        why = f"{packed} (decompressed) is truncated (300000 of"
    assert main(["analyze", str(packed), "--no-config"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and why in err, err
    assert "gpugap-decompressed" not in err
    with pytest.raises(ReportError, match=re.escape(why)):
        gpugap.load(packed)


def test_a_directory_reads_compressed_reports_once_each(tmp_path):
    """A compressed copy beside its plain file counts once (the plain one), as a
    .nsys-rep beside its .sqlite export does."""
    for name in ("a.sqlite", "a.sqlite.xz", "b.sqlite.gz", "c.nsys-rep", "c.sqlite.zst",
                 "notes.txt.gz", "d.xz"):
        (tmp_path / name).write_bytes(b"x")
    assert [p.name for p in expand_reports([tmp_path])] == ["a.sqlite", "b.sqlite.gz",
                                                            "c.sqlite.zst"]
