"""The needs_nsys / needs_chromium markers of conftest.py: where the tool is missing a test
skips saying how to install it, and under GPUGAP_REQUIRE_TOOLS=1 (CI) it fails instead.
Checked on a tiny test file in a pytest of its own, with both tools pointed at nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = '''
import pytest


@pytest.mark.needs_nsys
def test_profiles_something():
    pass


@pytest.mark.needs_chromium
def test_draws_something():
    pass
'''


def run_tiny_suite(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_tiny.py").write_text(TINY)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != "GPUGAP_REQUIRE_TOOLS"}
    env.update(GPUGAP_NSYS=str(tmp_path / "no-nsys"), GPUGAP_CHROMIUM=str(tmp_path / "none"),
               PYTHONPATH=str(REPO))
    if require is not None:
        env["GPUGAP_REQUIRE_TOOLS"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest",
                           "-c", str(tmp_path / "pytest.ini"), "-p", "no:cacheprovider",
                           "-rsE", "test_tiny.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("require", [None, "0"])
def test_missing_tools_skip_with_the_fix(tmp_path, require):
    proc = run_tiny_suite(tmp_path, require)
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 skipped" in out
    assert ("nsys not found: run bash .ci/install-test-deps.sh as root (Debian's nsys 2023.4 "
            "into /opt/gpugap-nsys), or point GPUGAP_NSYS at an nsys") in out
    assert "chromium not found: install it (apt-get install chromium)" in out
    assert "(gpugap: nsys given by $GPUGAP_NSYS is not an executable file" in out


@pytest.mark.slow
def test_missing_tools_fail_when_required(tmp_path):
    proc = run_tiny_suite(tmp_path, "1")
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 errors" in out and "skipped" not in out
    # Each test's own error section says why it failed. Counted per section, not over the
    # whole output: on CI (CI=true) pytest prints the short summary untruncated, repeating it.
    sections = proc.stdout.split("ERROR at setup of ")[1:]
    assert len(sections) == 2
    assert all("GPUGAP_REQUIRE_TOOLS=1 makes every tool mandatory" in " ".join(s.split())
               for s in sections)
    assert "ERROR test_tiny.py::test_profiles_something - Failed: nsys not found" in out
    assert "ERROR test_tiny.py::test_draws_something - Failed: chromium not found" in out
