"""The gpugap command line: thin. Each command parses its options, calls the library,
renders the result and maps GpugapError to one line and an exit code (cli.app.main).

Exit codes (gpugap.errors): 0 done, 1 a gate/expectation failed, 2 bad usage or
unreadable input, 3 nsys missing/failing, 4 no CUDA activity in the report, 5 the
profiled program failed, 6 no GPU where one is needed, 7 some reports of a job could not
be analyzed, 8 out of memory, 9 an output the system failed to write, 130/143
interrupted (SIGINT/SIGTERM), 141 the reader closed stdout.

Importing this package is light: ``main`` installs the SIGINT/SIGTERM handlers first and
only then imports typer, rich and the commands (half a second, in which Ctrl-C used to be
a KeyboardInterrupt traceback); ``app`` is imported on first use.
"""

from __future__ import annotations

import sys
from typing import Any

from gpugap.cli.interrupt import Interrupted, interrupted_line, interruptible


def main(argv: list[str] | None = None) -> int:
    """The gpugap command (the console script and ``python -m gpugap``)."""
    with interruptible():
        try:
            from gpugap.cli import check, run  # noqa: F401  (each registers its commands)
            from gpugap.cli.root import main as run_command

            return run_command(argv)
        except Interrupted as exc:      # before the command started, or as it returned
            print(interrupted_line(exc.signum), file=sys.stderr)
            return 128 + exc.signum


def __getattr__(name: str) -> Any:
    if name == "app":
        from gpugap.cli import check, run  # noqa: F401
        from gpugap.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main"]
