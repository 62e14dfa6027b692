"""gpugap.forkjoin: pieces of work on forked processes, results as if run in order here.

Real processes throughout (os.fork), no mocks: a child's failures are made by the
pieces themselves (raising, exiting, returning what cannot be pickled) when they find
they run in a child."""

from __future__ import annotations

import os
import time

import pytest

from gpugap import forkjoin
from gpugap.analysis import analyze, core
from gpugap.jsonout import dumps
from gpugap.report.loader import load

pytestmark = pytest.mark.skipif(forkjoin.processes() < 2,
                                reason="needs fork and two cores (CI has both)")

HERE = os.getpid()


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)           # long enough that both processes take pieces
    return os.getpid()


def _no_children_left() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_results_in_order_from_more_than_one_process():
    pieces = [lambda i=i: (i, _pid_after(0.05)) for i in range(8)]
    out = forkjoin.run(pieces)
    assert [i for i, _ in out] == list(range(8))
    pids = {pid for _, pid in out}
    assert HERE in pids and len(pids) >= 2       # this process took some, a child others
    assert _no_children_left()


def test_one_process_runs_everything_here():
    out = forkjoin.run([lambda: _pid_after(0.01) for _ in range(4)], max_processes=1)
    assert out == [HERE] * 4


def test_environment_caps_the_processes(monkeypatch):
    monkeypatch.setenv("GPUGAP_PROCESSES", "1")
    assert forkjoin.processes() == 1
    assert forkjoin.run([lambda: _pid_after(0.01) for _ in range(4)]) == [HERE] * 4


def test_shared_objects_come_back_as_this_processes_own():
    big = {"trace": list(range(1000))}
    out = forkjoin.run([lambda: [big, _pid_after(0.05)] for _ in range(6)], shared=[big])
    assert any(pid != HERE for _, pid in out)
    assert all(obj is big for obj, _ in out)


def _fails_in_a_child(how: str):
    def piece():
        time.sleep(0.05)
        if os.getpid() != HERE:
            if how == "raise":
                raise RuntimeError("only in a child")
            if how == "exit":
                os._exit(137)               # as if killed for memory
            if how == "unpicklable":
                return lambda: None
        return "done here"
    return piece


@pytest.mark.parametrize("how", ["raise", "exit", "unpicklable"])
def test_a_failed_childs_pieces_run_again_here(how):
    out = forkjoin.run([_fails_in_a_child(how) for _ in range(6)])
    assert out == ["done here"] * 6
    assert _no_children_left()


def test_an_error_is_raised_here_as_in_one_process():
    def bad():
        time.sleep(0.05)
        raise ValueError("bad piece")
    with pytest.raises(ValueError, match="bad piece"):
        forkjoin.run([bad for _ in range(4)])
    assert _no_children_left()


def test_forked_analysis_gives_the_same_answers(monkeypatch, tmp_path):
    """Every piece after the accounting forked (the threshold lowered to every report),
    on a one-GPU and a two-GPU capture (per-device metrics as pieces of their own): the
    JSON equals the one-process analysis byte for byte."""
    from_children = []
    collect = forkjoin._collect

    def counted(*args):
        done = collect(*args)
        from_children.append(len(done))
        return done

    monkeypatch.setattr(forkjoin, "_collect", counted)
    for name in ("gemm.sqlite", "ddp-overlap.sqlite"):
        trace = load(f"tests/data/captures/{name}")
        monkeypatch.setattr(core, "FORK_MIN_OPS", 1 << 62)
        alone = dumps(analyze(trace).to_dict())
        monkeypatch.setattr(core, "FORK_MIN_OPS", 0)
        forked = dumps(analyze(trace).to_dict())
        assert forked == alone
    assert sum(from_children) > 0           # some pieces' results came from a child
    assert _no_children_left()


def test_a_child_forks_no_further():
    def nested():
        time.sleep(0.05)
        return os.getpid(), forkjoin.processes()
    out = forkjoin.run([nested for _ in range(6)])
    assert {n for pid, n in out if pid != HERE} == {1}
    assert {n for pid, n in out if pid == HERE} == {forkjoin.processes()}


def test_no_process_to_spare_runs_everything_here(monkeypatch):
    """os.fork failing (EAGAIN under a process limit: made to fail here, as no real run
    can be made to hit the limit on demand) leaves the pieces to this process."""
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")
    monkeypatch.setattr(os, "fork", no_fork)
    assert forkjoin.run([lambda: _pid_after(0.01) for _ in range(4)]) == [HERE] * 4


def test_pieces_ahead_run_beside_this_process_and_are_taken_later():
    """forkjoin.ahead starts its pieces in a child at once; this process goes on, and
    take() gives their results in order (a child's), once; a child that fails has its
    pieces run here; one never taken is killed with its handle."""
    started = time.perf_counter()
    early = forkjoin.ahead([lambda i=i: (i, _pid_after(0.2)) for i in range(2)])
    assert time.perf_counter() - started < 0.2          # this process did not wait
    out = early.take()
    assert [i for i, _ in out] == [0, 1] and {pid for _, pid in out} - {HERE}
    assert early.take() is out and _no_children_left()
    failed = forkjoin.ahead([_fails_in_a_child("exit") for _ in range(3)])
    assert failed.take() == ["done here"] * 3 and _no_children_left()
    dropped = forkjoin.ahead([lambda: _pid_after(5.0)])
    del dropped
    assert _no_children_left()


def test_whole_report_readings_ahead_give_the_same_answers(monkeypatch):
    """The whole report's metrics and range table computed ahead, in a child beside the
    accounting (core.Analyzer on a report past FORK_MIN_OPS): the JSON equals the
    one-process analysis byte for byte, and a --range analysis computes its own."""
    trace = load("tests/data/captures/ddp-overlap.sqlite")
    monkeypatch.setattr(core, "FORK_MIN_OPS", 1 << 62)
    alone = dumps(analyze(trace).to_dict())
    ranged = dumps(analyze(trace, range_name="step N").to_dict())
    monkeypatch.setattr(core, "FORK_MIN_OPS", 0)
    analyzer = core.Analyzer(trace)
    assert analyzer._early is not None
    assert dumps(analyzer.analyze(range_name="step N").to_dict()) == ranged
    assert dumps(analyzer.analyze().to_dict()) == alone
    assert _no_children_left()
