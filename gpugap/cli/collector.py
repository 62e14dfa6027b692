"""The command line's garbage collection.

A collection after every 10,000 allocations rather than 700: a command allocates many
small objects as it imports and analyzes, few of them in reference cycles, and the
collections Python's default makes find almost nothing (3% of a small report's CPU).
None at all while it imports: the modules, classes and functions made then live as long
as the process (collecting them cost 20 ms of a 200k-kernel report's run). The collector
starts with the command's work (``collect_from_here``), the imports' objects frozen out
of its way, and ``command_end`` leaves it as the command found it. Only the command line
sets any of this: the library leaves its caller's collector alone.
"""

from __future__ import annotations

import gc

GC_THRESHOLD = (10_000, 10, 10)
_collect = True         # whether the collector ran when the command began


def imports_begin() -> None:
    """The command begins: no collection while it imports."""
    global _collect
    gc.set_threshold(*GC_THRESHOLD)
    _collect = gc.isenabled()
    gc.disable()


def collect_from_here() -> None:
    """The command's imports are done: what they made is frozen out of the collector's
    way (gc.freeze), and the collector runs from here on if it ran when the command
    began."""
    gc.freeze()
    if _collect:
        gc.enable()


def command_end() -> None:
    """The command is done: its frozen objects collectable again (a caller's own
    collections see them), the collector as the command found it."""
    gc.unfreeze()
    if _collect:
        gc.enable()
