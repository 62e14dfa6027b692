"""Profiling programs under nsys, and the canned scenarios checked against their expected
diagnosis. The library behind ``gpugap run`` and ``gpugap scenarios``.

A run directory holds, per variant: ``<variant>.nsys-rep``, ``<variant>.sqlite``,
``<variant>.analysis.json``, ``<variant>.result.json`` (the scenario's own numbers),
``<variant>.log`` (the program's output), plus ``manifest.json`` (GPU, driver, CUDA,
torch, cuda-python and nsys versions, the exact commands) and ``summary.json``.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpugap import __version__
from gpugap.accounting import metrics
from gpugap.accounting import ranges as nvtx_ranges
from gpugap.analysis import Analysis, Analyzer, analyze, no_cuda_reason
from gpugap.errors import (
    EXIT_NO_CUDA,
    EXIT_NO_GPU,
    EXIT_NSYS,
    EXIT_PROGRAM,
    GpugapError,
    NsysError,
    UsageError,
    option,
)
from gpugap.files import is_input, probe_writable, write_atomic
from gpugap.jsonout import dumps
from gpugap.report import load_sqlite
from gpugap.report.nsys import Nsys, export_sqlite, profile_command
from gpugap.report.trace import Trace
from gpugap.text import one_line

Step = Callable[[str], None]   # progress callback: describes what is happening now


@dataclass
class ScenarioCheck:
    """One expectation of a profiled run (a scenario's numerical check, a finding or a
    metric bound) and whether the run met it; not gpugap.ci.gates.Check, the gates of
    ``gpugap check``."""

    what: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "passed": self.passed, "detail": self.detail}


@dataclass
class ProfiledRun:
    """One program profiled, exported and analyzed."""

    label: str
    command: list[str]
    report: Path | None = None
    sqlite: Path | None = None
    log: Path | None = None
    program_rc: int | None = None
    program_tail: str = ""
    wall_s: float = 0.0
    analysis: Analysis | None = None
    trace: Trace | None = None
    result: dict[str, Any] | None = None       # a scenario's own results
    checks: list[ScenarioCheck] = field(default_factory=list)
    error: str | None = None
    exit_code: int = 0
    scoped: dict[str, Analysis] = field(default_factory=dict)   # NVTX range -> analysis

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "command": self.command,
                "report": str(self.report) if self.report else None,
                "sqlite": str(self.sqlite) if self.sqlite else None,
                "log": str(self.log) if self.log else None,
                "program_exit_code": self.program_rc, "wall_s": round(self.wall_s, 3),
                "result": self.result, "passed": self.passed, "error": self.error,
                "checks": [c.to_dict() for c in self.checks]}


# What nsys itself prints around the program's output (2023.4 to 2025.x, and the older
# .qdrep era): its progress, the files it writes (a line that is only a report's path is
# taken for its 'Generated:' list), and a warning of every CPU-only run.
NSYS_NOISE = re.compile(
    r"(Collecting data\.\.\.|Processing events\.\.\.|Creating final output files\.\.\."
    r"|Generating '[^']*'|Generated:|Saving temporary \S.*|Saved report file to \S.*"
    r"|Report file moved to \S.*|(Processing|Exporting|Importing) \[.*"
    r"|\[\d+/\d+\] \[.*|\S*/\S+\.(nsys-rep|qdrep|qdstrm|sqlite)"
    r"|The target application returned non-zero exit code \d+"
    r"|WARNING: CUDA graph-level trace requires .*|Changing to node-level trace\.)")
PROGRAM_TAIL_LINES = 10


def is_nsys_noise(line: str) -> bool:
    """True for a line nsys printed around the program's (see NSYS_NOISE)."""
    return NSYS_NOISE.fullmatch(line.strip()) is not None


