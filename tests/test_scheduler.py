"""--scheduler: addresses checked before any report is read, and whatever answers at one
checked before any work is sent, each in one line within the timeout. The listeners are
real sockets on 127.0.0.1 (a closed port, an HTTP server, a silent listener, one that
sends garbage); a real Dask scheduler answering is tests/test_job.py's
test_dask_cluster_gives_the_same_job_byte_for_byte."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from gpugap.analysis.scheduler import check_address
from gpugap.cli import main
from gpugap.errors import EXIT_USAGE, UsageError
from tests.conftest import DATA

RANKS = DATA / "captures" / "ranks"


def analyze_on(capsys, address: str, *extra: str) -> tuple[int, str, float]:
    began = time.monotonic()
    code = main(["analyze", str(RANKS), "--scheduler", address, *extra])
    out, err = capsys.readouterr()
    assert out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpugap: error: "), err
    return code, lines[0], time.monotonic() - began


@pytest.mark.parametrize(("address", "said"), [
    ("notaurl", "needs a host and a port"),
    ("http://127.0.0.1:8786", "scheme 'http'"),
    ("tcp://127.0.0.1", "needs a host and a port"),
    ("tcp://127.0.0.1:99999", "bad port"),
    ("tcp://127.0.0.1:0", "out of range"),
    ("tcp://127.0.0.1:8786/path", "nothing after them"),
    # found by tests/test_fuzz.py: these reached the connection (a name lookup for what
    # is no name) or lost a part without a word
    ("tcp://127.0.0.1:8786#x", "nothing after them"),
    ("tcp://a b:8786", "'a b' is not a host name"),
    ("tcp://%41:8786", "not a host name"),
    ("tcp://999.1.1.1:8786", "not an IPv4 address"),
    ("tcp://sched\nuler:8786", "control character"),
])
def test_malformed_addresses_are_refused_before_any_work(capsys, address, said):
    code, line, _ = analyze_on(capsys, address)
    assert code == EXIT_USAGE and said in line and "tcp://HOST:PORT" in line


def test_well_formed_addresses_pass():
    assert check_address("tcp://10.0.0.5:8786") == ("tcp", "10.0.0.5", 8786)
    assert check_address("scheduler:8786") == ("tcp", "scheduler", 8786)
    assert check_address("tls://[::1]:8786") == ("tls", "::1", 8786)
    assert check_address("tcp://[fe80::1%eth0]:8786") == ("tcp", "fe80::1%eth0", 8786)
    assert check_address("tcp://dask_scheduler.svc:8786")[1] == "dask_scheduler.svc"
    assert check_address("tcp://h\u00f6st.example:8786")[1] == "h\u00f6st.example"
    with pytest.raises(UsageError):
        check_address("ftp://host:21")


def test_a_scheme_this_distributed_cannot_speak_is_one_line(capsys):
    """ucx://: distributed 2025 keeps a ucx backend whose connector cannot be made
    (found by tests/test_fuzz.py's address fuzzer: a TypeError traceback from Client)."""
    pytest.importorskip("distributed")
    from distributed.comm.registry import get_backend

    try:
        get_backend("ucx").get_connector()
    except Exception:                   # noqa: BLE001 - the case this test is about
        code, line, took = analyze_on(capsys, "ucx://127.0.0.1:5",
                                      "--scheduler-timeout", "0.5")
        assert code == EXIT_USAGE and "cannot connect to ucx:// addresses" in line
        assert "tcp://" in line and took < 15
    else:
        pytest.skip("this dask.distributed has a working ucx comm (distributed-ucxx)")


def test_closed_port(capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]          # bound, never listening: refused
        code, line, took = analyze_on(capsys, f"tcp://127.0.0.1:{port}")
    assert code == EXIT_USAGE and "cannot reach" in line and took < 15


def test_a_host_name_is_resolved_then_reached(capsys):
    """The real resolver, then the connection to what it gave: 'localhost' on a port
    bound but not listening is refused."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        code, line, took = analyze_on(capsys, f"tcp://localhost:{port}")
    assert code == EXIT_USAGE and "cannot reach" in line and took < 15


def test_a_name_server_that_never_answers_is_bounded_by_the_timeout(capsys, monkeypatch):
    """The system's resolver takes no timeout: a name server that does not answer held
    the probe through its own retries (tens of seconds), whatever --scheduler-timeout
    said. No real run hangs a resolver on demand, so a stand-in resolver that never
    returns (within the test) takes getaddrinfo's place."""
    release = threading.Event()

    def hanging_getaddrinfo(*args, **kwargs):
        release.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hanging_getaddrinfo)
    try:
        code, line, took = analyze_on(capsys, "tcp://scheduler.example:8786",
                                      "--scheduler-timeout", "0.5")
    finally:
        release.set()
    assert code == EXIT_USAGE and took < 5
    assert "'scheduler.example' did not resolve in 0.5 s" in line
    assert "--scheduler-timeout" in line


@pytest.mark.slow
def test_http_server_is_not_a_scheduler(capsys):
    class Quiet(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass
    server = HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code, line, took = analyze_on(capsys, f"tcp://127.0.0.1:{server.server_port}",
                                      "--scheduler-timeout", "1")
    finally:
        server.shutdown()
        server.server_close()
    assert code == EXIT_USAGE and "said nothing in 1 s" in line and took < 15


@pytest.mark.slow
def test_silent_listener(capsys):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        code, line, took = analyze_on(capsys, f"tcp://127.0.0.1:{listener.getsockname()[1]}",
                                      "--scheduler-timeout", "1")
    assert code == EXIT_USAGE and "not a Dask scheduler" in line and took < 15


def test_garbage_answer_is_not_read_as_a_frame(capsys):
    """Eight bytes that would ask for exabytes as a frame length."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer():
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"\xff" * 64)
            time.sleep(0.5)
    threading.Thread(target=answer, daemon=True).start()
    with listener:
        code, line, took = analyze_on(capsys, f"tcp://127.0.0.1:{listener.getsockname()[1]}")
    assert code == EXIT_USAGE and "is not a Dask scheduler" in line and took < 15


def test_a_real_scheduler_passes_the_probe():
    """A real Dask scheduler over TCP (no workers: the probe reads its handshake only)."""
    import asyncio

    import distributed

    from gpugap.analysis.scheduler import probe

    async def probed() -> None:
        async with distributed.Scheduler(port=0, dashboard_address=None) as scheduler:
            await asyncio.get_running_loop().run_in_executor(
                None, probe, scheduler.address, 5.0)
    asyncio.run(probed())
