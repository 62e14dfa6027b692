"""The gpugap command line: thin. Each command parses its options, calls the library,
renders the result and maps GpugapError to one line and an exit code (cli.app.main).

Exit codes (gpugap.errors): 0 done, 1 a gate/expectation failed, 2 bad usage or
unreadable input, 3 nsys missing/failing, 4 no CUDA activity in the report, 5 the
profiled program failed, 6 no GPU where one is needed, 7 some reports of a job could not
be analyzed, 8 out of memory, 9 an output the system failed to write, 130/143
interrupted (SIGINT/SIGTERM), 141 the reader closed stdout.

Importing this package is light: ``main`` installs the SIGINT/SIGTERM handlers first and
only then imports typer and the commands (rich when something is printed through it;
half a second, in which Ctrl-C used to be a KeyboardInterrupt traceback); ``app`` is
imported on first use.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any, NoReturn

from gpugap.cli import collector
from gpugap.cli.interrupt import Interrupted, interrupted_line, interruptible


def main(argv: list[str] | None = None) -> int:
    """The gpugap command (the console script and ``python -m gpugap``)."""
    collector.imports_begin()
    try:
        with interruptible():
            try:
                args = sys.argv[1:] if argv is None else argv
                _hold_memory(args)
                _read_ahead(args)
                _import_commands(args)
                from gpugap.cli.root import main as run_command

                return run_command(argv)
            except Interrupted as exc:  # before the command started, or as it returned
                print(interrupted_line(exc.signum), file=sys.stderr)
                return 128 + exc.signum
    finally:
        collector.command_end()


def entry() -> NoReturn:
    """The console script and ``python -m gpugap``: ``main``, then out of the process
    without the interpreter's teardown. Once the command has returned, its outputs are
    written and closed and stdout flushed (cli.root); what is left is freeing every
    object of the analysis one by one (a report of a million kernels: about 0.15 s, of
    ten million, seconds), which the system does at once. The exit handlers still run
    (logging's flush...), and with any thread still working (not a daemon) the exit is
    Python's usual one."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):          # cli.root has said what failed, if anything
        raise SystemExit(code) from None
    if any(t.is_alive() and not t.daemon and t is not threading.main_thread()
           for t in threading.enumerate()):
        raise SystemExit(code)
    atexit._run_exitfuncs()
    os._exit(code)


# A report this small (its exports together; 200k kernels with their API and OS calls
# take 60 MB, a million 300 MB) is analyzed with the memory it frees held for reuse
# (gpugap.memory.hold_freed): the peak grows by tens of megabytes, and the page faults
# of memory given back and taken again (a fifth of the CPU of a report of 200k kernels)
# go. Past it, the memory held would grow with the report for a few percent of time.
HOLD_MAX_BYTES = 256 << 20

# The commands of gpugap.cli.root; gpugap.cli.check (check, baseline, diff) and
# gpugap.cli.run (scenarios, run, profile) register the others as they are imported.
_ROOT_COMMANDS = ("analyze", "rules")


def _import_commands(args: list[str]) -> None:
    """Register the commands the command line may need: for ``gpugap analyze ...`` and
    ``gpugap rules ...`` cli.root's own, else all of them (the group's help lists them,
    a name is looked up among them). typer builds the options of every registered
    command on each run (their signatures and annotations: a tenth of a small report's
    run, with the modules' imports), for the one command that runs."""
    if not args or args[0] not in _ROOT_COMMANDS:
        from gpugap.cli import check, run  # noqa: F401  (each registers its commands)


def _exports(args: list[str]) -> list[str]:
    """The .sqlite exports an ``analyze`` or ``check`` command names, guessed from the raw
    arguments (the command itself checks them): what the start-up's speed-ups go by,
    which change how fast a command runs, never what it does."""
    if not args or args[0] not in ("analyze", "check"):
        return []
    return [a for a in args[1:] if a.endswith(".sqlite") and not a.startswith("-")]


def _hold_memory(args: list[str]) -> None:
    """Hold freed memory for reuse when the command's exports are under HOLD_MAX_BYTES
    together."""
    exports = _exports(args)
    try:
        small = bool(exports) and sum(os.path.getsize(a) for a in exports) < HOLD_MAX_BYTES
    except OSError:             # a missing file: the command says so
        return
    if small:
        from gpugap.memory import hold_freed

        hold_freed()


def _read_ahead(args: list[str]) -> None:
    """Start reading the report's big tables (gpugap.report.prefetch) before typer, rich
    and pandas are imported and the options parsed (about a second of one core, which
    the reading threads use on the other cores), when the command is ``analyze`` or
    ``check`` of exactly one .sqlite export (a report read ahead and not taken is
    dropped)."""
    exports = _exports(args)
    if len(exports) != 1:
        return

    # numpy (which the readers need) starts one OpenBLAS thread per core on import, and
    # gpugap does no linear algebra: one is enough. Only this process's import sees the
    # setting; programs that gpugap runs get the user's environment unchanged.
    given = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        from gpugap.report.prefetch import start

        start(exports[0])
        # Imported once the reads have started (gpugap.lazy): their threads step through
        # the first rows meanwhile. numpy.ma too, which numpy (2.3 on) imports on the
        # first np.unique, np.median or np.percentile, later, when no thread reads.
        import numpy  # noqa: F401
        import numpy.ma  # noqa: F401
    finally:
        if given is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = given


def __getattr__(name: str) -> Any:
    if name == "app":
        from gpugap.cli import check, run  # noqa: F401
        from gpugap.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "entry", "main"]