def program_tail(output: str, lines: int = PROGRAM_TAIL_LINES) -> str:
    """The last *lines* non-blank lines the program printed (stdout and stderr, as nsys
    passed them on), without nsys's own; progress redrawn with carriage returns counts
    as separate lines."""
    kept = [line.rstrip() for line in output.splitlines()
            if line.strip() and not is_nsys_noise(line)]
    return "\n".join(kept[-lines:])


def shell_join(argv: Sequence[str]) -> str:
    """*argv* as one would type it in a POSIX shell: shlex.join, except that an argument
    holding single quotes (python -c "print('x')") goes in double quotes when nothing in
    it is special there."""
    def quote(arg: str) -> str:
        if "'" in arg and not re.search(r'["$`\\!]', arg):
            return f'"{arg}"'
        return shlex.quote(arg)

    return " ".join(quote(a) for a in argv)


# What nsys prints when it fails itself (its agent, the launcher), not the program: the
# start of its message, as 2023.4 to 2025.x word it ("Connection to Agent lost. This is
# most likely a bug. Internal reason: 'End of file'." when its agent died).
NSYS_FAILURE = re.compile(r"(Connection to Agent lost|Agent launcher failed|Connection "
                          r"refused$|.*This is most likely a bug|FATAL ERROR:)")
NSYS_LINES_QUOTED = 3


def nsys_failure_lines(output: str, lines: int = NSYS_LINES_QUOTED) -> list[str]:
    """nsys's own failure message in *output* (what it and the program printed): the
    last lines that read as nsys failing (NSYS_FAILURE; consecutive ones are one
    message), at most *lines*; never the program's lines around them, nor nsys's
    pointer to its docs; [] when nsys said no such thing."""
    text = [line.strip() for line in output.splitlines() if line.strip()]
    failing = [bool(NSYS_FAILURE.match(line)) for line in text]
    if not any(failing):
        return []
    last = len(failing) - 1 - failing[::-1].index(True)
    first = last
    while first > 0 and failing[first - 1]:
        first -= 1
    return [one_line(line) for line in text[first:last + 1][-lines:]]


def no_report_failure(nsys: Nsys, label: str, rc: int, output: str, log: Path | None
                      ) -> NsysError:
    """Why nsys wrote no report for a program it started: nsys failed itself (exit 3),
    quoting its own message, never the program's output around it. A program that
    exits non-zero or dies of a signal still gets its report (measured with nsys 2023.4
    and 2025.3.1), so nsys's exit code here is not the program's; whether the program
    ran at all is unknown (nsys's agent may die before or after starting it)."""
    said = nsys_failure_lines(output)
    if said:
        what = (f"nsys {nsys.version} failed and wrote no report (nsys exit code {rc}): "
                + " / ".join(f'"{line}"' for line in said))
    else:
        last = [one_line(line) for line in output.splitlines() if line.strip()][-2:]
        what = (f"nsys {nsys.version} exited with code {rc} and wrote no report"
                + (f"; the last lines under it: {' / '.join(last)}" if last else
                   ", printing nothing"))
    return NsysError(f"{what}; whether {label} ran, and how it ended, is unknown; all "
                     f"output is in {log}; run it again, and if nsys fails again try "
                     f"another Nsight Systems with {option('nsys')}")


def _last_lines(run: ProfiledRun) -> str:
    if not run.program_tail:
        return "it printed nothing"
    return "its last lines:\n" + "\n".join(f"  {line}" for line in
                                             run.program_tail.splitlines())


