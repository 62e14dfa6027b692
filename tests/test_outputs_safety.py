"""Outputs never overwrite the input, never replace a file without --force, never follow a
symlink at the target, and are written whole (temporary file + rename). Every refusal is
one line on stderr, exit 2, with the inputs byte-identical afterwards (issue 13)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpugap.cli import main
from gpugap.errors import EXIT_USAGE, EXIT_WRITE
from tests.conftest import report_path

pytestmark = pytest.mark.usefixtures("outside_ci", "no_hang")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gpugap(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("gpugap: error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def report(tmp_path) -> Path:
    """A real report copied where the test may write beside it."""
    path = tmp_path / "r.sqlite"
    shutil.copy(report_path("h2d-copy-good"), path)
    return path


@pytest.fixture
def other(tmp_path) -> Path:
    path = tmp_path / "x.sqlite"
    shutil.copy(report_path("h2d-copy-bad"), path)
    return path


GATE = ("--max", "kernels=1000000", "--no-config")


# --- an output that is an input -----------------------------------------------------

@pytest.mark.parametrize("argv", [
    pytest.param(lambda r, x: ["check", r, *GATE, "--junit", r], id="check --junit R"),
    pytest.param(lambda r, x: ["check", r, *GATE, "--markdown", r], id="check --markdown R"),
    pytest.param(lambda r, x: ["check", r, *GATE, "--junit", r, "--force"],
                 id="check --junit R --force"),
    pytest.param(lambda r, x: ["baseline", "save", r, "-o", r, "--no-config"],
                 id="baseline save R -o R"),
    pytest.param(lambda r, x: ["baseline", "save", x, r, "-o", r, "--force", "--no-config"],
                 id="baseline save X R -o R --force"),
    pytest.param(lambda r, x: ["diff", r, x, "--markdown", r, "--no-config"],
                 id="diff R X --markdown R"),
    pytest.param(lambda r, x: ["diff", x, r, "--markdown", r, "--force", "--no-config"],
                 id="diff X R --markdown R --force"),
    pytest.param(lambda r, x: ["analyze", r, "--html", r, "--force", "--no-config"],
                 id="analyze --html R --force"),
    pytest.param(lambda r, x: ["analyze", r, "--svg", f"./{r.name}", "--force",
                               "--no-config"], id="analyze --svg ./R --force"),
])
def test_output_equal_to_the_input_is_refused_even_with_force(capsys, report, other, argv):
    before = digest(report), digest(other)
    code, out, err = gpugap(capsys, *argv(report, other))
    assert code == EXIT_USAGE and out == ""
    one_line_error(err, "would overwrite the input", "another file")
    assert (digest(report), digest(other)) == before


def test_output_resolving_to_the_input_is_refused(capsys, tmp_path, report):
    before = digest(report)
    link = tmp_path / "link.xml"
    link.symlink_to(report)
    hard = tmp_path / "hard.xml"
    os.link(report, hard)
    for target in (link, hard):
        code, _, err = gpugap(capsys, "check", report, *GATE, "--junit", target, "--force")
        assert code == EXIT_USAGE
        one_line_error(err, "would overwrite the input")
    # The report given through a symlink, the output naming the real file.
    code, _, err = gpugap(capsys, "analyze", link, "--html", report, "--force", "--no-config")
    assert code == EXIT_USAGE
    one_line_error(err, "would overwrite the input")
    assert digest(report) == before


def test_output_equal_to_the_baseline_or_config_is_refused(capsys, tmp_path, report):
    baseline = tmp_path / "b.json"
    assert main(["baseline", "save", str(report), "-o", str(baseline), "--no-config"]) == 0
    saved = digest(baseline)
    code, _, err = gpugap(capsys, "check", report, "--no-config", "--baseline", baseline,
                          "--junit", baseline, "--force")
    assert code == EXIT_USAGE
    one_line_error(err, f"--junit {baseline} would overwrite the input")
    assert digest(baseline) == saved

    config = tmp_path / "gpugap.toml"
    config.write_text("[gates]\nmax = { kernels = 1000000 }\n")
    for argv in (["check", report, "--markdown", config, "--force"],
                 ["diff", report, report, "--markdown", config, "--force"],
                 ["analyze", report, "--html", config, "--force"],
                 ["baseline", "save", report, "-o", config, "--force"]):
        code, _, err = gpugap(capsys, *argv)
        assert code == EXIT_USAGE, argv
        one_line_error(err, "would overwrite the input", "gpugap.toml")
    assert config.read_text() == "[gates]\nmax = { kernels = 1000000 }\n"


def test_two_outputs_on_one_file_are_refused(capsys, tmp_path, report):
    out = tmp_path / "out.txt"
    code, _, err = gpugap(capsys, "check", report, *GATE, "--junit", out, "--markdown", out)
    assert code == EXIT_USAGE
    one_line_error(err, "given for both --junit and --markdown")
    assert not out.exists()


# --- existing files: only with --force ----------------------------------------------

@pytest.mark.parametrize("option", ["--junit", "--markdown", "-o", "diff --markdown",
                                    "--html", "--svg"])
def test_existing_output_needs_force(capsys, tmp_path, report, other, option):
    out = tmp_path / "existing.out"
    out.write_text("keep me")
    argv = {"--junit": ["check", report, *GATE, "--junit", out],
            "--markdown": ["check", report, *GATE, "--markdown", out],
            "-o": ["baseline", "save", report, "-o", out, "--no-config"],
            "diff --markdown": ["diff", report, other, "--markdown", out, "--no-config"],
            "--html": ["analyze", report, "--html", out, "--no-config"],
            "--svg": ["analyze", report, "--svg", out, "--no-config"]}[option]
    code, out_text, err = gpugap(capsys, *argv)
    assert code == EXIT_USAGE and out_text == ""       # refused before any work
    assert one_line_error(err) == f"gpugap: error: {out} exists; pass --force to overwrite"
    assert out.read_text() == "keep me"

    code, _, err = gpugap(capsys, *argv, "--force")
    assert code == 0, err
    assert out.read_text() != "keep me"
    assert f"wrote {out}" in err or option == "-o"
    # Written whole through a temporary file that is gone now.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["existing.out", "r.sqlite", "x.sqlite"])


def test_force_replaces_the_file_not_what_shares_its_inode(capsys, tmp_path, report):
    """The new content is renamed into place: a hard link of the old file keeps the
    old content (a write through the old file would change both)."""
    out = tmp_path / "j.xml"
    out.write_text("old")
    twin = tmp_path / "twin.xml"
    os.link(out, twin)
    code, _, err = gpugap(capsys, "check", report, *GATE, "--junit", out, "--force")
    assert code == 0, err
    assert out.read_text().startswith("<?xml") and twin.read_text() == "old"


def test_html_through_a_dangling_symlink_does_not_create_its_target(capsys, tmp_path,
                                                                   report):
    target = tmp_path / "elsewhere" / "planted.html"
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "t.html"
    link.symlink_to(target)
    code, _, err = gpugap(capsys, "analyze", report, "--html", link, "--no-config")
    assert code == EXIT_USAGE
    one_line_error(err, "exists; pass --force")
    assert not target.exists() and link.is_symlink()

    code, _, err = gpugap(capsys, "analyze", report, "--html", link, "--force", "--no-config")
    assert code == 0, err
    assert not target.exists()
    assert not link.is_symlink() and link.read_text().startswith("<!DOCTYPE html>")


def test_symlink_at_the_target_is_replaced_not_followed(capsys, tmp_path, report):
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    link = tmp_path / "summary.md"
    link.symlink_to(victim)
    code, _, err = gpugap(capsys, "check", report, *GATE, "--markdown", link, "--force")
    assert code == 0, err
    assert victim.read_text() == "do not touch"
    assert not link.is_symlink() and link.read_text().startswith("### gpugap check")


def test_output_that_is_a_directory_or_fifo_is_refused(capsys, tmp_path, report):
    directory = tmp_path / "dir.xml"
    directory.mkdir()
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    stdout_link = tmp_path / "stdout.xml"
    stdout_link.symlink_to("/dev/null")         # like /dev/stdout: never replaced
    for argv, needle in ((["--junit", directory, "--force"], "is a directory"),
                         (["--markdown", fifo, "--force"], "is a FIFO"),
                         (["--junit", stdout_link, "--force"], "is a character device"),
                         (["--markdown", tmp_path / "no-dir" / "m.md"], "does not exist")):
        code, _, err = gpugap(capsys, "check", report, *GATE, *argv)
        assert code == EXIT_USAGE
        one_line_error(err, needle)
    assert directory.is_dir() and not any(directory.iterdir())
    assert stdout_link.is_symlink() and fifo.exists()


def test_job_summary_never_an_input_nor_a_fifo(capsys, monkeypatch, tmp_path, report):
    before = digest(report)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(report))
    code, _, err = gpugap(capsys, "check", report, *GATE)
    assert code == EXIT_USAGE
    one_line_error(err, "job summary", "is the input")
    assert digest(report) == before

    fifo = tmp_path / "summary.fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    code, _, err = gpugap(capsys, "check", report, *GATE)
    assert code == EXIT_USAGE                       # no reader: refused, not blocked
    one_line_error(err, str(fifo))

    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert gpugap(capsys, "check", report, *GATE)[0] == 0
    assert summary.read_text().startswith("earlier step\n### gpugap check")


def test_profile_never_writes_over_an_input_of_the_program(capsys, tmp_path):
    """--out --force may replace earlier output, never a file the program reads: here
    the run's log would land on the program's own data file."""
    out = tmp_path / "out"
    out.mkdir()
    script = out / "prog.py"
    script.write_text("print('hello')\n")
    data = out / "prog.log"
    data.write_text("the program's input")
    code, _, err = gpugap(capsys, "profile", "--out", out, "--force", "--",
                          sys.executable, script, data)
    assert code == EXIT_USAGE
    one_line_error(err, f"{data}", "is the input", "choose another --out")
    assert data.read_text() == "the program's input"
    assert sorted(p.name for p in out.iterdir()) == ["prog.log", "prog.py"]


# --- a full disk under standard output ----------------------------------------------------

def _analyze_into(stdout_path: str, *args: str, unbuffered: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1" if unbuffered else "")
    with open(stdout_path, "wb") as out:
        return subprocess.run([sys.executable, "-m", "gpugap", "analyze",
                               str(report_path("h2d-copy-good")), *args],
                              stdout=out, stderr=subprocess.PIPE, env=env, timeout=120)


def _one_write_error(proc: subprocess.CompletedProcess) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_WRITE, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpugap: error: cannot write the output "
                                                   "(No space left on device)"), err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize(("args", "unbuffered"), [(["--json"], True), ([], False)])
def test_dev_full_under_stdout(args, unbuffered):
    _one_write_error(_analyze_into("/dev/full", *args, unbuffered=unbuffered))


@pytest.fixture
def full_filesystem(tmp_path):
    """A 16 KB tmpfs (where this user may mount: root, as in CI), else None."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)],
                          capture_output=True)
    if made.returncode != 0:
        yield None
        return
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_full_filesystem_under_stdout_is_never_a_silent_truncation(full_filesystem):
    """Unbuffered Python stdout dropped what a short write left: 16 KB of JSON, exit 0.
    Now the JSON is whole or the exit is 9 with one line."""
    if full_filesystem is None:
        pytest.skip("cannot mount a tmpfs here (not root): /dev/full covers the error path")
    _one_write_error(_analyze_into(str(full_filesystem / "o.json"), "--json",
                                   unbuffered=True))


