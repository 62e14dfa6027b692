"""Reports named the same way by every view, whatever the path of the checkout (issue
40): relative to the working directory when under it, else by the shortest end of the
path that tells it from the command's other reports; never broken inside a name. The
suite itself runs from a checkout at a path of 80+ characters in CI (.ci/run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpugap.text import PATH_CUT, fit_path, shown_path, shown_paths

ROOT = Path(__file__).parent.parent
SCENARIOS = ROOT / "reports"
# A directory name long enough that any path under it is over 80 characters.
DEEP = "a-checkout-at-a-path-longer-than-eighty-characters/as-clones-often-are"


def test_a_path_under_the_working_directory_is_relative(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert shown_paths([tmp_path / "runs" / "a.sqlite", "b.sqlite"]) == \
        ["runs/a.sqlite", "b.sqlite"]
    assert shown_path(Path("runs") / ".." / "runs" / "a.sqlite") == "runs/a.sqlite"


def test_a_path_elsewhere_is_its_shortest_distinct_end(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    a = "/data/h2d-copy/h200-sample/bad.sqlite"
    b = "/data/default-stream/h200-sample/bad.sqlite"
    assert shown_paths([a, b]) == ["…/h2d-copy/h200-sample/bad.sqlite",
                                   "…/default-stream/h200-sample/bad.sqlite"]
    assert shown_paths([a]) == ["…/bad.sqlite"]
    # One path ends another: the shorter is named whole.
    assert shown_paths(["/x/bad.sqlite", "/bad.sqlite"]) == ["/x/bad.sqlite", "/bad.sqlite"]
    assert shown_paths(["/w/x/bad.sqlite", "/bad.sqlite"]) == \
        ["…/x/bad.sqlite", "/bad.sqlite"]
    # The same report twice: the same name.
    assert shown_paths([a, a]) == ["…/bad.sqlite", "…/bad.sqlite"]


def test_fitting_a_path_drops_whole_leading_names():
    shown = "tests/data/captures/ranks/ddp-ranks-balanced.rank0.sqlite"
    assert fit_path(shown, 80) == shown
    assert fit_path(shown, 40) == "…/ranks/ddp-ranks-balanced.rank0.sqlite"
    assert fit_path(shown, 33) == "…/ddp-ranks-balanced.rank0.sqlite"
    # Narrower than the file's name: the name stays whole.
    assert fit_path(shown, 10) == "…/ddp-ranks-balanced.rank0.sqlite"


def _deep_copies(tmp_path: Path) -> Path:
    """The seed reports h2d-copy bad and good, at a path of 80+ characters."""
    deep = tmp_path / DEEP / "reports"
    for variant in ("bad", "good"):
        target = deep / "h2d-copy" / "h200-sample" / f"{variant}.sqlite"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SCENARIOS / "h2d-copy" / "h200-sample" / f"{variant}.sqlite", target)
    assert len(str(target)) > 80
    return deep


def _run(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "gpugap", *argv, "--no-config"],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


COMMANDS = [
    ("diff", "h2d-copy/h200-sample/bad.sqlite", "h2d-copy/h200-sample/good.sqlite",
     "--range", "measured"),
    ("check", "h2d-copy/h200-sample/bad.sqlite", "h2d-copy/h200-sample/good.sqlite",
     "--range", "measured", "--min", "copy_compute_overlap_pct=50"),
    ("analyze", "h2d-copy/h200-sample/bad.sqlite", "--range", "measured"),
]


@pytest.mark.slow
@pytest.mark.parametrize("argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_output_is_the_same_from_a_deep_path(tmp_path, argv):
    """The same command on the same reports prints the same, line for line, from the
    checkout and from a copy of them 80+ characters deep."""
    deep = _deep_copies(tmp_path)
    here, there = _run(SCENARIOS, *argv), _run(deep, *argv)
    assert (here.returncode, here.stdout) == (there.returncode, there.stdout)


@pytest.mark.slow
def test_reports_elsewhere_are_named_whole_at_80_columns(tmp_path):
    """Run from elsewhere on reports 80+ characters deep: each named by its end (a
    name never cut), every line within 80 columns and without trailing spaces."""
    deep = _deep_copies(tmp_path)
    bad, good = (str(deep / "h2d-copy" / "h200-sample" / f"{v}.sqlite")
                 for v in ("bad", "good"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for argv in (("diff", bad, good), ("check", bad, good, "--range", "measured",
                                       "--min", "copy_compute_overlap_pct=50")):
        done = _run(elsewhere, *argv)
        lines = done.stdout.splitlines()
        assert max(map(len, lines)) <= 80 and not any(ln.endswith(" ") for ln in lines)
        assert f"{PATH_CUT}bad.sqlite" in done.stdout and DEEP not in done.stdout
        # Every path printed is whole: no piece of one on a line of its own.
        words = done.stdout.split()
        assert all(re.fullmatch(r"…/(bad|good)\.sqlite[,:)]?", w) for w in words
                   if "sqlite" in w or "/" in w and w != "copy/comp"), words
    assert "gpugap diff …/bad.sqlite -> …/good.sqlite" in _run(elsewhere, "diff", bad,
                                                               good).stdout


def test_ci_runs_the_readme_command_from_a_deep_checkout():
    """.ci/run runs README's test command verbatim, in a copy of the checkout at a path
    of 80+ characters; the suite on the lowest versions runs from the checkout itself."""
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"```bash\n(python3 -m venv .venv && .*bash "
                        r"\.ci/install-test-deps\.sh.*)\n```", readme)[1]
    run = (ROOT / ".ci" / "run").read_text()
    deep = re.search(r'^deep="\$scratch/([^"]+)"$', run, re.M)[1]
    # mktemp's directory under /tmp is 18 characters at least.
    assert len("/tmp/gpugap-ci.XXXXXX/" + deep) >= 80
    assert f'( cd "$deep" && {command} )' in run
