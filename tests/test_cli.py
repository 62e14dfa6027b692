"""The command line itself: --version, usage errors in one line, readable --help, and what
--max-findings leaves out (on real captures)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer

from gpugap import __version__
from gpugap.cli import app, main
from gpugap.errors import EXIT_USAGE
from gpugap.units import fmt_ns
from tests.conftest import DATA

TRAIN = DATA / "captures" / "train-workers0.sqlite"


def gpugap(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    assert gpugap(capsys, "--version") == (0, f"gpugap {__version__}\n", "")


@pytest.mark.parametrize(("args", "says", "command"), [
    (["analyze", str(TRAIN), "--foo"], "no such option: --foo", "gpugap analyze"),
    (["analyze"], "missing argument 'REPORT'", "gpugap analyze"),
    (["analyze", str(TRAIN), "--max-findings", "many"], "invalid value for '--max-findings'",
     "gpugap analyze"),
    (["analyze", str(TRAIN), "--max-findings", "-1"], "invalid value for '--max-findings'",
     "gpugap analyze"),
    (["analyze", str(TRAIN), "--max-findings"], "option '--max-findings' requires an argument",
     "gpugap analyze"),
    (["no-such-command"], "no such command 'no-such-command'", "gpugap"),
    (["check"], "missing argument 'REPORT'", "gpugap check"),
    (["diff", str(TRAIN)], "missing argument 'AFTER'", "gpugap diff"),
    (["baseline", "save", str(TRAIN), "-o"], "option '-o' requires an argument",
     "gpugap baseline save"),
    (["baseline", "restore"], "no such command 'restore'", "gpugap baseline"),
    (["--foo"], "no such option: --foo", "gpugap"),
])
def test_usage_errors_are_one_line(capsys, args, says, command):
    code, out, err = gpugap(capsys, *args)
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"gpugap: error: {says}"), err
    assert err.endswith(f"; see {command} --help\n"), err
    assert "Usage:" not in err and "Try '" not in err


def test_no_arguments_prints_the_help(capsys):
    code, out, err = gpugap(capsys)
    assert code in (0, EXIT_USAGE)        # click >= 8.2 (and typer's own): 2, older: 0
    assert "Usage: gpugap [OPTIONS] COMMAND" in out + err and "analyze" in out + err


def _commands(group, prefix=()):
    """(argv prefix, click command) of every command, subcommands included."""
    for name, command in sorted((getattr(group, "commands", None) or {}).items()):
        yield (*prefix, name), command
        yield from _commands(command, (*prefix, name))


def test_every_option_taking_a_value_has_a_metavar():
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if param.param_type_name == "option" and not param.is_flag:
                assert param.metavar, f"gpugap {' '.join(path)} {param.opts[0]}: no metavar"


# Python type names (typer >= 0.16: <list[str]>, <bool>, <int range>) and click's default
# metavars (TEXT, INTEGER, FLOAT, BOOLEAN) say nothing about what an option takes.
TYPE_REPR = re.compile(r"<[^>\n]*>|\blist\[|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN)\b")


def test_help_names_what_each_option_takes(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    helps = {}
    for path, _ in [((), None), *_commands(typer.main.get_command(app))]:
        code, out, err = gpugap(capsys, *path, "--help")
        assert code == 0 and err == "", path
        assert "Usage: gpugap" in out, path
        assert not TYPE_REPR.search(out), f"gpugap {' '.join(path)} --help:\n{out}"
        helps[" ".join(path)] = " ".join(out.split())
    for shown in ("--rule RULE", "--set RULE.NAME=VALUE", "--html FILE", "--max-findings N",
                  "--range NAME", "--scheduler ADDRESS", "--workers N"):
        assert shown in helps["analyze"], shown
    assert "needs the dist extra of gpugap" in helps["analyze"]
    assert "--min METRIC=VALUE" in helps["check"] and "--junit FILE" in helps["check"]
    assert re.search(r"(-o, --output|--output -o) FILE", helps["baseline save"])
    assert "BEFORE" in helps["diff"] and "AFTER" in helps["diff"]
    assert "--out DIR" in helps["profile"] and "--timeout SECONDS" in helps["profile"]
    assert "--cuda-graph-trace graph|node" in helps["run"]
    assert "--version" in helps[""]


def findings_part(text: str) -> str:
    return text[text.index("\nFindings"):text.index("\nTimeline")]


def panels(text: str) -> int:
    return len(re.findall(r"╭─ \d+\. ", text))       # one per finding shown


@pytest.mark.slow
def test_max_findings_says_what_it_hid(capsys):
    code, full, _ = gpugap(capsys, "analyze", str(TRAIN))
    assert code == 0
    # Its 2 steady-state findings; the 2 below 0.5% of their scope counted, not hidden.
    assert panels(full) == 2 and "hidden" not in full
    assert "... and 2 more below 0.5% of their scope (--json lists them)" in full
    code, none, _ = gpugap(capsys, "analyze", str(TRAIN), "--max-findings", "0")
    assert code == 0
    part = findings_part(none)
    assert panels(part) == 0 and "No findings" not in part
    assert "Findings of the steady state (2), largest cost first\n2 findings hidden " \
           "(--max-findings 0); --json lists all\n" in part
    # The start-up findings are listed under their total, and hidden the same way (a
    # finding with those it explains).
    assert "Start-up and other one-time costs (6.94 s)\n7 findings hidden" in part
    code, one, _ = gpugap(capsys, "analyze", str(TRAIN), "--max-findings", "1")
    part = findings_part(one)
    assert panels(part) == 1
    assert part.count("... and 1 more hidden (--max-findings 1); --json lists all\n") == 1
    assert part.count("... and 6 more hidden (--max-findings 1); --json lists all\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("args", [["analyze", str(TRAIN)], ["analyze", "--json", str(TRAIN)],
                                  ["rules"]])
def test_closed_pipe_is_not_a_failed_gate(args):
    # `gpugap analyze R | head -1`: the reader goes away. Made deterministic by closing the
    # pipe's read end before gpugap writes anything: its first write meets EPIPE.
    import os
    import subprocess
    import sys

    from gpugap.errors import EXIT_PIPE_CLOSED

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "gpugap", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert proc.returncode == EXIT_PIPE_CLOSED, proc.stderr
    assert proc.stderr == ""                  # no traceback, no "Exception ignored"


def closed_stdout(args: list[str]) -> subprocess.CompletedProcess:
    """`gpugap ARGS` whose reader has gone before it writes anything (as test above)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "gpugap", *args, "--no-config"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=300)
    finally:
        os.close(write_end)


