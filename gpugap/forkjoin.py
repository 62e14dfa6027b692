"""Independent pieces of one analysis run on the cores a machine has to spare.

An analysis has stages made of pieces that read the same trace and accounting and write
nothing another reads: the accounting's slices, then each rule's detection, the metrics
and the range table, then the settling of runs of blocks. ``run`` gives them to forked
processes as well as this one: a child sees everything as it was at the fork
(copy-on-write: nothing is sent to it), takes the next piece from a queue shared with
this process and its siblings (a pipe holding the pieces' numbers, so the busiest
process does not wait for a static share), and sends its results back pickled once the
queue is empty. Objects the caller names as shared (the trace, the accounting...)
travel by name, not by value: a result that refers to one gets this process's own.

The results are the same whichever process runs a piece, and when nothing can be
forked (one core, no ``fork``: macOS and Windows, GPUGAP_PROCESSES=1) the pieces run
here in order. A child that fails in any way (an exception, killed for memory, a result
that cannot be pickled) has its pieces run again here, so any error is raised here as a
run in one process raises it. Children ignore no signal of their own: Ctrl-C stops them
with their process group, and this process kills the children it still has whenever it
leaves ``run`` early.
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gpugap.memory import give_back_before_fork

# Numbers on the queue: two bytes each, and a read of two bytes from a pipe (less than
# PIPE_BUF) takes two whole bytes, so every piece is taken exactly once.
_WIDTH = 2
MAX_PIECES = 1 << (8 * _WIDTH)
# Set in a child: what it runs forks no further (the parent already uses every core).
_in_child = False


def processes() -> int:
    """How many processes ``run`` may use: the cores this process may run on, 1 without
    ``fork`` (or on macOS, where forking a process with threads is unsafe), in a child
    of ``run`` or with GPUGAP_PROCESSES=1; GPUGAP_PROCESSES=N caps it."""
    if _in_child or not hasattr(os, "fork") or sys.platform == "darwin":
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    cap = os.environ.get("GPUGAP_PROCESSES", "")
    if cap.strip().isdigit():
        cores = min(cores, max(int(cap), 1))
    return max(cores, 1)


def run(pieces: Sequence[Callable[[], Any]], shared: Sequence[object] = (),
        max_processes: int | None = None) -> list[Any]:
    """Each piece's result, in order, computed in up to *max_processes* processes (this
    one included; default: ``processes()``). *shared*: objects results may refer to,
    passed back by reference."""
    n = min(len(pieces), max_processes or processes(), processes())
    if n <= 1 or len(pieces) > MAX_PIECES:
        return [piece() for piece in pieces]
    queue_r, queue_w = os.pipe()
    os.write(queue_w, b"".join(i.to_bytes(_WIDTH, "little") for i in range(len(pieces))))
    os.close(queue_w)                    # once the queue is empty, reading it says so
    names = {id(obj): i for i, obj in enumerate(shared)}
    children: dict[int, int] = {}        # pid -> the read end of its results
    results: dict[int, Any] = {}
    try:
        _flush_streams()
        # The heap's free pages go before the fork, held or not: what either process
        # allocates then is a fresh page, not a copy of one the other still maps.
        give_back_before_fork()
        gc.freeze()         # a child's collections touch no object of this one's
        try:
            for _ in range(n - 1):
                out_r, out_w = os.pipe()
                try:
                    pid = os.fork()
                except Exception:   # noqa: BLE001 - no process to spare (EAGAIN, ENOMEM,
                    # a warning made an error): the processes there are do the work.
                    os.close(out_r)
                    os.close(out_w)
                    break
                if pid == 0:                                     # the child
                    os.close(out_r)
                    _child(pieces, queue_r, out_w, names)        # never returns
                os.close(out_w)
                children[pid] = out_r
        finally:
            gc.unfreeze()
        while (i := _take(queue_r)) is not None:
            results[i] = pieces[i]()
        for pid, out_r in list(children.items()):
            results.update(_collect(out_r, pid, shared))
            del children[pid]
    finally:
        os.close(queue_r)
        for pid, out_r in children.items():     # left early: an error or an interrupt
            _kill(pid)
            try:
                os.close(out_r)
            except OSError:
                pass
    # Pieces a failed child had taken run here, in order.
    return [results[i] if i in results else pieces[i]() for i in range(len(pieces))]


class Ahead:
    """Pieces started in one forked process beside this one (``ahead``); ``take()``
    returns their results in order, once. A child never taken is killed with this
    object."""

    def __init__(self, pieces: Sequence[Callable[[], Any]], shared: Sequence[object],
                 pid: int | None, out_r: int | None) -> None:
        self.pieces, self.shared, self.pid, self.out_r = pieces, shared, pid, out_r
        self._results: list[Any] | None = None

    def take(self) -> list[Any]:
        if self._results is None:
            done: dict[int, Any] = {}
            if self.pid is not None and self.out_r is not None:
                pid, out_r, self.pid, self.out_r = self.pid, self.out_r, None, None
                done = _collect(out_r, pid, self.shared)
            self._results = [done[i] if i in done else piece()
                             for i, piece in enumerate(self.pieces)]
        return self._results

    def __del__(self) -> None:
        if self.pid is not None:
            _kill(self.pid)
        if self.out_r is not None:
            try:
                os.close(self.out_r)
            except OSError:
                pass


def ahead(pieces: Sequence[Callable[[], Any]], shared: Sequence[object] = ()) -> Ahead:
    """Start *pieces* now, in order, in one forked process beside this one, which goes
    on meanwhile: pieces that need nothing this process computes next (the whole
    report's metrics and range table, while it builds the program model and the
    accounting on one core). ``take()`` on the result gives their results; where
    nothing can be forked, or the child fails, the pieces run here when taken."""
    if processes() <= 1 or not pieces or len(pieces) > MAX_PIECES:
        return Ahead(pieces, shared, None, None)
    queue_r, queue_w = os.pipe()
    os.write(queue_w, b"".join(i.to_bytes(_WIDTH, "little") for i in range(len(pieces))))
    os.close(queue_w)
    names = {id(obj): i for i, obj in enumerate(shared)}
    _flush_streams()
    give_back_before_fork()
    gc.freeze()
    out_r, out_w = os.pipe()
    try:
        pid = os.fork()
    except Exception:   # noqa: BLE001 - no process to spare: the pieces run when taken
        os.close(out_r)
        os.close(out_w)
        os.close(queue_r)
        gc.unfreeze()
        return Ahead(pieces, shared, None, None)
    if pid == 0:                                     # the child
        os.close(out_r)
        _child(pieces, queue_r, out_w, names)        # never returns
    gc.unfreeze()
    os.close(out_w)
    os.close(queue_r)
    return Ahead(pieces, shared, pid, out_r)


def _flush_streams() -> None:
    """Flush stdout and stderr before a fork: nothing buffered is written twice."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _take(queue_r: int) -> int | None:
    data = os.read(queue_r, _WIDTH)
    return int.from_bytes(data, "little") if len(data) == _WIDTH else None