def check_out_dir(path: Path, force: bool) -> None:
    """Before any work: UsageError (exit 2) unless *path* can be the output directory:
    not a file, empty (or *force*), and it, or the nearest directory above it that
    exists, takes a new file. Creates nothing."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path} exists and is not a directory; choose another "
                         f"{option('out')}")
    if path.is_dir() and any(path.iterdir()):
        if not force:
            raise UsageError(f"{path} already holds output; pass {option('force')} to "
                             f"overwrite it or choose another {option('out')}")
    existing = next(p for p in (path, *path.absolute().parents) if os.path.lexists(p))
    if not existing.is_dir():
        raise UsageError(f"cannot create {path}: {existing} is not a directory; choose "
                         f"another {option('out')}")
    probe_writable(path, existing)


def ensure_empty_dir(path: Path, force: bool) -> Path:
    """Create *path*; refuse (exit 2) if it holds files, unless *force*."""
    check_out_dir(path, force)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path} ({exc.strerror}); choose another "
                         f"{option('out')}") from None
    return path


# What a profiled run writes beside its base name, and once per run directory.
RUN_SUFFIXES = (".nsys-rep", ".sqlite", ".log", ".analysis.json", ".result.json", ".qdstrm")
RUN_FILES = ("manifest.json", "summary.json", "timeline.html")


def refuse_inputs(out_bases: Sequence[Path], program: Sequence[str]) -> None:
    """UsageError (exit 2) when a file a run would write is a file the program's command
    line names (its script, its data): --out --force may replace earlier output, never
    an input."""
    inputs = [Path(a) for a in program if a and os.path.lexists(a)]
    if not inputs:
        return
    outputs = [target.parent / name for target in out_bases for name in RUN_FILES]
    for base in out_bases:
        outputs += [p for s in RUN_SUFFIXES for p in (base.with_suffix(s), Path(f"{base}{s}"))]
    for out in outputs:
        source = is_input(out, inputs)
        if source is not None:
            raise UsageError(f"the run would write {out}, which is the input {source} of "
                             f"the command; choose another {option('out')}")


def require_gpu() -> None:
    """Scenarios need an NVIDIA GPU and driver: say so plainly when there is none."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise GpugapError("no CUDA driver here (libcuda.so.1 cannot be loaded): the "
                          "scenarios need an NVIDIA GPU; run them on a GPU machine, or "
                          "analyze the committed reports with gpugap analyze",
                          exit_code=EXIT_NO_GPU) from None


