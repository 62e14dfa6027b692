"""What gpugap ships: the built wheel (gpugap and gpugap.scenarios, the license, no generic
top-level package) and the lowest dependency versions CI installs (.ci/min-versions.txt,
generated from pyproject.toml's floors)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def min_versions_module():
    spec = importlib.util.spec_from_file_location("min_versions", REPO / ".ci" / "min_versions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_min_versions_file_is_generated_from_pyproject():
    committed = (REPO / ".ci" / "min-versions.txt").read_text()
    assert committed == min_versions_module().constraints(), (
        "pyproject.toml's floors changed: python .ci/min_versions.py > .ci/min-versions.txt")
    pins = dict(line.split("==", 1) for line in committed.splitlines()
                if line and not line.startswith("#"))
    # The floors the suite was shown to need (see the comments in pyproject.toml).
    assert pins["pandas"] == "2.1" and pins["typer"] == "0.15.4"
    assert pins["adbc-driver-manager"] == "1.7" and pins["setuptools"] == "77.0.1"
    assert "torch" not in pins and "cuda-core" not in pins      # [gpu]: CI has no GPU


@pytest.mark.parametrize(("requirement", "problem"), [
    ("numpy", "needs a floor"),
    ("numpy<3", "needs a floor"),
    ("numpy>=1.23.2,<3", "needs a floor"),
])
def test_every_requirement_needs_a_floor(tmp_path, requirement, problem):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[build-system]\nrequires = ["setuptools>=77.0.1"]\n'
                         f'[project]\nname = "x"\ndependencies = ["{requirement}"]\n')
    with pytest.raises(SystemExit, match=problem):
        min_versions_module().constraints(pyproject)


def test_a_marker_and_an_extra_survive_in_the_constraints(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[build-system]\nrequires = ["setuptools>=77.0.1"]\n[project]\nname = "x"\n'
        "dependencies = [\"tomli>=1.1; python_version < '3.11'\", \"Foo_Bar[all]>=2\"]\n"
        '[project.optional-dependencies]\ngpu = ["torch>=2.4"]\n')
    assert min_versions_module().constraints(pyproject).splitlines()[1:] == [
        "foo-bar==2", "setuptools==77.0.1", "tomli==1.1; python_version < '3.11'"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from a copy of the sources (a build in the checkout would leave
    build/ and *.egg-info there)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    for folder in ("gpugap", "scenarios"):
        shutil.copytree(REPO / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "-w", str(tmp / "dist"), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (built,) = (tmp / "dist").glob("gpugap-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_gpugap_and_its_scenarios_and_nothing_else(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert {n.split("/")[0] for n in names} == {"gpugap", dist_info}   # no top-level scenarios
    sources = {f"gpugap/{p.relative_to(REPO / 'gpugap').as_posix()}"
               for p in (REPO / "gpugap").rglob("*") if p.suffix in (".py", ".js", ".css")}
    sources |= {f"gpugap/scenarios/{p.name}" for p in (REPO / "scenarios").glob("*.py")}
    assert "gpugap/render/assets/timeline.js" in sources
    assert "gpugap/scenarios/h2d_copy.py" in sources
    assert sorted(sources - names) == []          # a new subpackage unlisted in pyproject
    assert f"{dist_info}/licenses/LICENSE" in names
    assert "gpugap/py.typed" in names             # PEP 561: type checkers read gpugap's types


@pytest.mark.slow
def test_wheel_declares_the_apache_license(wheel):
    archive = zipfile.ZipFile(wheel)
    dist_info = next(n.split("/")[0] for n in archive.namelist() if n.endswith("/METADATA"))
    metadata = archive.read(f"{dist_info}/METADATA").decode().splitlines()
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata
    shipped = archive.read(f"{dist_info}/licenses/LICENSE").decode()
    assert shipped == (REPO / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in shipped
    assert "END OF TERMS AND CONDITIONS" in shipped


@pytest.mark.slow
def test_installed_wheel_runs_its_scenarios_and_lists_them(wheel, tmp_path):
    """The wheel's contents on sys.path, as an install puts them (the checkout's editable
    install behind them, for the dependencies): gpugap.scenarios imports from there, a
    scenario runs with python -m, and there is no generic 'scenarios' module."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}

    def python(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    where = python("-c", "import gpugap.scenarios as s; print(s.__file__)")
    assert where.stdout.strip() == str(site / "gpugap" / "scenarios" / "__init__.py")
    run = python("-m", "gpugap.scenarios.h2d_copy", "--help")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: python -m gpugap.scenarios.h2d_copy ")
    listing = python("-c", "from gpugap.cli import main; raise SystemExit(main(["
                           "'scenarios', '--json']))")
    assert listing.returncode == 0, listing.stderr
    assert '"module": "prefetch_pipeline"' in listing.stdout
    missing = python("-c", "import scenarios")
    assert missing.returncode == 1 and "No module named 'scenarios'" in missing.stderr
