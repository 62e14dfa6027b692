"""gpugap.cli.entry: the console script leaves without the interpreter's teardown, and
nothing a user sees changes: the whole output, the exit code, the exit handlers."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

REPORT = "tests/data/captures/gemm.sqlite"


def _entry(args: list[str], before: str = "") -> subprocess.CompletedProcess:
    code = (f"import sys\n{before}\nsys.argv = ['gpugap', *{args!r}]\n"
            "from gpugap.cli import entry\nentry()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_the_whole_output_and_the_exit_code():
    done = _entry(["analyze", REPORT, "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["report"] == REPORT       # complete, parseable JSON
    bad = _entry(["analyze", "no-such-report.sqlite"])
    assert bad.returncode == 2
    assert "no such file" in bad.stderr


@pytest.mark.slow
def test_exit_handlers_run():
    done = _entry(["analyze", REPORT, "--json"], before=(
        "import atexit\n"
        "atexit.register(lambda: print('handler ran', file=sys.stderr, flush=True))"))
    assert done.returncode == 0
    assert "handler ran" in done.stderr


@pytest.mark.slow
def test_a_working_thread_gets_the_usual_exit():
    done = _entry(["analyze", REPORT, "--json"], before=(
        "import threading, time\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    print('thread finished', file=sys.stderr, flush=True)\n"
        "threading.Thread(target=late).start()"))
    assert done.returncode == 0
    assert "thread finished" in done.stderr


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_small_report_is_analyzed_with_freed_memory_held():
    """The command holds freed memory for reuse (gpugap.memory.hold_freed) for reports
    under cli.HOLD_MAX_BYTES, a bigger one keeps glibc's own settings; the output is
    the same."""
    outputs = {}
    for limit in ("1 << 30", "0"):
        done = _run("import sys, gpugap.cli as cli, gpugap.memory as memory\n"
                    f"cli.HOLD_MAX_BYTES = {limit}\n"
                    f"code = cli.main(['analyze', '--json', '--no-config', {REPORT!r}])\n"
                    "print('held', memory._held, file=sys.stderr)\n"
                    "sys.exit(code)\n")
        assert done.returncode == 0, done.stderr
        outputs[limit] = done.stdout
        assert f"held {limit != '0'}" in done.stderr
    assert outputs["0"] == outputs["1 << 30"]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_memory_held_is_not_given_back():
    done = _run("import gpugap.memory as memory\n"
                "trims = []\n"
                "memory._malloc_trim = lambda: trims.append\n"
                "memory.give_back()\n"
                "assert trims == [0], trims\n"
                "assert memory.hold_freed()\n"
                "memory.give_back()\n"
                "assert trims == [0], trims\n")
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_the_collector_runs_during_the_work_and_is_left_as_it_was():
    """No collection while the command imports; the collector runs from the command's
    work on (what the imports made frozen out of its way) and is left as main found it,
    nothing frozen."""
    done = _run("import gc, sys, gpugap.cli as cli, gpugap.cli.root as root\n"
                "load, seen = root.load_trace, []\n"
                "def loading(*a):\n"
                "    seen.append((gc.isenabled(), gc.get_freeze_count() > 0))\n"
                "    return load(*a)\n"
                "root.load_trace = loading\n"
                f"args = ['analyze', '--json', '--no-config', {REPORT!r}]\n"
                "assert cli.main(args) == 0\n"
                "assert gc.isenabled() and gc.get_freeze_count() == 0\n"
                "gc.disable()\n"
                "assert cli.main(args) == 0\n"
                "assert not gc.isenabled() and gc.get_freeze_count() == 0\n"
                "assert seen == [(True, True), (False, True)], seen\n")
    assert done.returncode == 0, done.stderr