def _child(pieces: Sequence[Callable[[], Any]], queue_r: int, out_w: int,
           names: dict[int, int]) -> None:
    global _in_child
    _in_child = True
    code = 1
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        # Fresh streams: another thread of the parent may have held the old ones' locks
        # at the fork.
        sys.stdout = io.TextIOWrapper(io.FileIO(os.dup(1), "w"), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(os.dup(2), "w"), write_through=True)
        done: dict[int, Any] = {}
        while (i := _take(queue_r)) is not None:
            try:
                done[i] = pieces[i]()
            except Exception:       # noqa: BLE001 - the parent runs it again and raises
                break
        # Streamed: no second copy of the results (arrays of millions of rows) here or
        # in the parent, which reads as this writes.
        with os.fdopen(out_w, "wb") as out:
            _Pickler(out, names).dump(done)
        code = 0
    finally:
        os._exit(code)


class _Pickler(pickle.Pickler):
    def __init__(self, file, names: dict[int, int]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = names

    def persistent_id(self, obj: object) -> int | None:
        return self.names.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, shared: Sequence[object]) -> None:
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: int) -> object:
        return self.shared[pid]


def _collect(out_r: int, pid: int, shared: Sequence[object]) -> dict[int, Any]:
    """A child's results ({} when it failed: its pieces are then run again here)."""
    try:
        with os.fdopen(out_r, "rb", closefd=False) as f:
            done = _Unpickler(f, shared).load()
    except Exception:               # noqa: BLE001 - cut short or not picklable: run again here
        done = {}
    os.close(out_r)
    _, status = os.waitpid(pid, 0)
    return done if status == 0 else {}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def worker_pool(max_workers: int, preload: Sequence[str] = ()) -> Any:
    """A concurrent.futures pool of *max_workers* worker processes for independent jobs
    (one report each: gpugap.analysis.job). Where the platform has one, its workers fork
    from a server process started clean for them (multiprocessing's 'forkserver', the
    modules *preload* imported there once), never from this one: a thread of this
    process inside SQLite or a C library when it forked (a Dask worker thread, a read
    ahead) would leave that library's lock held in the child, whose first read of its
    report then waits forever. ``run`` above forks this process itself: its pieces only
    compute on what the parent has read."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return ProcessPoolExecutor(max_workers=max_workers)
    context = multiprocessing.get_context("forkserver")
    if preload:
        context.set_forkserver_preload(list(preload))
    return ProcessPoolExecutor(max_workers=max_workers, mp_context=context)


T = TypeVar("T")


def beside(work: Callable[..., T], *args: Any, name: str = "gpugap-beside"
           ) -> Callable[[], T]:
    """Run ``work(*args)`` in a thread beside this one (a read in SQLite, which lets
    this thread go on meanwhile) and return what waits for it: its result, or what it
    raised. The caller takes the result before it forks or returns, so no such thread
    is alive (inside SQLite) when the analysis forks."""
    done: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            done.append((True, work(*args)))
        except BaseException as exc:          # noqa: BLE001 - raised where taken
            done.append((False, exc))

    thread = threading.Thread(target=run, daemon=True, name=name)
    thread.start()

    def take() -> T:
        thread.join()
        ok, value = done[0]
        if not ok:
            raise value
        return value
    return take
