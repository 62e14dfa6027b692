"""Hostile and broken inputs other than the report's content (issue 13): only regular
files are read (a FIFO, /dev/zero, a directory: one line, exit 2, no hang), configs and
baselines have a size cap, every value is validated (--set, thresholds, min_severity,
baselines), and text from a report or a file name is made safe before it is shown."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpugap.cli import main
from gpugap.errors import EXIT_USAGE
from gpugap.text import ELLIPSIS, one_line, safe_rich, safe_text
from tests.conftest import report_path

pytestmark = pytest.mark.usefixtures("outside_ci", "no_hang")

REPORT = report_path("h2d-copy-good")
GATE = ("--max", "kernels=1000000")


def gpugap(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("gpugap: error: ") and "Traceback" not in err
    assert "\x1b" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def refused(capsys, *argv, needles=()) -> str:
    code, out, err = gpugap(capsys, *argv)
    assert code == EXIT_USAGE, (code, err)
    return one_line_error(err, *needles)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- only regular files, never a hang -----------------------------------------------

@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_fifo_or_device_as_the_report(capsys, fifo):
    refused(capsys, "analyze", fifo, needles=("is a FIFO", "report file"))
    refused(capsys, "check", fifo, *GATE, "--no-config", needles=("is a FIFO",))
    refused(capsys, "analyze", "/dev/zero", needles=("is a character device",))


def test_fifo_device_or_directory_as_the_config(capsys, tmp_path, fifo):
    refused(capsys, "check", REPORT, *GATE, "--config", fifo,
            needles=(str(fifo), "is a FIFO", "config file"))
    refused(capsys, "analyze", REPORT, "--config", "/dev/zero",
            needles=("/dev/zero is a character device",))
    refused(capsys, "check", REPORT, *GATE, "--config", tmp_path,
            needles=("is a directory",))


def test_fifo_device_or_directory_as_the_baseline(capsys, tmp_path, fifo):
    for path, needle in ((fifo, "is a FIFO"), (Path("/dev/zero"), "is a character device"),
                         (tmp_path, "is a directory")):
        refused(capsys, "check", REPORT, "--no-config", "--baseline", path,
                needles=(str(path), needle, "baseline file"))


def test_discovered_pyproject_that_is_a_fifo(capsys, tmp_path):
    os.mkfifo(tmp_path / "pyproject.toml")
    refused(capsys, "check", REPORT, *GATE,
            needles=("pyproject.toml is a FIFO", "--no-config"))


def test_config_over_1_mib(capsys, tmp_path):
    config = tmp_path / "gpugap.toml"
    config.write_text("# padding\n" * 110_000)
    refused(capsys, "check", REPORT, *GATE, needles=("larger than 1 MiB",))


def test_baseline_over_64_mib(capsys, tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate((64 << 20) + 1)                     # sparse: nothing is stored
    refused(capsys, "check", REPORT, "--no-config", "--baseline", big,
            needles=("larger than 64 MiB",))


# --- configs -------------------------------------------------------------------------

def test_invalid_utf8_in_the_named_config(capsys, tmp_path):
    config = tmp_path / "gpugap.toml"
    config.write_bytes(b'range = "\xff\xfe"\n')
    refused(capsys, "check", REPORT, *GATE, "--config", config,
            needles=(str(config), "not valid UTF-8"))


def test_invalid_utf8_in_a_pyproject_up_the_tree(capsys, tmp_path):
    """Discovery reads every pyproject.toml on the way up: an unreadable one is an error
    naming it (skipping it could drop the gates it holds); --no-config gets past it."""
    (tmp_path / "pyproject.toml").write_bytes(b'[project]\nname = "\xc3\x28"\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.chdir(tmp_path / "a" / "b")
    refused(capsys, "check", REPORT, *GATE,
            needles=(str(tmp_path / "pyproject.toml"), "not valid UTF-8", "--no-config"))
    assert gpugap(capsys, "check", REPORT, *GATE, "--no-config")[0] == 0


@pytest.mark.parametrize(("text", "expected"), [
    ("min_severity = []\n", "min_severity must be one of info, warning, error, not []"),
    ("min_severity = 1\n", "min_severity must be one of info, warning, error"),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
    ("[thresholds.launch-gap]\nmin_gap_us = nan\n", "must be a finite number, not nan"),
    ("[thresholds.launch-gap]\nmin_gap_us = inf\n", "must be a finite number, not inf"),
    ("[thresholds.launch-gap]\nmin_gap_us = -5\n", "launch-gap.min_gap_us (us) must be >= 0"),
    ("[thresholds.serialized-streams]\noverlap_tolerance = 1.5\n",
     "overlap_tolerance (fraction) must be <= 1"),
    ("[thresholds.launch-gap]\nmin_share_pct = 101\n", "min_share_pct (%) must be <= 100"),
    ("[thresholds.small-grid]\nmin_idle_sm_pct = 200\n", "(%) must be <= 100"),
    ("[baseline]\nnoise_k = nan\n", "noise_k must be a finite number"),
    ("[gates]\nmax = { kernels = inf }\n", "must be a finite number, not inf"),
])
def test_bad_config_values(capsys, tmp_path, text, expected):
    (tmp_path / "gpugap.toml").write_text(text)
    refused(capsys, "check", REPORT, *GATE, needles=(expected,))


# --- --set and numeric options --------------------------------------------------------

@pytest.mark.parametrize(("item", "expected"), [
    ("launch-gap.min_gap_us=nan", "--set launch-gap.min_gap_us (us) must be a finite number"),
    ("launch-gap.min_gap_us=inf", "must be a finite number, not inf"),
    ("launch-gap.min_gap_us=-1", "must be >= 0"),
    ("serialized-streams.overlap_tolerance=2", "must be <= 1"),
    ("launch-gap.min_gap_us=lots", "'lots' is not a number"),
    ("nope.x=1", "unknown rule 'nope' in --set; rules: blocking-memcpy, launch-gap"),
    ("launch-gap.nope=1", "rule launch-gap has no threshold nope (--set); it has: "
                          "min_gap_us, min_share_pct"),
    ("launch-gap.min_gap_us=", "write RULE.NAME=VALUE"),
])
@pytest.mark.parametrize("command", ["analyze", "check", "diff", "baseline"])
def test_bad_set_is_refused_up_front_by_every_command(capsys, tmp_path, item, expected,
                                                      command):
    argv = {"analyze": ["analyze", REPORT],
            "check": ["check", REPORT, *GATE],
            "diff": ["diff", REPORT, REPORT],
            "baseline": ["baseline", "save", REPORT, "-o", tmp_path / "b.json"]}[command]
    code, out, err = gpugap(capsys, *argv, "--no-config", "--set", item)
    assert code == EXIT_USAGE and out == ""
    one_line_error(err, expected)
    assert not (tmp_path / "b.json").exists()


def test_set_for_a_rule_not_run_is_still_checked(capsys):
    refused(capsys, "analyze", REPORT, "--rule", "blocking-memcpy", "--set",
            "launch-gap.nope=1", needles=("has no threshold nope",))


def test_valid_set_still_works(capsys):
    code, out, _ = gpugap(capsys, "analyze", REPORT, "--json", "--no-config", "--set",
                          "launch-gap.min_gap_us=0", "--set", "small-grid.max_sm_fraction=1")
    assert code == 0
    assert json.loads(out)["thresholds"]["launch-gap"]["min_gap_us"] == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_min_gap_us_must_be_positive_and_finite(capsys, value):
    refused(capsys, "analyze", REPORT, "--no-config", "--min-gap-us", value,
            needles=("--min-gap-us must be a positive number",))


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_tolerance_must_be_finite_and_not_negative(capsys, tmp_path, value):
    baseline = tmp_path / "b.json"
    assert main(["baseline", "save", str(REPORT), "-o", str(baseline), "--no-config"]) == 0
    refused(capsys, "check", REPORT, "--no-config", "--baseline", baseline, "--tolerance",
            value, needles=("--tolerance must be a finite number >= 0",))


# --- baselines -----------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path) -> dict:
    path = tmp_path / "saved.json"
    assert main(["baseline", "save", str(REPORT), "-o", str(path), "--no-config"]) == 0
    return json.loads(path.read_text())


def edit(doc: dict, change) -> dict:
    doc = json.loads(json.dumps(doc))
    change(doc)
    return doc


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d["whole"]["kernels"].update(median="12"),
     "whole.kernels.median: must be a finite number or null, not '12'"),
    (lambda d: d["whole"]["kernels"].update(median=float("nan")),
     "whole.kernels.median: must be a finite number or null, not nan"),
    (lambda d: d["whole"]["kernels"].update(stdev=-1), "whole.kernels.stdev: must be a finite"),
    (lambda d: d["whole"]["kernels"].update(n=True), "whole.kernels.n: must be a whole number"),
    (lambda d: d["whole"]["kernels"].update(runs=["x"]), "whole.kernels.runs: must be a list"),
    (lambda d: d["whole"]["kernels"].pop("max"), "whole.kernels: missing 'max'"),
    (lambda d: d["whole"]["kernels"].update(extra=1), "whole.kernels: unknown key 'extra'"),
    (lambda d: d.update(surprise=1), "unknown key 'surprise'"),
    (lambda d: d.update(min_severity=[]), "min_severity: must be one of"),
    (lambda d: d.update(thresholds={"launch-gap": {"min_gap_us": "100"}}),
     "thresholds.launch-gap: must map threshold names to finite numbers"),
    (lambda d: d.update(ranges=[]), "ranges: must be an object"),
    (lambda d: d["ranges"].update(measured={"kernels": 3}), "ranges.measured.kernels: must "
                                                            "be an object"),
])
def test_malformed_baselines(capsys, tmp_path, saved, change, expected):
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(edit(saved, change)))
    before = digest(path)
    line = refused(capsys, "check", REPORT, "--no-config", "--baseline", path,
                   needles=(f"{path} is a malformed gpugap baseline", expected))
    assert line.endswith("gpugap baseline save REPORT... -o FILE")
    assert digest(path) == before


def test_deeply_nested_baseline(capsys, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"gpugap_baseline": 1, "whole": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(capsys, "check", REPORT, "--no-config", "--baseline", path,
            needles=("nested too deeply",))


def test_baseline_that_is_not_utf8(capsys, tmp_path):
    path = tmp_path / "b.json"
    path.write_bytes(b'{"gpugap_baseline": 1, "gpu": "\xff"}')
    refused(capsys, "check", REPORT, "--no-config", "--baseline", path,
            needles=("not valid UTF-8",))


def test_saved_baseline_passes_its_own_schema(capsys, tmp_path, saved):
    from gpugap.ci.baseline import schema_problem

    assert schema_problem(saved) is None


# --- text from the report or a file name, made safe ------------------------------------

def test_safe_text_escapes_and_truncates():
    assert safe_text("a\x1b[31mb\nc\x7f\x9b\u202e\u200bd") == \
        "a\\x1b[31mb\\x0ac\\x7f\\x9b\\u202e\\u200bd"
    assert safe_text("\udcff") == "\\udcff"                  # undecodable file-name byte
    assert safe_text("kernel_ü→✓") == "kernel_ü→✓"           # printable text untouched
    cut = safe_text("x" * 500)
    assert len(cut) == 200 and cut.endswith(ELLIPSIS)
    assert safe_text("x" * 200) == "x" * 200
    assert len(safe_text("\x1b" * 100, limit=10)) <= 10
    assert safe_text("y" * 5000, limit=None) == "y" * 5000
    assert one_line("first line\nCREATE TABLE x (\n  a INT\n)") == f"first line {ELLIPSIS}"
    text = safe_rich("[bold]x[/oops]")
    assert text.plain == "[bold]x[/oops]" and not text.spans


def test_multiline_sqlite_error_is_one_line(capsys, tmp_path):
    """SQLite quotes a planted object name (with newlines and an escape sequence) in its
    error: the message stays one line, nothing interpreted."""
    report = tmp_path / "planted.sqlite"
    shutil.copy(REPORT, report)
    with sqlite3.connect(report) as conn:
        conn.execute("PRAGMA writable_schema=1")
        conn.execute("UPDATE sqlite_master SET name = 'StringIds' || char(10) || 'line 2' "
                     "|| char(10) || char(27) || '[31mred', sql = sql || ' garbage' "
                     "WHERE name = 'StringIds'")
    before = digest(report)
    line = refused(capsys, "analyze", report, needles=("is corrupt", "malformed database "
                                                       "schema", "copy or export"))
    assert "line 2" not in line
    assert digest(report) == before


@pytest.fixture
def hostile(tmp_path) -> tuple[Path, Path]:
    """Real reports whose file name and NVTX range 'iter' carry markup, an escape
    sequence and a newline."""
    directory = tmp_path / "d\x1b[31m"
    directory.mkdir()
    out = []
    for variant in ("bad", "good"):
        path = directory / f"[bold]h2d\n{variant}.sqlite"
        shutil.copy(report_path(f"h2d-copy-{variant}"), path)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE StringIds SET value = ? WHERE value = 'iter'",
                         ("it[/x]\x1b[2Jer\nX",))
        out.append(path)
    return out[0], out[1]


def test_hostile_names_in_check_outputs(capsys, tmp_path, hostile):
    bad, good = hostile
    junit, md = tmp_path / "j.xml", tmp_path / "c.md"
    code, out, err = gpugap(capsys, "check", bad, good, "--no-config", "--range",
                            "it[/x]\x1b[2Jer\nX", "--max", "findings.count=0",
                            "--junit", junit, "--markdown", md)
    assert code == 1, err
    assert "\x1b" not in out + err and "Traceback" not in err
    assert "it[/x]\\x1b[2Jer\\x0aX" in out
    root = ET.parse(junit).getroot()                   # well-formed XML
    assert root.find("testsuite").get("name").endswith("[bold]h2d\\x0abad.sqlite")
    text = md.read_text()
    # In inline code, as the terminal shows it (a table cell no longer doubles the
    # backslashes there: inside code they are not escapes).
    assert "\x1b" not in text and "`it[/x]\\x1b[2Jer\\x0aX" in text


@pytest.mark.slow
def test_hostile_names_in_diff(capsys, tmp_path, hostile):
    bad, good = hostile
    md = tmp_path / "d.md"
    code, out, err = gpugap(capsys, "diff", bad, good, "--no-config", "--markdown", md)
    assert code == 0, err
    assert "\x1b" not in out + err and "it[/x]" in out     # shown, not parsed as markup
    assert "\x1b" not in md.read_text()


def test_hostile_names_in_github_annotations(capsys, monkeypatch, hostile):
    bad, _ = hostile
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, _ = gpugap(capsys, "check", bad, "--no-config", "--max", "kernels=0")
    assert code == 1
    (annotation,) = [ln for ln in out.splitlines() if ln.startswith("::error")]
    assert "\x1b" not in out and "\\x1b[31m" in annotation and "%0A" not in annotation
