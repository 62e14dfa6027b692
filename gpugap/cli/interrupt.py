"""Ctrl-C and SIGTERM: one line and exit 128 + the signal, from the command's first
instant. Light (the standard library only until a signal arrives): the gpugap command
installs these handlers before it imports typer, rich and its commands, which takes half
a second in which a signal used to be a KeyboardInterrupt traceback or a silent death."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived. A BaseException, so that no ``except Exception`` takes
    it and typer does not turn it into a silent exit 130 as it does KeyboardInterrupt;
    ``finally`` blocks still run (temporary files go)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise Interrupted in the main thread while gpugap runs; the
    handlers before are given back."""
    try:
        before = {s: signal.signal(s, _interrupted) for s in _SIGNALS}
    except ValueError:                  # not the main thread: leave signals alone
        before = {}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def interrupted_line(signum: int) -> str:
    """`gpugap: interrupted`, and the outputs asked for that were not written (an output
    is written whole or not at all: no partial file is left)."""
    from gpugap.files import pending_outputs
    from gpugap.text import MESSAGE_LIMIT, safe_text

    missing = pending_outputs()
    line = f"gpugap: interrupted ({signal.Signals(signum).name})"
    if missing:
        line += "; not written: " + ", ".join(str(p) for p in missing)
    return safe_text(line, MESSAGE_LIMIT)
