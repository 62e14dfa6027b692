"""Errors a user can cause or fix, each with the exit code the CLI turns it into.

Every message is one line that names the problem and the fix. Tracebacks are for bugs.
"""

from __future__ import annotations

# Exit codes, documented in README.md.
EXIT_OK = 0
EXIT_FAILED = 1          # a gate or an expectation did not hold (check, run)
EXIT_USAGE = 2           # bad usage or unreadable input
EXIT_NSYS = 3            # nsys missing, too old, or failing
EXIT_NO_CUDA = 4         # the report holds no CUDA GPU activity to analyze
EXIT_PROGRAM = 5         # the profiled program failed (gpugap run)
EXIT_NO_GPU = 6          # no GPU / CUDA driver where one is needed (gpugap run)
EXIT_PARTIAL = 7         # some reports of a job could not be analyzed (the others were)


class GpugapError(Exception):
    """A problem with the user's input or environment, not a bug in gpugap."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(GpugapError):
    exit_code = EXIT_USAGE


class ReportError(GpugapError):
    """The input file is missing, unreadable, corrupt, or not an nsys export."""

    exit_code = EXIT_USAGE


class NsysError(GpugapError):
    """nsys is missing, too old for the report, or failed."""

    exit_code = EXIT_NSYS


class NoCudaActivity(GpugapError):
    """The report is a valid nsys export but holds no CUDA GPU activity."""

    exit_code = EXIT_NO_CUDA