# --- every output target, checked before any work (issue 23, point 5) ----------------

@pytest.fixture
def unwritable(tmp_path) -> Path:
    """A directory that exists but takes no new file: a read-only one, or /proc as root
    (root writes through permissions; only trying tells)."""
    if os.geteuid() == 0:
        return Path("/proc")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return locked


@pytest.mark.parametrize("argv", [
    pytest.param(lambda r, x, d: ["analyze", r, "--html", d / "t.html"], id="analyze --html"),
    pytest.param(lambda r, x, d: ["analyze", r, "--svg", d / "t.svg"], id="analyze --svg"),
    pytest.param(lambda r, x, d: ["analyze", r, "--png", d / "t.png"], id="analyze --png"),
    pytest.param(lambda r, x, d: ["check", r, *GATE, "--junit", d / "j.xml"],
                 id="check --junit"),
    pytest.param(lambda r, x, d: ["check", r, *GATE, "--markdown", d / "m.md"],
                 id="check --markdown"),
    pytest.param(lambda r, x, d: ["baseline", "save", r, "-o", d / "b.json"],
                 id="baseline save -o"),
    pytest.param(lambda r, x, d: ["diff", r, x, "--markdown", d / "m.md"], id="diff --markdown"),
    pytest.param(lambda r, x, d: ["run", "h2d-copy", "--out", d / "runs"], id="run SCENARIO --out"),
    pytest.param(lambda r, x, d: ["run", "--out", d / "runs", "--", sys.executable, "-c", "1"],
                 id="run --out -- CMD"),
    pytest.param(lambda r, x, d: ["profile", "--out", d / "runs", sys.executable, "-c", "1"],
                 id="profile --out"),
])
def test_an_unwritable_output_fails_before_any_work(capsys, report, other, unwritable, argv):
    """Exit 2 with one line naming the target, and nothing printed: no analysis, no
    profiling (run and profile would otherwise say that nsys or the GPU is missing,
    exit 3 or 6, on a machine without them), and nothing created."""
    args = argv(report, other, unwritable)
    if args[0] in ("check", "baseline", "diff", "analyze"):
        args.append("--no-config")
    code, out, err = gpugap(capsys, *args)
    assert code == EXIT_USAGE and out == "", err
    one_line_error(err, "cannot write", str(unwritable), "writable directory")
    if unwritable != Path("/proc"):
        assert os.listdir(unwritable) == []