def profile(nsys: Nsys, out_base: Path, program: Sequence[str], *, label: str,
            env: dict[str, str] | None = None, echo: bool = False,
            timeout: float | None = None, step: Step | None = None,
            graph_trace: str = "graph", host_evidence: bool = True) -> ProfiledRun:
    """Profile *program* under nsys into out_base.nsys-rep, export out_base.sqlite, and
    analyze it. Failures of nsys raise; a failing program is recorded, not raised.
    *host_evidence*: record what the host ran (CPU samples, for Python the GIL and
    Python stacks: gpugap.report.nsys.host_evidence_flags)."""
    run = ProfiledRun(label=label, command=profile_command(nsys, out_base, program,
                                                           graph_trace=graph_trace,
                                                           host_evidence=host_evidence))
    run.command = [c for c in run.command if c != "--export=sqlite"]
    run.log = out_base.with_suffix(".log")
    started = time.perf_counter()
    if step:
        step(f"profiling {label}")
    with run.log.open("w", encoding="utf-8", errors="replace") as log:
        try:
            proc = subprocess.Popen(run.command, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        except OSError as exc:
            raise NsysError(f"cannot start nsys at {nsys.path} ({exc.strerror}); "
                            f"pass a working one with {option('nsys')}") from None
        captured = []
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            captured.append(line)
            if echo and not is_nsys_noise(line):
                sys.stdout.write(line)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise GpugapError(f"{label} did not finish within {timeout:g} s under nsys; "
                              f"raise {option('timeout')} or shorten the program",
                              exit_code=EXIT_PROGRAM) from None
    run.wall_s = time.perf_counter() - started
    output = "".join(captured)
    run.program_tail = program_tail(output)
    # nsys exits with the program's own exit code (128 + N for a signal) when it wrote a
    # report; without one the code is nsys's own (no_report_failure).
    run.program_rc = proc.returncode
    rep = out_base.with_suffix(".nsys-rep")
    if not rep.is_file():
        if "Executable not found" in output:
            raise UsageError(f"{program[0]}: program not found; check the command after --")
        if re.search(r"^Not executable\s*$", output, re.M):
            raise UsageError(f"{program[0]}: not an executable program (nsys: \"Not "
                             "executable\"); check the command after --, or run a script "
                             "with its interpreter (python3 script.py)")
        raw = [p for p in [out_base.with_suffix(".qdstrm"),
                           *map(Path, re.findall(r"'([^']+\.qdstrm)'", output))] if p.is_file()]
        if raw or "importer" in output.lower():
            where = f", raw data left in {raw[-1]}" if raw else ""
            raise NsysError(
                f"nsys {nsys.version} recorded {label} but could not turn the raw capture "
                f"into a report (its QdstrmImporter failed{where}); see {run.log}; on "
                "NVIDIA's own images put a libdw.so.1 on LD_LIBRARY_PATH")
        raise no_report_failure(nsys, label, proc.returncode, output, run.log)
    run.report = rep
    if step:
        step(f"exporting {label} to SQLite")
    sqlite = out_base.with_suffix(".sqlite")
    export_sqlite(nsys, rep, sqlite, include_blobs=host_evidence)
    run.sqlite = sqlite
    if step:
        step(f"analyzing {label}")
    run.trace = load_sqlite(sqlite)
    run.analysis = analyze(run.trace, require_gpu=False)
    write_json(out_base.with_suffix(".analysis.json"), run.analysis.to_dict())
    if run.program_rc != 0:
        run.error = (f"{label} exited with code {run.program_rc} under the profiler; "
                     f"{_last_lines(run)}")
        run.exit_code = EXIT_PROGRAM
    elif run.analysis.status == "no-cuda-activity":
        run.error = run.analysis.error or no_cuda_reason(run.trace)
        launched = "could not trace" in run.error
        run.exit_code = EXIT_NSYS if launched else EXIT_NO_CUDA
    return run


# --- scenarios ----------------------------------------------------------------------
def evaluate(variant_spec: Any, analysis: Analysis, trace: Trace,
             result: dict[str, Any] | None,
             scoped: dict[str, Analysis] | None = None) -> list[ScenarioCheck]:
    """A variant's expected diagnosis against what gpugap finds in each expectation's
    NVTX range (the analysis of that range: ``gpugap analyze --range NAME``). The
    analyses of the ranges are left in *scoped* when given."""
    checks: list[ScenarioCheck] = []
    if result is not None:
        checks.append(ScenarioCheck("numerical check", bool(result.get("check_ok")),
                            str(result.get("check", "no result"))))
    analyzer = Analyzer(trace, thresholds=analysis.thresholds)
    scoped_runs: dict[str, Analysis | UsageError] = {}
    for exp in variant_spec.expect:
        if exp.range not in scoped_runs:
            try:
                scoped_runs[exp.range] = analyzer.analyze(exp.range, require_gpu=False)
                if scoped is not None:
                    scoped[exp.range] = scoped_runs[exp.range]
            except UsageError as exc:
                scoped_runs[exp.range] = exc
        found = scoped_runs[exp.range]
        if isinstance(found, UsageError):
            checks.append(ScenarioCheck(exp.describe(), False, str(found)))
            continue
        hits = [f for f in found.findings
                if f.rule == exp.rule and (exp.cause is None or f.cause == exp.cause)
                and (exp.severity is None or f.severity == exp.severity)]
        ok = bool(hits) == exp.fire
        detail = (f"{len(hits)} finding(s): " + "; ".join(
            f"{f.rule}/{f.cause} {f.severity} cost {f.cost_ns / 1e6:.3g} ms" for f in hits[:3])
            if hits else "no such finding")
        checks.append(ScenarioCheck(exp.describe(), ok, detail))
    for bound in variant_spec.bounds:
        try:
            m = metrics.compute(trace, nvtx_ranges.window(trace, bound.range))
        except UsageError as exc:
            checks.append(ScenarioCheck(bound.describe(), False, str(exc)))
            continue
        value = getattr(m, bound.metric)
        ok = value is not None and (bound.min is None or value >= bound.min) and \
            (bound.max is None or value <= bound.max)
        checks.append(ScenarioCheck(bound.describe(), ok, f"{bound.metric} = {value}"))
    return checks


def run_scenario(scenario: Any, variant: str, out_dir: Path, nsys: Nsys, *,
                 step: Step | None = None, timeout: float | None = None) -> ProfiledRun:
    base = out_dir / variant
    result_file = out_dir / f"{variant}.result.json"
    # gpugap.scenarios is part of the installed package (wheel or editable), so the same
    # interpreter finds it without any PYTHONPATH.
    program = [sys.executable, "-m", f"gpugap.scenarios.{scenario.module}",
               "--variant", variant, "--result", str(result_file)]
    # A scenario's check reads CUDA calls and GPU work only: its timings stay those of
    # a capture without sampling.
    run = profile(nsys, base, program, label=f"{scenario.name}/{variant}",
                  step=step, timeout=timeout, host_evidence=False)
    if result_file.is_file():
        run.result = json.loads(result_file.read_text())
    if run.analysis is not None and run.trace is not None and run.error is None:
        run.checks = evaluate(scenario.variants[variant], run.analysis, run.trace, run.result,
                              run.scoped)
    return run


def environment_manifest(nsys: Nsys, python: str = sys.executable) -> dict[str, Any]:
    """Versions of what a run depended on (best effort: missing pieces are None)."""
    def query(cmd: list[str]) -> str | None:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None

    gpu = query(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    probe = ("import json, importlib.metadata as m\n"
             "def v(n):\n"
             "    try: return m.version(n)\n"
             "    except Exception: return None\n"
             "out = {k: v(k) for k in ('torch', 'cuda-python', 'cuda-core', 'cuda-bindings',"
             " 'nvtx', 'numpy')}\n"
             "try:\n    import torch; out['torch_cuda'] = torch.version.cuda\n"
             "except Exception: out['torch_cuda'] = None\n"
             "print(json.dumps(out))")
    packages = query([python, "-c", probe])
    cuda_driver = re.search(r"CUDA Version:\s*([\d.]+)", query(["nvidia-smi"]) or "")
    here = Path(__file__).resolve().parent.parent
    commit = os.environ.get("GPUGAP_COMMIT") or query(["git", "-C", str(here), "rev-parse",
                                                       "--short", "HEAD"])
    return {
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": gpu.split(",")[0].strip() if gpu else None,
        "driver": gpu.split(",")[1].strip() if gpu and "," in gpu else None,
        "cuda_driver_api": cuda_driver.group(1) if cuda_driver else None,
        "gpugap": {"version": __version__, "commit": commit},
        "nsys": {"path": nsys.path, "version": nsys.version},
        "python": sys.version.split()[0],
        "packages": json.loads(packages) if packages else None,
    }


def write_json(path: Path, document: Any) -> None:
    write_atomic(path, dumps(document) + "\n", force=True)


def default_out(root: Path, name: str) -> Path:
    """root/name/TIMESTAMP, a directory no earlier run used (TIMESTAMP-2, -3... when
    runs start within the same second)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = root / name / stamp, 2
    while os.path.lexists(path):
        path, n = root / name / f"{stamp}-{n}", n + 1
    return path


__all__ = ["ScenarioCheck", "ProfiledRun", "check_out_dir", "default_out", "ensure_empty_dir",
           "environment_manifest", "evaluate", "no_report_failure", "nsys_failure_lines",
           "profile", "program_tail", "refuse_inputs", "require_gpu", "run_scenario",
           "shell_join", "write_json"]
