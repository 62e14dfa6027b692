"""Finding and driving NVIDIA Nsight Systems (nsys): version, export, profile.

nsys is looked up in this order: an explicit path (``--nsys``), ``$GPUGAP_NSYS``, ``PATH``,
then the places installers put it (Nsight Systems, the CUDA toolkit, the copy inside
Nsight Compute, Debian's package, gpugap's CI prefix).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpugap.errors import GpugapError, NsysError, ReportError, option
from gpugap.text import one_line

# Newest first within each pattern; patterns in order of preference.
INSTALL_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    "/usr/local/cuda*/nsight-systems-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys",
    "/usr/lib/nsight-systems/target-linux-x64/nsys",
    "/opt/gpugap-nsys/target-linux-x64/nsys",
)

_VERSION_RE = re.compile(r"(\d{4}\.\d+(?:\.\d+)*)")


@dataclass(frozen=True)
class Nsys:
    path: str
    version: str  # e.g. "2025.3.1.0"

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return version_tuple(self.version)


def version_tuple(version: str | None) -> tuple[int, ...]:
    if not version:
        return ()
    return tuple(int(x) for x in re.findall(r"\d+", version.split("-")[0])[:4])


def _version_key(path: str) -> tuple[int, ...]:
    match = _VERSION_RE.search(path)
    return version_tuple(match.group(1)) if match else ()


def candidates(explicit: str | None = None) -> list[tuple[str, str]]:
    """(path, where it came from) in lookup order; paths may not exist."""
    found: list[tuple[str, str]] = []
    if explicit:
        return [(explicit, "--nsys")]
    env = os.environ.get("GPUGAP_NSYS")
    if env:
        return [(env, "$GPUGAP_NSYS")]
    on_path = shutil.which("nsys")
    if on_path:
        found.append((on_path, "PATH"))
    for pattern in INSTALL_GLOBS:
        for path in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            found.append((path, "install dir"))
    return found


def probe_version(path: str, timeout: float = 60) -> str:
    """``nsys --version`` -> "2025.3.1.0"; raises NsysError if it does not run."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NsysError(f"nsys at {path} does not run ({exc}); "
                        f"pass a working one with {option('nsys')} or $GPUGAP_NSYS") from None
    match = _VERSION_RE.search(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not match:
        detail = [one_line(ln) for ln in (proc.stderr or proc.stdout).strip().splitlines()[-1:]
                  ] or ["no output"]
        raise NsysError(f"nsys at {path} failed to report its version ({detail[0]}); "
                        f"pass a working one with {option('nsys')} or $GPUGAP_NSYS")
    return match.group(1)


def find_nsys(explicit: str | None = None) -> Nsys:
    """The nsys to use, or NsysError naming where gpugap looked and how to fix it."""
    tried = []
    for path, origin in candidates(explicit):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            if origin != "install dir":
                raise NsysError(f"nsys given by {origin} is not an executable file: {path}; "
                                "fix the path or unset it to search PATH")
            continue
        tried.append(path)
        try:
            return Nsys(path=path, version=probe_version(path))
        except NsysError:
            if origin != "install dir":
                raise
    raise NsysError(
        "nsys (NVIDIA Nsight Systems) not found on PATH or in the usual install dirs"
        + (f" (tried {', '.join(tried)})" if tried else "")
        + f"; install Nsight Systems, or pass {option('nsys')} / set GPUGAP_NSYS"
        + " (a .sqlite export needs no nsys)")


# Messages nsys prints on failure, mapped to what the user should do.
_EXPORT_FAILURES = (
    (re.compile(r"Protobuf|Invalid version prefix|Unsupported.*version|newer version", re.I),
     "was written by a newer Nsight Systems than nsys {version} at {path} can read; "
     "export it with the nsys that recorded it (nsys export --type sqlite REPORT) "
     f"or pass a newer one with {option('nsys')}", NsysError),
    (re.compile(r"Cannot read from stream|magic number|Section Table|corrupt|truncat", re.I),
     "is not a readable .nsys-rep (truncated or corrupt); re-run the capture or copy the "
     "file again", ReportError),
)


def export_sqlite(nsys: Nsys, report: Path, output: Path, timeout: float = 3600, *,
                  include_blobs: bool = False) -> None:
    """``nsys export --type sqlite`` of *report* to *output*. nsys writes *output* itself
    (following a symlink there), so it must be a path in a directory only this user can
    write: gpugap's cache exports into a fresh temporary directory
    (gpugap.report.resolve_sqlite), ``gpugap run`` into its own output directory.
    *include_blobs*: keep NVTX payloads (the Python samples' stacks), where this nsys
    can (``--include-blobs``, newer than 2023.4)."""
    blobs = ["--include-blobs=true"] if include_blobs and "--include-blobs" in \
        help_text(nsys, "export") else []
    cmd = [nsys.path, "export", "--type", "sqlite", "--force-overwrite", "true", *blobs,
           "--output", str(output), str(report)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NsysError(f"nsys export of {report} did not finish ({exc}); "
                        "check the nsys installation or export the report by hand") from None
    if proc.returncode == 0 and output.is_file() and output.stat().st_size > 0:
        return
    text = (proc.stderr + "\n" + proc.stdout).strip()
    error_class: type[GpugapError]
    for pattern, advice, error_class in _EXPORT_FAILURES:
        if pattern.search(text):
            raise error_class(f"{report} " + advice.format(version=nsys.version, path=nsys.path))
    last = next((one_line(ln) for ln in reversed(text.splitlines()) if ln.strip()),
                f"exit code {proc.returncode}")
    raise NsysError(f"nsys {nsys.version} could not export {report}: {last}; "
                    "export it by hand with nsys export --type sqlite, or try a newer nsys")


# How CUDA graphs are traced, and why gpugap chooses graph by default.
GRAPH_TRACE_MODES = {
    "graph": ("each replay of a CUDA graph is one GPU operation: the least overhead, and "
              "the timing of the graph as it runs unprofiled; gpugap accounts it as CUDA-"
              "graph work (pass --cuda-graph-trace node to see the kernels inside)"),
    "node": ("every kernel inside a CUDA graph is traced, attributed to its replay: shows "
             "what a graph runs, but adds overhead per node (a 50-kernel graph replay "
             "measured 21% slower here: 144 us against 119 us)"),
}


_HELP: dict[tuple[str, str], str] = {}


def help_text(nsys: Nsys, command: str, timeout: float = 60) -> str:
    """``nsys COMMAND --help`` (what options this nsys takes), read once per nsys; ''
    when it does not run."""
    key = (nsys.path, command)
    if key not in _HELP:
        try:
            proc = subprocess.run([nsys.path, command, "--help"], capture_output=True,
                                  text=True, timeout=timeout, check=False)
            _HELP[key] = proc.stdout + proc.stderr
        except (OSError, subprocess.TimeoutExpired):
            _HELP[key] = ""
    return _HELP[key]


# What the host did while the GPU idled, recorded by default (docs/profiling.md says
# what it costs): CPU samples with frame-pointer backtraces of every process of the
# tree (DataLoader workers included) and their context switches; for a Python program
# the GIL trace and Python stacks, sampled at 1 kHz and at each CUDA call.
HOST_SAMPLING = ("--sample=process-tree", "--backtrace=fp", "--cpuctxsw=process-tree")
HOST_PYTHON = ("--python-sampling=true", "--python-sampling-frequency=1000",
               "--python-backtrace=cuda")
HOST_OFF = ("--sample=none", "--cpuctxsw=none")
PYTHON_PROGRAM = re.compile(r"(^|/)(python[\d.]*|pypy[\d.]*)$|\.py$")


def is_python_program(program: Sequence[str]) -> bool:
    """Does *program* run Python (an interpreter, or a script run directly)?"""
    return bool(program) and (bool(PYTHON_PROGRAM.search(program[0])) or any(
        PYTHON_PROGRAM.search(a) for a in program[:1]))


def host_evidence_flags(nsys: Nsys, python: bool) -> tuple[list[str], list[str]]:
    """(the options that record the host's evidence, the trace kinds to add), those of
    HOST_SAMPLING / HOST_PYTHON and python-gil that this nsys takes (``nsys profile
    --help``); an option it does not know is left out, and CPU sampling stays off
    (HOST_OFF) when it takes none of them."""
    text = help_text(nsys, "profile")

    def takes(flag: str) -> bool:
        return flag.split("=")[0] + "=" in text

    flags = [f for f in HOST_SAMPLING if takes(f)]
    if not any(f.startswith("--sample=") for f in flags):
        return list(HOST_OFF), []
    traces = []
    if python:
        flags += [f for f in HOST_PYTHON if takes(f)]
        if "python-gil" in text:
            traces.append("python-gil")
    return flags, traces


def profile_command(nsys: Nsys, output_base: Path, program: Sequence[str],
                    trace: str = "cuda,nvtx,osrt,cublas", graph_trace: str = "graph",
                    host_evidence: bool = False) -> list[str]:
    """The nsys command line gpugap profiles with: CUDA, NVTX, OS runtime and cuBLAS
    tracing, CUDA graphs traced per *graph_trace* (GRAPH_TRACE_MODES), exporting SQLite
    alongside; with *host_evidence*, what the host ran (host_evidence_flags, as far as
    this nsys and the program allow), else CPU sampling and context switches off."""
    sampling, traces = (host_evidence_flags(nsys, is_python_program(program))
                        if host_evidence else (list(HOST_OFF), []))
    return [nsys.path, "profile", "-t", ",".join([trace, *traces]),
            f"--cuda-graph-trace={graph_trace}", *sampling, "--export=sqlite",
            "--force-overwrite=true", "-o", str(output_base), *program]
