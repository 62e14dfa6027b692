"""gpugap.cli.entry: the console script leaves without the interpreter's teardown, and
nothing a user sees changes: the whole output, the exit code, the exit handlers."""

from __future__ import annotations

import json
import subprocess
import sys

REPORT = "tests/data/captures/gemm.sqlite"


def _entry(args: list[str], before: str = "") -> subprocess.CompletedProcess:
    code = (f"import sys\n{before}\nsys.argv = ['gpugap', *{args!r}]\n"
            "from gpugap.cli import entry\nentry()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


def test_the_whole_output_and_the_exit_code():
    done = _entry(["analyze", REPORT, "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["report"] == REPORT       # complete, parseable JSON
    bad = _entry(["analyze", "no-such-report.sqlite"])
    assert bad.returncode == 2
    assert "no such file" in bad.stderr


def test_exit_handlers_run():
    done = _entry(["analyze", REPORT, "--json"], before=(
        "import atexit\n"
        "atexit.register(lambda: print('handler ran', file=sys.stderr, flush=True))"))
    assert done.returncode == 0
    assert "handler ran" in done.stderr


def test_a_working_thread_gets_the_usual_exit():
    done = _entry(["analyze", REPORT, "--json"], before=(
        "import threading, time\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    print('thread finished', file=sys.stderr, flush=True)\n"
        "threading.Thread(target=late).start()"))
    assert done.returncode == 0
    assert "thread finished" in done.stderr
