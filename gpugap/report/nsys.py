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


def export_sqlite(nsys: Nsys, report: Path, output: Path, timeout: float = 3600) -> None:
    """``nsys export --type sqlite`` of *report* to *output*. nsys writes *output* itself
    (following a symlink there), so it must be a path in a directory only this user can
    write: gpugap's cache exports into a fresh temporary directory
    (gpugap.report.resolve_sqlite), ``gpugap run`` into its own output directory."""
    cmd = [nsys.path, "export", "--type", "sqlite", "--force-overwrite", "true",
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


def profile_command(nsys: Nsys, output_base: Path, program: Sequence[str],
                    trace: str = "cuda,nvtx,osrt,cublas", graph_trace: str = "graph"
                    ) -> list[str]:
    """The nsys command line gpugap profiles with: CUDA, NVTX, OS runtime and cuBLAS
    tracing, CUDA graphs traced per *graph_trace* (GRAPH_TRACE_MODES), CPU sampling and
    context switches off, exporting SQLite alongside."""
    return [nsys.path, "profile", "-t", trace, f"--cuda-graph-trace={graph_trace}",
            "--sample=none", "--cpuctxsw=none", "--export=sqlite", "--force-overwrite=true",
            "-o", str(output_base), *program]
