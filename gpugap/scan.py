"""Rows worked through a batch at a time: the one place that says how many rows a batch
holds, when the memory of batches goes back to the system, and how independent pieces
are spread over forked processes. A rule (or any stage) says what it computes from some
rows; this module walks the rows.

A report holds millions of rows, and arrays over all of them, several at once, are
hundreds of megabytes: work on a batch of rows at a time keeps the working arrays a
few megabytes, however large the report. Batches are consecutive rows, in order:

- ``each(n, step)``: ``step(rows)`` for each batch (``rows`` a slice of 0..n-1), the
  results in order; *n* may also be batches already cut (``by_weight``).
- ``fill(n, values, dtype)``: one array of n values, each batch's written in place (no
  parts joined).
- ``fold(n, step, state)``: a sweep: ``state = step(rows, state)`` batch after batch,
  what a batch needs of those before it carried in *state*.
- ``reduceat(ufunc, values, n, starts)``: ``ufunc.reduceat`` over runs of rows that
  begin at *starts* and may cross batches (sums, minima, maxima per run).
- ``by_weight(weights)``: consecutive items cut into batches of about ROWS weight (runs
  of kernels by their lengths, windows by their pieces).
- ``spread(items, piece)``: a range of independent items cut into runs, each run a
  piece for gpugap.forkjoin (a few runs a process, so that one done early takes
  another).

Memory: once a scan is done, the C heap's free pages (its batches' arrays) go back to
the system (gpugap.memory.give_back; nothing where freed memory is held for reuse); with
``give_back=True`` also after every batch, for a scan whose results are kept between
the freed arrays of its batches.

The batch sizes are module settings, read when a scan starts: tests make them small to
show that batches change no answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import numpy as np
from numpy.typing import DTypeLike

from gpugap import forkjoin, memory

T = TypeVar("T")
S = TypeVar("S")

# Rows a batch: the working arrays of a batch are a few megabytes (tens of them for
# the widest steps), not hundreds.
ROWS = 1 << 18
# Rows a batch where the batches' float sums are part of an answer (small-grid sums
# each kernel's share of wall time per batch, then batch by batch): another size could
# change the last digits of a result past it. 2**18 since issue 38 (2**20 before: a
# million-kernel batch's arrays, 70 MB, were fresh pages to a forked process, a fifth of
# its time; the tiles of a million kernels answer the same, byte for byte, and no report
# of fewer kernels than this sees a change).
SUM_ROWS = 1 << 18
# Runs of a spread range per process (spread): a few each, so that a process done
# early takes another.
RUNS_PER_PROCESS = 4


def batches(n: int, rows: int | None = None) -> list[slice]:
    """Rows 0..n-1 in consecutive batches of *rows* (default ROWS), the last shorter."""
    size = rows or ROWS
    return [slice(lo, min(lo + size, n)) for lo in range(0, n, size)]


def by_weight(weights: np.ndarray, limit: int | None = None) -> list[slice]:
    """Consecutive items (0..len(weights)-1) in batches of at most about *limit*
    (default ROWS) of their *weights* together; an item heavier than that alone."""
    limit = limit or ROWS
    if weights.size == 0:
        return []
    cum = np.cumsum(weights)
    out, a = [], 0
    while a < weights.size:
        base = cum[a - 1] if a else 0
        b = max(int(np.searchsorted(cum, base + limit, side="right")), a + 1)
        out.append(slice(a, b))
        a = b
    return out


def _parts(n: int | Sequence[slice], rows: int | None) -> Sequence[slice]:
    return batches(n, rows) if isinstance(n, int) else n


def each(n: int | Sequence[slice], step: Callable[[slice], T], *, rows: int | None = None,
         give_back: bool = False) -> list[T]:
    """``step(batch)`` for each batch of rows 0..n-1 (or each of the batches *n*), the
    results in order. *give_back*: the memory freed by a batch goes back to the system
    after it (results kept between its arrays would otherwise hold them in the heap)."""
    out = []
    for part in _parts(n, rows):
        out.append(step(part))
        if give_back:
            memory.give_back()
    memory.give_back()
    return out


def fill(n: int, values: Callable[[slice], Any], dtype: DTypeLike, *,
         rows: int | None = None) -> np.ndarray:
    """An array of *n* values of *dtype*: ``values(batch)`` written in place for each
    batch."""
    out = np.empty(n, dtype=dtype)
    for part in batches(n, rows):
        out[part] = values(part)
    memory.give_back()
    return out


def fold(n: int, step: Callable[[slice, S], S], state: S, *,
         rows: int | None = None) -> S:
    """A sweep over rows 0..n-1: ``state = step(batch, state)`` for each batch in
    order; the last state."""
    for part in batches(n, rows):
        state = step(part, state)
    memory.give_back()
    return state


# What each ufunc starts from before the first batch of a run.
_START = {"add": 0, "minimum": (1 << 63) - 1, "maximum": -(1 << 63)}


def reduceat(ufunc: np.ufunc, values: Callable[[slice], np.ndarray], n: int,
             starts: np.ndarray, *, rows: int | None = None) -> np.ndarray:
    """``ufunc.reduceat(values(slice(0, n)), starts)`` in int64 (add, minimum or
    maximum), from ``values(batch)`` of a batch of rows at a time: runs begin at
    *starts* (strictly increasing from 0) and may cross batches, each batch's part of a
    run reduced on its own, then folded into the run's value."""
    out = np.full(starts.size, _START[ufunc.__name__], dtype=np.int64)
    for part in batches(n, rows):
        # The runs of this batch: the first, the one after the last, and where each
        # begins in the batch.
        j0 = int(np.searchsorted(starts, part.start, side="right")) - 1
        j1 = int(np.searchsorted(starts, part.stop, side="left"))
        cuts = np.r_[0, starts[j0 + 1:j1] - part.start]
        out[j0:j1] = ufunc(out[j0:j1], ufunc.reduceat(values(part), cuts, dtype=np.int64))
    memory.give_back()
    return out


def spread(items: range, piece: Callable[[range], T], *, shared: Sequence[object] = (),
           processes: int | None = None) -> list[T]:
    """``piece(run)`` for runs of *items* that together cover it, in order, on up to
    *processes* processes (gpugap.forkjoin; None: every core, 1: this one alone, in one
    run); *shared*: objects results refer to (forkjoin.run's)."""
    workers = min(forkjoin.processes(), processes or forkjoin.processes())
    n_runs = 1 if workers == 1 else max(min(len(items), RUNS_PER_PROCESS * workers), 1)
    cuts = [items.start + len(items) * i // n_runs for i in range(n_runs + 1)]
    runs = [range(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    return forkjoin.run([partial(piece, run) for run in runs], shared=shared,
                        max_processes=processes)
