"""`gpugap scenarios`, `gpugap run` (the canned scenarios, or any program after --) and
`gpugap profile CMD...`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from gpugap.cli.root import JsonOpt, NsysOpt, app, current_argv, stderr, stdout
from gpugap.errors import EXIT_FAILED, UsageError

OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="output directory (default: reports/SCENARIO/TIMESTAMP; after --, "
                  "reports/PROGRAM/TIMESTAMP)", metavar="DIR")]
ProfileOutOpt = Annotated[Path | None, typer.Option(
    "--out", help="output directory (default: reports/PROGRAM/TIMESTAMP, a new one each "
                  "time)", metavar="DIR")]
ForceOpt = Annotated[bool, typer.Option("--force", help="overwrite existing output")]
TimeoutOpt = Annotated[float | None, typer.Option("--timeout", help="seconds a program may "
                                                  "run under the profiler",
                                                  metavar="SECONDS")]
GraphTraceOpt = Annotated[str, typer.Option(
    "--cuda-graph-trace", help="how nsys traces CUDA graphs: graph (default: one operation "
    "per replay, least overhead) or node (every kernel inside, with overhead)",
    metavar="graph|node")]
NoHostOpt = Annotated[bool, typer.Option(
    "--no-host-evidence", help="record no CPU samples, GIL trace or Python stacks (by "
    "default they are, to say what the host ran while the GPU idled; docs/profiling.md "
    "gives the overhead)")]


@contextmanager
def progress() -> Iterator[Callable[[str], None]]:
    """Yields a step(description) callback: a rich spinner for humans on a terminal,
    plain lines on stderr otherwise (CI logs)."""
    if stderr.is_terminal:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=stderr, transient=True) as bar:
            task = bar.add_task("starting", total=None)
            yield lambda text: bar.update(task, description=text)
    else:
        yield lambda text: stderr.print(f"gpugap: {text}", markup=False, soft_wrap=True,
                                        highlight=False)


@app.command("scenarios", short_help="List the canned scenarios.")
def list_scenarios(json_: JsonOpt = False) -> int:
    """List the canned scenarios: seed puzzle, variants, what to look for."""
    from gpugap import scenarios

    suite = scenarios.all_scenarios()
    if json_:
        from gpugap.jsonout import dumps
        from gpugap.render.documents import scenarios_document

        stdout.out(dumps(scenarios_document(suite)))
        return 0
    from rich.table import Table

    table = Table(title="gpugap scenarios", show_lines=True)
    for col in ("scenario", "seed", "variants", "look for"):
        table.add_column(col)
    for s in suite:
        variants = "\n".join(f"[bold]{v.name}[/bold]: {v.summary}" for v in s.variants.values())
        table.add_row(f"[bold]{s.name}[/bold]\n{s.title}", s.seed, variants, s.look_for)
    stdout.print(table)
    stdout.print("Run one: gpugap run SCENARIO [--variant bad|good|all]; standalone: "
                 "python -m gpugap.scenarios.<module> --variant bad")
    return 0


def _resolve(names: list[str], run_all: bool) -> list[Any]:
    from gpugap import scenarios

    if run_all:
        if names:
            raise UsageError("give scenario names or --all, not both")
        return scenarios.all_scenarios()
    if not names:
        raise UsageError("name a scenario (gpugap run --list lists them), pass --all, or "
                         "give a program after --")
    out = []
    for name in names:
        if name.startswith("-"):
            # An option of no command here (unknown options pass through to reach a
            # program after --): not a scenario's name.
            raise UsageError(f"no such option: {name}; see gpugap run --help (to profile "
                             "a program with options, put it after --)")
        try:
            out.append(scenarios.get(name))
        except KeyError:
            known = ", ".join(s.name for s in scenarios.all_scenarios())
            raise UsageError(f"unknown scenario '{name}'; scenarios: {known} "
                             "(to profile a program, put it after --)") from None
    return out


@app.command("run", context_settings={"allow_extra_args": True,
                                      "ignore_unknown_options": True},
             short_help="Profile scenarios and check their diagnosis.")
def run_command(
    names: Annotated[list[str] | None, typer.Argument(
        help="scenario names, or after -- a program and its arguments",
        metavar="SCENARIO")] = None,
    run_all: Annotated[bool, typer.Option("--all", help="every scenario")] = False,
    list_: Annotated[bool, typer.Option("--list", help="list the scenarios and exit (as "
                                        "gpugap scenarios)")] = False,
    variant: Annotated[str, typer.Option(help="bad, good or all",
                                         metavar="bad|good|all")] = "all",
    out: OutOpt = None,
    nsys: NsysOpt = None,
    force: ForceOpt = False,
    json_: JsonOpt = False,
    timeout: TimeoutOpt = None,
    graph_trace: GraphTraceOpt = "graph",
    no_host_evidence: NoHostOpt = False,
) -> int:
    """Profile scenarios under nsys and check each against its expected diagnosis; or
    profile any program given after -- (same as gpugap profile)."""
    names = list(names or [])
    if _after_double_dash():
        return _profile_program(names, out, nsys, force, json_, timeout, graph_trace,
                                not no_host_evidence)
    if list_:
        if names or run_all:
            raise UsageError("--list lists every scenario; give no scenario names or --all "
                             "with it")
        return list_scenarios(json_)
    if variant not in ("bad", "good", "all"):
        raise UsageError(f"--variant must be bad, good or all, not '{variant}'")
    return _run_scenarios(_resolve(names, run_all), variant, out, nsys, force, json_, timeout)


@app.command("profile", context_settings={"allow_extra_args": True,
                                          "ignore_unknown_options": True})
def profile_command(
    program: Annotated[list[str], typer.Argument(help="the program and its arguments",
                                                 metavar="CMD")],
    out: ProfileOutOpt = None,
    nsys: NsysOpt = None,
    force: ForceOpt = False,
    json_: JsonOpt = False,
    timeout: TimeoutOpt = None,
    graph_trace: GraphTraceOpt = "graph",
    no_host_evidence: NoHostOpt = False,
) -> int:
    """Profile any program with gpugap's nsys settings and analyze it."""
    return _profile_program(list(program), out, nsys, force, json_, timeout, graph_trace,
                            not no_host_evidence)


