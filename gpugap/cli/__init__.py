"""The gpugap command line: thin. Each command parses its options, calls the library,
renders the result and maps GpugapError to one line and an exit code (cli.app.main).

Exit codes: 0 done, 1 a gate/expectation failed, 2 bad usage or unreadable input,
3 nsys missing/failing, 4 no CUDA activity in the report, 5 the profiled program failed,
6 no GPU where one is needed, 7 some reports of a job could not be analyzed.
"""

from gpugap.cli import check, run  # noqa: F401  (each module registers its commands)
from gpugap.cli.root import app, main

__all__ = ["app", "main"]
