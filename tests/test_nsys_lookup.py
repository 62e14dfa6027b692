"""Finding nsys: --nsys, then $GPUGAP_NSYS, then PATH, then the usual install dirs; and
what gpugap says about a capture whose GPU work the nsys could not see."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from gpugap.analysis import no_cuda_reason
from gpugap.cli import main
from gpugap.errors import EXIT_NO_CUDA
from gpugap.report import load
from gpugap.report import nsys as nsys_mod
from tests.conftest import report_path


def real_nsys() -> Path:
    return Path(nsys_mod.find_nsys().path)


@pytest.mark.needs_nsys
def test_lookup_order(monkeypatch, tmp_path):
    real = real_nsys()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nsys").symlink_to(real)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("GPUGAP_NSYS", raising=False)
    assert nsys_mod.find_nsys().path == str(bin_dir / "nsys")              # PATH
    monkeypatch.setenv("GPUGAP_NSYS", str(real))
    assert nsys_mod.find_nsys().path == str(real)                          # env beats PATH
    assert nsys_mod.find_nsys(str(bin_dir / "nsys")).path == str(bin_dir / "nsys")  # --nsys
    monkeypatch.delenv("GPUGAP_NSYS")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(nsys_mod, "INSTALL_GLOBS", (str(real.parent.parent / "*" / "nsys"),))
    found = nsys_mod.find_nsys()
    assert found.path == str(real) and found.version.startswith("20")     # install dirs


def test_version_parsing():
    assert nsys_mod.version_tuple("2023.4.4.54-234433681190v0") == (2023, 4, 4, 54)
    assert nsys_mod.version_tuple("2025.3.1.0") > nsys_mod.version_tuple("2023.4.4.54")


def test_capture_without_gpu_activity_from_an_old_nsys(tmp_path, capsys):
    """What Debian's nsys 2023.4 records of a CUDA 13 program: the API calls, no GPU
    activity. Hand-built from a real export by dropping the activity tables."""
    path = tmp_path / "handbuilt_api_only.sqlite"
    shutil.copy(report_path("h2d-copy-bad"), path)
    with sqlite3.connect(path) as conn:
        for table in ("KERNEL", "MEMCPY", "MEMSET"):
            conn.execute(f"DROP TABLE IF EXISTS CUPTI_ACTIVITY_KIND_{table}")
    reason = no_cuda_reason(load(path))
    assert "CUDA launch/copy calls but no GPU activity" in reason
    assert "nsys 2025.3.2.0 could not trace" in reason
    assert main(["analyze", str(path)]) == EXIT_NO_CUDA
    assert "newer Nsight Systems" in capsys.readouterr().err