def _after_double_dash() -> bool:
    argv = current_argv()
    return "--" in argv[argv.index("run") + 1:] if "run" in argv else False


def _profile_program(program: list[str], out: Path | None, nsys_path: str | None,
                     force: bool, json_: bool, timeout: float | None,
                     graph_trace: str = "graph", host_evidence: bool = True) -> int:
    from gpugap.jsonout import dumps
    from gpugap.render.terminal import render
    from gpugap.report.nsys import GRAPH_TRACE_MODES, find_nsys
    from gpugap.run.runner import (
        check_out_dir,
        default_out,
        ensure_empty_dir,
        environment_manifest,
        profile,
        refuse_inputs,
        shell_join,
        write_json,
    )

    if not program:
        raise UsageError("give the program to profile after --, e.g. "
                         "gpugap run -- python train.py")
    name = Path(program[0]).name.replace(".", "-") or "program"
    if name.startswith("python") and len(program) > 1 and not program[1].startswith("-"):
        name = Path(program[1]).stem          # python train.py -> train
    target = out or default_out(Path("reports"), name)
    refuse_inputs([target / name], program)
    check_out_dir(target, force)                    # before nsys is even looked for
    if graph_trace not in GRAPH_TRACE_MODES:
        raise UsageError(f"--cuda-graph-trace must be graph or node, not '{graph_trace}'")
    tool = find_nsys(nsys_path)
    target = ensure_empty_dir(target, force)
    stderr.print(f"gpugap: CUDA graphs traced per {graph_trace} (--cuda-graph-trace="
                 f"{graph_trace}): {GRAPH_TRACE_MODES[graph_trace]}", markup=False,
                 soft_wrap=True)
    label = shell_join(program)            # the command as typed
    with progress() as step:
        run = profile(tool, target / name, program, label=label, echo=not json_,
                      timeout=timeout, step=step, graph_trace=graph_trace,
                      host_evidence=host_evidence)
    manifest = environment_manifest(tool) | {
        "command": run.command, "program": program, "host_evidence": host_evidence,
        "cuda_graph_trace": {"mode": graph_trace, "why": GRAPH_TRACE_MODES[graph_trace]}}
    write_json(target / "manifest.json", manifest)
    if json_:
        from gpugap.render.documents import profile_document

        stdout.out(dumps(profile_document(run, str(target))))
    elif run.analysis is not None:
        render(run.analysis, stdout)
    written = (f"report {run.report}, its export, analysis and log beside it"
               if run.report else f"no report; the log is {run.log}")
    stderr.print(f"gpugap: program exit code {run.program_rc}; {written}", markup=False,
                 soft_wrap=True, highlight=False)
    if run.error:
        stderr.print(f"gpugap: error: {run.error}", markup=False, soft_wrap=True)
        return run.exit_code
    return 0