@pytest.mark.slow
@pytest.mark.parametrize("document", [[], ["--json"]], ids=["terminal", "json"])
def test_files_asked_for_are_written_when_stdout_closes(tmp_path, document):
    """`gpugap analyze R --html F --svg G | head -1`: the files whole, said on stderr,
    then exit 141 as for any closed pipe (issue 40)."""
    from gpugap.errors import EXIT_PIPE_CLOSED

    html, svg = tmp_path / "t.html", tmp_path / "t.svg"
    proc = closed_stdout(["analyze", str(TRAIN), *document, "--html", str(html),
                          "--svg", str(svg)])
    assert proc.returncode == EXIT_PIPE_CLOSED, proc.stderr
    assert html.read_text().rstrip().endswith("</html>")
    assert svg.read_text().rstrip().endswith("</svg>")
    lines = proc.stderr.splitlines()
    assert lines[0] == ("gpugap: standard output was closed early; writing the files "
                        "asked for")
    assert [ln.split(" (")[0] for ln in lines[1:]] == [f"wrote {html}", f"wrote {svg}"]


@pytest.mark.slow
def test_check_writes_its_files_before_stdout_closes(tmp_path):
    from gpugap.errors import EXIT_PIPE_CLOSED

    junit, md = tmp_path / "j.xml", tmp_path / "c.md"
    proc = closed_stdout(["check", str(TRAIN), "--max", "gpu_busy_pct=100", "--junit",
                          str(junit), "--markdown", str(md)])
    assert proc.returncode == EXIT_PIPE_CLOSED, proc.stderr
    assert junit.read_text().rstrip().endswith("</testsuites>")
    assert md.read_text().startswith("### gpugap check: ✅ passed")
    assert proc.stderr.splitlines() == [f"wrote {junit}", f"wrote {md}"]


# --- 80 columns (issue 23, point 6) ---------------------------------------------------
# A CI log is 80 columns wide (rich's width when COLUMNS is unset); so is many a terminal.
# Every line fits, and what matters is never cut: a finding's title keeps its cost and
# count, the range table its headers and numbers, a device its whole verdict, `gpugap
# rules` its indents. check and diff at 80: tests/test_gates.py, tests/test_diff.py.

SCENARIOS = DATA / "scenarios"
TITLE = re.compile(r"^╭─ (\d+)\. (ERROR|WARNING|INFO) (\S+)( \[\S+\])? (?:cost )?"
                   r"([\d.]+ \w+) \(([\d.]+)%\)(?: (x\d+))? ─+╮$")


def at_width(monkeypatch, width: int, *argv) -> list[str]:
    """What `gpugap ARGV` prints on a console of *width* columns, without colour."""
    import io

    from rich.console import Console

    from gpugap.cli import check as cli_check
    from gpugap.cli import root as cli_root

    screen = io.StringIO()
    console = Console(file=screen, width=width, color_system=None, highlight=False)
    monkeypatch.setattr(cli_root, "stdout", console)
    monkeypatch.setattr(cli_check, "stdout", console)
    assert main([*map(str, argv), "--no-config"] if argv[0] != "rules" else list(argv)) \
        in (0, 1)
    return [line.rstrip() for line in screen.getvalue().splitlines()]


