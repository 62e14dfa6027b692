"""The output registry (gpugap.render.outputs): a format registered once is an option of
every command that renders its subject, documented, and written through the one write
path of the command line (gpugap.cli.outputs); nothing else is imported for it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpugap.cli import main
from gpugap.errors import EXIT_USAGE
from gpugap.render import outputs as registry
from gpugap.render.outputs import ANALYSIS, CHECK, DIFF, FILE, FORMATS, JOB, Format

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "tests" / "data" / "captures" / "eval-pageable.sqlite"
OTHER = CAPTURE.with_name("eval-pinned.sqlite")
# Each command that takes output options, and the subjects it renders.
COMMANDS = {"analyze": (ANALYSIS, JOB), "check": (CHECK,), "diff": (DIFF,)}


def finding_lines(analysis, view) -> str:
    """A throwaway format's render function: one line per finding shown."""
    return "".join(f"{f.rule} [{f.cause}]\n" for f in analysis.findings
                   if view.min_severity is None or f.severity >= view.min_severity)


THROWAWAY = Format("finding-lines", "write one line per finding here", FILE,
                   renders={ANALYSIS: f"{__name__}:finding_lines"})


def options(capsys, command: str) -> str:
    assert main([command, "--help"]) == 0
    return capsys.readouterr().out


def option_help(command: str, name: str) -> str | None:
    """The help of option *name* of *command*, as the command line was built."""
    import typer

    from gpugap.cli.root import app

    group = typer.main.get_command(app)
    return next(p for p in group.commands[command].params if p.name == name).help


def test_every_format_is_offered_where_it_renders_and_documented(capsys):
    docs = "".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md",
                                                           *(ROOT / "docs").glob("*.md")])
    helps = {command: options(capsys, command) for command in COMMANDS}
    for fmt in FORMATS.values():
        assert re.search(rf"(?<![\w-]){re.escape(fmt.flag or fmt.name)}(?![\w-])", docs), \
            f"{fmt.name}: not in README.md or docs/*.md"
        for command, subjects in COMMANDS.items():
            offered = fmt.flag is not None and fmt.flag in helps[command].split()
            assert offered == (fmt.flag is not None and bool(set(subjects) & set(fmt.renders))), \
                (fmt.name, command)


def test_a_format_registered_in_process_is_an_option_and_written(capsys, monkeypatch,
                                                                   tmp_path):
    """One registry entry: analyze offers --finding-lines (and --force covers it), check
    and diff do not, the job view refuses it, the write path writes it (and says so)
    beside --json on stdout, and refuses to replace it without --force. The analyze
    path resolves only the render functions of the formats asked for."""
    monkeypatch.setitem(FORMATS, THROWAWAY.name, THROWAWAY)
    resolved: list[str] = []
    real = registry.resolve

    def spy(spec: str):
        resolved.append(spec)
        return real(spec)

    monkeypatch.setattr(registry, "resolve", spy)
    monkeypatch.setattr("gpugap.cli.outputs.resolve", spy)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)

    analyze_help = options(capsys, "analyze")
    # Read from the help as laid out (plain click, or rich's panels where typer and rich
    # versions choose them, which may cut a long help) and from the command itself.
    assert re.search(r"--finding-lines\s+FILE", analyze_help)
    assert "--force" in analyze_help.split()
    assert option_help("analyze", "force") == \
        "overwrite existing --markdown/--html/--svg/--png/--finding-lines files"
    assert "--finding-lines" not in options(capsys, "check") + options(capsys, "diff")

    out = tmp_path / "findings.txt"
    assert main(["analyze", str(CAPTURE), str(OTHER), "--finding-lines", str(out),
                 "--no-config"]) == EXIT_USAGE
    assert capsys.readouterr().err == ("gpugap: error: --finding-lines takes one report, "
                                       "not the 2 of a job\n")

    assert main(["analyze", str(CAPTURE), "--no-config", "--json",
                 "--finding-lines", str(out)]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["findings"], "the capture must have findings to list"
    assert out.read_text(encoding="utf-8") == "".join(
        f"{f['rule']} [{f['cause']}]\n" for f in document["findings"])
    assert captured.err == f"wrote {out}\n"
    # (--markdown's default file, GitHub's job summary, is looked for: none here.)
    assert [r for r in resolved if r != "gpugap.render.github:step_summary"] == [
        "gpugap.render.documents:analysis_json", f"{__name__}:finding_lines"]

    before = out.read_bytes()
    assert main(["analyze", str(CAPTURE), "--no-config", "--finding-lines",
                 str(out)]) == EXIT_USAGE
    assert capsys.readouterr().err == (f"gpugap: error: {out} exists; pass --force to "
                                       "overwrite\n")
    assert out.read_bytes() == before


def test_a_format_must_name_known_subjects_and_a_known_target():
    with pytest.raises(ValueError, match="renders subjects"):
        Format("sarif", "write SARIF here", FILE, renders={"report": "x:y"})
    with pytest.raises(ValueError, match="target"):
        Format("sarif", "write SARIF here", "socket", renders={CHECK: "x:y"})
    with pytest.raises(ValueError, match="registered already"):
        registry.register(FORMATS["json"])
