"""The command line itself: --version, usage errors in one line, readable --help, and what
--max-findings leaves out (on real captures)."""

from __future__ import annotations

import re

import pytest
import typer

from gpugap import __version__
from gpugap.cli import app, main
from gpugap.errors import EXIT_USAGE
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


def test_max_findings_says_what_it_hid(capsys):
    code, full, _ = gpugap(capsys, "analyze", str(TRAIN))
    assert code == 0
    assert panels(full) == 3 and "hidden" not in full     # its 3 steady-state findings
    code, none, _ = gpugap(capsys, "analyze", str(TRAIN), "--max-findings", "0")
    assert code == 0
    part = findings_part(none)
    assert panels(part) == 0 and "No findings" not in part
    assert "Findings of the steady state (3), largest cost first\n3 findings hidden " \
           "(--max-findings 0); --json lists all\n" in part
    # The start-up findings are listed under their total, and hidden the same way.
    assert "Start-up and other one-time costs (7.01 s)\n3 findings hidden" in part
    code, one, _ = gpugap(capsys, "analyze", str(TRAIN), "--max-findings", "1")
    part = findings_part(one)
    assert panels(part) == 1
    assert part.count("... and 2 more hidden (--max-findings 1); --json lists all\n") == 2


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