def fits(lines: list[str], width: int = 80) -> None:
    from rich.cells import cell_len

    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, too_wide
    assert not [line for line in lines if "…" in line]          # nothing cut by rich


@pytest.fixture(scope="module")
def legacy_stream_range():
    """default-stream bad, --range measured: its finding titles are the longest of the
    scenarios ('serialized-streams [legacy-default-stream] ... x29')."""
    from gpugap.analysis import analyze
    from gpugap.report import load

    return analyze(load(SCENARIOS / "default-stream-bad.sqlite"), range_name="measured")


def rendered(analysis, width: int) -> list[str]:
    import io

    from rich.console import Console

    from gpugap.render.terminal import render

    screen = io.StringIO()
    render(analysis, Console(file=screen, width=width, color_system=None, highlight=False))
    return [line.rstrip() for line in screen.getvalue().splitlines()]


def test_finding_titles_keep_their_cost_and_count_at_80_columns(legacy_stream_range):
    lines = rendered(legacy_stream_range, 80)
    fits(lines)
    titles = [TITLE.match(line) for line in lines if line.startswith("╭─ ") and
              not line.startswith("╭─ VERDICT")]
    assert all(titles) and len(titles) == len(legacy_stream_range.findings_of(
        "serialized-streams")) + len(legacy_stream_range.findings_of("launch-gap"))
    shown = [(t.group(3), t.group(4), t.group(5), t.group(7)) for t in titles]
    expected = [(f.rule, f" [{f.cause}]", fmt_ns(f.cost_ns), f"x{f.count}")
                for f in sorted(legacy_stream_range.findings, key=lambda f: -f.cost_ns)
                if not f.consequence_of]
    assert shown == expected
    # The range is one scope (docs/analyze.md): one serialized-streams finding for it.
    assert shown[0] == ("serialized-streams", " [legacy-default-stream]", "1.55 ms", "x29")


def test_a_narrow_terminal_moves_the_cause_never_the_cost(legacy_stream_range):
    lines = rendered(legacy_stream_range, 60)
    fits(lines, 60)
    first = next(i for i, line in enumerate(lines) if line.startswith("╭─ 1."))
    title = TITLE.match(lines[first])
    assert title and (title.group(3), title.group(4), title.group(5), title.group(7)) == (
        "serialized-streams", None, "1.55 ms", "x29")
    assert lines[first + 1].startswith("│ cause [legacy-default-stream]")


def test_the_range_table_cuts_no_header_nor_number_at_80_columns(monkeypatch):
    """cuBLAS's own ranges beside the program's (--all-domains): long names, nested."""
    lines = at_width(monkeypatch, 80, "analyze", SCENARIOS / "cublas-warmup-bad.sqlite",
                     "--all-domains")
    fits(lines)
    table = lines[lines.index("NVTX ranges") + 1:]
    headers = [c.strip() for c in table[1].split("┃")[1:-1]]
    assert headers == ["range", "count", "span", "busy", "k-overlap", "copy/comp", "conc."]
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in table
            if line.startswith("│")]
    number = re.compile(r"^(\d+|[\d.]+ (?:ns|us|ms|s)|[\d.]+%|\d+\.\d\d|-)$")
    named = [r for r in rows if r[1]]
    assert named and all(number.match(cell) for r in named for cell in r[1:]), named
    # A name too long for its column goes on under its indent, one step deeper.
    at = next(i for i, r in enumerate(rows) if r[0] == "gpugap:gemm")
    cell = table[[line.startswith("│") for line in table].index(True) + at + 1]
    assert cell.split("│")[1].startswith("       ") and not rows[at + 1][1]


def test_devices_and_program_lines_at_80_columns(monkeypatch):
    """Two GPUs: each device's verdict whole, the program line broken between its
    parts, the breakdown between its shares."""
    lines = at_width(monkeypatch, 80, "analyze", DATA / "captures" / "ddp-manual.sqlite")
    fits(lines)
    devices = " ".join(line.split("│")[5].strip() for line in lines
                       if line.startswith("│") and line.count("│") == 6)
    assert devices.count("without it") == 2
    program = next(i for i, line in enumerate(lines) if line.startswith("Program: "))
    assert lines[program].endswith(";") and lines[program + 1].startswith("  10 iterations")
    shares = [line for line in lines if line.startswith("  compute ")]
    assert len(shares) == 2 and all(not line.endswith("|") for line in shares)


def test_rules_wrap_under_a_hanging_indent_at_80_columns(monkeypatch):
    from gpugap.rules import registry

    lines = at_width(monkeypatch, 80, "rules")
    fits(lines)
    ids = {rule.id for rule in registry().values()}
    for line in lines:
        if not line.startswith(" "):
            assert line.split(":")[0] in ids, line            # a rule's own line
        elif not line.startswith("      "):
            assert line.startswith("  ") and (line[2:].startswith(("why:", "cause "))
                                               or line[2:].split(".")[0] in ids), line
    assert sum(line.startswith("      ") for line in lines) > 10   # continuations
