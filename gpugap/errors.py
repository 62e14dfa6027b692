"""Errors a user can cause or fix, each with the exit code the CLI turns it into.

Every message is one line that names the problem and the fix. Tracebacks are for bugs.
"""

from __future__ import annotations

import errno
import re

# Exit codes, documented in README.md.
EXIT_OK = 0
EXIT_FAILED = 1          # a gate or an expectation did not hold (check, run)
EXIT_USAGE = 2           # bad usage or unreadable input
EXIT_NSYS = 3            # nsys missing, too old, or failing
EXIT_NO_CUDA = 4         # the report holds no CUDA GPU activity to analyze
EXIT_PROGRAM = 5         # the profiled program failed (gpugap run)
EXIT_NO_GPU = 6          # no GPU / CUDA driver where one is needed (gpugap run)
EXIT_PARTIAL = 7         # some reports of a job could not be analyzed (the others were)
EXIT_MEMORY = 8          # the machine ran out of memory (the stage is named)
EXIT_WRITE = 9           # an output could not be written: disk full, I/O error, quota
EXIT_PIPE_CLOSED = 141   # the reader closed stdout early (`| head`): 128 + SIGPIPE, as shells


# Options a message can tell the user to pass, spelled for each audience: the command line
# names a flag, Python a keyword argument of gpugap.load/analyze/... A message names one
# with option("force"); str(error) then reads "pass force=True" and error.cli_message()
# "pass --force", so library errors speak Python and the CLI's speak flags.
OPTIONS: dict[str, tuple[str, str]] = {
    "force": ("--force", "force=True"),
    "nsys": ("--nsys PATH", "nsys='PATH'"),
    "range": ("--range NAME", "range='NAME'"),
    "iteration": ("--iteration NAME", "iteration='NAME'"),
    "thresholds": ("--set RULE.NAME=VALUE", "thresholds={'RULE': {'NAME': VALUE}}"),
    "out": ("--out DIR", "out='DIR'"),
    "timeout": ("--timeout SECONDS", "timeout=SECONDS"),
    "svg": ("--svg FILE", "an SVG (svg='FILE')"),
    "allow-missing": ("--allow-missing", "allow_missing=True"),
    "allow-lost-gpu-data": ("--allow-lost-gpu-data", "allow_lost_gpu_data=True"),
    "scheduler": ("--scheduler ADDRESS", "scheduler='ADDRESS'"),
    "scheduler-timeout": ("--scheduler-timeout SECONDS", "scheduler_timeout=SECONDS"),
    "config": ("--config FILE", "config='FILE'"),
}
_MARK = "\x1f"                 # ASCII unit separator: never in a message otherwise
_OPTION = re.compile(f"{_MARK}([a-z-]+){_MARK}")


def option(name: str) -> str:
    """*name* (a key of OPTIONS) in a message, spelled by whoever shows the message."""
    if name not in OPTIONS:
        raise KeyError(name)
    return f"{_MARK}{name}{_MARK}"


def _spell(message: str, cli: bool) -> str:
    return _OPTION.sub(lambda m: OPTIONS[m[1]][0 if cli else 1], message)


class GpugapError(Exception):
    """A problem with the user's input or environment, not a bug in gpugap.

    ``str(error)`` is the message for Python callers; ``cli_message()`` the same for the
    command line (options named as flags: see :func:`option`)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return _spell(super().__str__(), cli=False)

    def cli_message(self) -> str:
        return _spell(super().__str__(), cli=True)


class UsageError(GpugapError, ValueError):
    """A bad option or argument value; also a ValueError, as Python callers expect of a
    bad argument."""

    exit_code = EXIT_USAGE


class ReportError(GpugapError):
    """The input file is missing, unreadable, corrupt, or not an nsys export."""

    exit_code = EXIT_USAGE


class WriteError(GpugapError):
    """The system failed a write that was allowed: a full disk, an I/O error, a quota
    (not the user's request, which is a UsageError: an existing file, a missing dir)."""

    exit_code = EXIT_WRITE


# The errnos of a write the system failed, as opposed to one it refused.
WRITE_FAILED_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG})


class NsysError(GpugapError):
    """nsys is missing, too old for the report, or failed."""

    exit_code = EXIT_NSYS


class NoCudaActivity(GpugapError):
    """The report is a valid nsys export but holds no CUDA GPU activity."""

    exit_code = EXIT_NO_CUDA