def _run_scenarios(suite: list[Any], variant: str, out: Path | None, nsys_path: str | None,
                   force: bool, json_: bool, timeout: float | None) -> int:
    from gpugap.jsonout import dumps
    from gpugap.report.nsys import find_nsys
    from gpugap.run.runner import (
        check_out_dir,
        default_out,
        ensure_empty_dir,
        environment_manifest,
        require_gpu,
        run_scenario,
        write_json,
    )

    targets = [out / s.name if out else default_out(Path("reports"), s.name) for s in suite]
    for target in targets:                          # every one, before any work
        check_out_dir(target, force)
    tool = find_nsys(nsys_path)
    require_gpu()
    variants = ["bad", "good"] if variant == "all" else [variant]
    env = environment_manifest(tool)
    results: list[tuple[Any, Path, dict[str, Any]]] = []
    with progress() as step:
        for scenario, target in zip(suite, targets, strict=True):
            target = ensure_empty_dir(target, force)
            runs = {}
            for v in variants:
                runs[v] = run_scenario(scenario, v, target, tool, step=step, timeout=timeout)
            write_json(target / "manifest.json", env | {
                "scenario": scenario.name, "seed": scenario.seed,
                "commands": {v: r.command for v, r in runs.items()}})
            write_json(target / "summary.json", {v: r.to_dict() for v, r in runs.items()})
            _write_timeline(target, scenario, runs)
            results.append((scenario, target, runs))
    passed = all(r.passed for _, _, runs in results for r in runs.values())
    if json_:
        from gpugap.render.documents import scenario_runs_document

        stdout.out(dumps(scenario_runs_document(passed, results)))
    else:
        from gpugap.render.scenarios import render_runs

        render_runs(results, stdout, gpu=env.get("gpu"))
    codes = [r.exit_code for _, _, runs in results for r in runs.values() if r.exit_code]
    if codes:
        for _, _, runs in results:
            for r in runs.values():
                if r.error:
                    stderr.print(f"gpugap: error: {r.error}", markup=False, soft_wrap=True)
        return codes[0]
    return 0 if passed else EXIT_FAILED


def _write_timeline(target: Path, scenario: Any, runs: dict[str, Any]) -> None:
    """bad above good on one time scale, when the HTML renderer is available."""
    try:
        from gpugap.render import html
    except ImportError:
        return
    panels = [(f"{scenario.name} {v}", r.trace, r.analysis) for v, r in runs.items()
              if r.trace is not None and r.analysis is not None]
    if panels and hasattr(html, "write_html"):
        try:
            html.write_html(panels, target / "timeline.html", title=f"gpugap: {scenario.name}")
        except Exception as exc:  # the timeline is a bonus: never lose the run over it
            from gpugap.text import MESSAGE_LIMIT, safe_text

            stderr.print(f"gpugap: warning: no timeline.html ({safe_text(exc, MESSAGE_LIMIT)})",
                         markup=False)