@pytest.mark.parametrize("command", ["check", "diff"])
def test_an_unwritable_job_summary_fails_before_any_work(capsys, monkeypatch, report, other,
                                                       unwritable, command):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(unwritable / "summary.md"))
    argv = ["check", report, *GATE] if command == "check" else \
        ["diff", report, other, "--no-config"]
    code, out, err = gpugap(capsys, *argv)
    assert code == EXIT_USAGE and out == ""
    one_line_error(err, "cannot write", "summary.md")


def test_every_scenario_directory_is_checked_before_the_first_runs(capsys, tmp_path):
    """`run A B --out D`: D/B holding output fails at once (exit 2), not after A was
    profiled; a file where --out wants a directory too."""
    (tmp_path / "out" / "grid-sweep").mkdir(parents=True)
    (tmp_path / "out" / "grid-sweep" / "bad.sqlite").write_text("earlier run")
    code, out, err = gpugap(capsys, "run", "h2d-copy", "grid-sweep", "--out", tmp_path / "out")
    assert code == EXIT_USAGE and out == ""
    one_line_error(err, "grid-sweep already holds output", "--force")
    assert not (tmp_path / "out" / "h2d-copy").exists()

    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = gpugap(capsys, "profile", "--out", blocker / "sub", sys.executable,
                            "-c", "1")
    assert code == EXIT_USAGE and out == ""
    one_line_error(err, "is not a directory", "--out")
    assert blocker.read_text() == "x"
