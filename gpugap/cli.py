"""The gpugap command line. Thin: parse, call the library, render, map errors to exit codes.

Exit codes: 0 done, 1 a gate/expectation failed, 2 bad usage or unreadable input,
3 nsys missing/failing, 4 no CUDA activity in the report, 5 the profiled program failed,
6 no GPU where one is needed.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpugap.errors import EXIT_USAGE, GpugapError, UsageError

SEVERITIES = ("info", "warning", "error")

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find the holes in a GPU timeline (Nsight Systems reports), say why "
                       "they are there and how to fix them.")

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)

# Options shared by several commands.
NsysOpt = Annotated[str | None, typer.Option("--nsys", help="nsys executable to use "
                                             "(default: $GPUGAP_NSYS, PATH, install dirs)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document to stdout")]
RuleOpt = Annotated[list[str] | None, typer.Option("--rule", help="run only this rule "
                                                   "(repeatable); see gpugap rules")]
RangeOpt = Annotated[str | None, typer.Option("--range", help="restrict to this NVTX range "
                                              "(name or domain:name)")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="override a rule threshold: RULE.NAME=VALUE (repeatable)")]
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="read gates and thresholds from this gpugap.toml / pyproject.toml "
                     "(default: gpugap.toml here, else the nearest pyproject.toml with "
                     "a tool.gpugap table)")]
NoConfigOpt = Annotated[bool, typer.Option("--no-config", help="ignore configuration files")]
IterationOpt = Annotated[str | None, typer.Option(
    "--iteration", help="the NVTX range that marks one iteration (numbers at the end of "
                        "its instances' names ignored: 'step' matches 'step 12'); 'none': "
                        "no iterations. Default: found from the ranges or the repeating "
                        "kernel sequence", metavar="NAME")]
MinSeverityOpt = Annotated[str | None, typer.Option(
    "--min-severity", help="show findings of this severity and up: info (default), "
                           "warning, error")]


@contextmanager
def status(message: str):
    """A spinner on stderr for long work, only for humans on a terminal."""
    if stderr.is_terminal:
        with stderr.status(message):
            yield
    else:
        yield


def parse_thresholds(items: list[str] | None, min_gap_us: float | None = None
                     ) -> dict[str, dict[str, float]]:
    """--set RULE.NAME=VALUE (and --min-gap-us), each checked up front: a known rule
    and threshold, a finite number in its range (gpugap.config.rule_threshold)."""
    if not items and min_gap_us is None:
        return {}
    from gpugap.config import parse_set

    out = parse_set(items)
    if min_gap_us is not None:
        if not min_gap_us > 0 or min_gap_us == float("inf"):
            raise UsageError(f"--min-gap-us must be a positive number, not {min_gap_us:g}")
        out.setdefault("launch-gap", {})["min_gap_us"] = float(min_gap_us)
    return out


def load_trace(report: Path, nsys: str | None):
    from gpugap.report import load

    with status(f"Loading {report.name}") if stderr.is_terminal else nullcontext():
        return load(report, nsys=nsys, status=status)


@app.command()
def analyze(
    report: Annotated[Path, typer.Argument(help="a .nsys-rep or its .sqlite export")],
    json_: JsonOpt = False,
    rule: RuleOpt = None,
    range_: RangeOpt = None,
    min_gap_us: Annotated[float | None, typer.Option(
        "--min-gap-us", help="launch-gap threshold in microseconds (default 100)")] = None,
    set_: SetOpt = None,
    nsys: NsysOpt = None,
    max_findings: Annotated[int, typer.Option(help="findings shown in the terminal")] = 20,
    html: Annotated[Path | None, typer.Option(
        "--html", help="write a self-contained HTML timeline with the findings drawn on it",
        metavar="FILE")] = None,
    svg: Annotated[Path | None, typer.Option(
        "--svg", help="write a static SVG of the timeline (the --range window, else the "
                      "GPU span)", metavar="FILE")] = None,
    png: Annotated[Path | None, typer.Option(
        "--png", help="write that SVG as PNG (needs chromium)", metavar="FILE")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="overwrite existing --html/--svg/--png files")] = False,
    config: ConfigOpt = None,
    no_config: NoConfigOpt = False,
    iteration: IterationOpt = None,
    min_severity: MinSeverityOpt = None,
    all_domains: Annotated[bool, typer.Option(
        "--all-domains", help="list the NVTX ranges of libraries (CUB, NCCL, cuBLAS...) "
                              "beside the program's")] = False,
) -> int:
    """Diagnose a report: the verdict on its steady state (or --range), where the GPU's
    time goes, and every finding with its cause, cost and fix."""
    from gpugap.report.prefetch import start as prefetch

    prefetch(report)   # read the big tables in the background while the imports below run
    from gpugap.analysis import analyze as run_analysis
    from gpugap.config import load_config
    from gpugap.errors import NoCudaActivity
    from gpugap.render.html import timeline_outputs
    from gpugap.render.jsonout import dumps
    from gpugap.render.terminal import render

    if config is not None and no_config:
        raise UsageError("--config and --no-config contradict each other; give one")
    # Rule thresholds: the project's configuration, then the command line on top.
    cfg = load_config(config, discover=not no_config)
    severity = min_severity or cfg.min_severity
    if severity not in SEVERITIES:
        raise UsageError(f"bad --min-severity '{min_severity}'; use one of "
                         f"{', '.join(SEVERITIES)}")
    thresholds = cfg.merged_thresholds(parse_thresholds(set_, min_gap_us))
    outputs = timeline_outputs(html, svg, png, force=force, range_name=range_,
                               inputs=[report, cfg.path])
    trace = load_trace(report, nsys)
    with status("Analyzing"):
        result = run_analysis(trace, rules=rule, thresholds=thresholds, range_name=range_,
                              require_gpu=False, iteration=iteration,
                              all_domains=all_domains)
    if json_:
        # Plain text: rich would re-scan a large document for nothing.
        document = result.to_dict()
        floor = SEVERITIES.index(severity)
        document["findings"] = [f for f in document["findings"]
                                if SEVERITIES.index(f["severity"]) >= floor]
        sys.stdout.write(dumps(document) + "\n")
        sys.stdout.flush()
    else:
        render(result, stdout, max_findings=max_findings, min_severity=severity)
    with status("Drawing the timeline") if outputs.wanted else nullcontext():
        outputs.write(result, trace, report=lambda line: stderr.print(line, markup=False,
                                                             soft_wrap=True))
    if result.status == "no-cuda-activity":
        raise NoCudaActivity(result.error or "no CUDA activity")
    return 0


@app.command("rules")
def list_rules(json_: JsonOpt = False,
               markdown: Annotated[bool, typer.Option(
                   "--markdown", help="print docs/rules.md")] = False) -> int:
    """List the rules with their causes, thresholds (defaults) and fixes."""
    from gpugap.render.jsonout import dumps
    from gpugap.rules import registry

    if markdown:
        from gpugap.rules.docs import rules_markdown

        stdout.out(rules_markdown(), highlight=False)
        return 0
    reg = registry()
    if json_:
        stdout.out(dumps([{"id": r.id, "title": r.title, "rationale": r.rationale,
                           "fix": r.fix, "causes": dict(r.causes),
                           "thresholds": {k: {"default": t.default, "unit": t.unit,
                                              "help": t.help}
                                          for k, t in r.thresholds.items()}}
                          for r in reg.values()]))
        return 0
    for r in reg.values():
        stdout.print(f"[bold]{r.id}[/bold]: {r.title}")
        stdout.print(f"  why: {r.rationale}")
        for cause, text in r.causes.items():
            stdout.print(f"  cause [magenta]{cause}[/magenta]: {text}")
        for name, t in r.thresholds.items():
            stdout.print(f"  {r.id}.{name} = {t.default:g} {t.unit}: {t.help}")
    return 0


_ARGV: list[str] = []


def current_argv() -> list[str]:
    """The arguments main() was called with (commands that must see a literal --)."""
    return _ARGV


def main(argv: list[str] | None = None) -> int:
    _ARGV[:] = sys.argv[1:] if argv is None else list(argv)
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="gpugap")
        return rv if isinstance(rv, int) else 0
    except GpugapError as exc:
        from gpugap.render.safe import MESSAGE_LIMIT, safe_text

        # One line whatever the message quotes (file names, report text): see render.safe.
        stderr.print(f"gpugap: error: {safe_text(exc, MESSAGE_LIMIT)}", soft_wrap=True,
                     markup=False, highlight=False)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        stderr.print("gpugap: aborted")
        return 130
    except Exception as exc:
        # Usage errors of the option parser (click's, or the one vendored by newer typer):
        # duck-typed so gpugap works with either.
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show(file=sys.stderr)
            return EXIT_USAGE
        raise


def _register_commands() -> None:
    import importlib
    import pkgutil

    from gpugap import commands

    for module in sorted(m.name for m in pkgutil.iter_modules(commands.__path__)):
        importlib.import_module(f"gpugap.commands.{module}")


_register_commands()
