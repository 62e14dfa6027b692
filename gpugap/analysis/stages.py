"""The executor of an analysis's stages: what runs where, and the memory between them.

An analysis (gpugap.analysis.core) is a few named stages: the readings that only read
the trace and the accounting (each rule's detection, the metrics, the summaries, the
range table), forked over the cores a big report is worth (gpugap.forkjoin); then
settling, the rules' finishing and the verdict, each in order. The stages say what they
compute; this module alone runs them and gives the heap's freed pages back to the
system after each (gpugap.memory), so that a big report's peak does not grow by every
stage's freed batches in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from gpugap import forkjoin
from gpugap.memory import give_back

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Stages:
    """Runs an analysis's stages in up to *processes* processes (None: every core);
    *shared*: the objects the forked pieces' results may refer to, passed back by
    reference (forkjoin.run)."""

    def __init__(self, processes: int | None, shared: Sequence[object] = ()) -> None:
        self.processes = processes
        self.shared = shared

    def fork(self, pieces: Mapping[K, Callable[[], Any]]) -> dict[K, Any]:
        """Each named piece's result, by its name: independent pieces, run in any order
        on the processes allowed."""
        names = list(pieces)
        done = forkjoin.run([pieces[n] for n in names], shared=self.shared,
                            max_processes=self.processes)
        give_back()
        return dict(zip(names, done, strict=True))

    def ahead(self, pieces: Mapping[K, Callable[[], Any]]) -> Callable[[], dict[K, Any]]:
        """Start named pieces now, beside what this process does next, in a process of
        their own where the analysis may use more than one; what it returns gives their
        results by name (where nothing could be forked, computed then, here)."""
        names = list(pieces)
        if self.processes == 1:
            started = None
        else:
            started = forkjoin.ahead([pieces[n] for n in names], shared=self.shared)
        taken: list[dict[K, Any]] = []

        def take() -> dict[K, Any]:
            if not taken:
                done = (started.take() if started is not None
                        else [pieces[n]() for n in names])
                taken.append(dict(zip(names, done, strict=True)))
            return taken[0]
        return take

    def run(self, stage: Callable[..., T], *args: Any) -> T:
        """*stage*(*args*), here and now."""
        out = stage(*args)
        give_back()
        return out
