"""A Dask scheduler's address, checked before any report is read, and the scheduler
itself, checked before any work is sent: one line when something else answers.

``distributed.Client`` alone turns a mistyped address into a ValueError, meets an HTTP
server or a silent listener with a handshake that never ends (its timeout covers the
connection, not the first message), and reads the first eight bytes of whatever answers
as a frame length (garbage asked it for exabytes). A Dask scheduler speaks first: on
connection it sends its handshake, eight bytes of length (little-endian) and a msgpack
map naming its ``compression``, ``python`` and ``pickle-protocol``. :func:`probe` reads
exactly that, within a deadline, before the client connects.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
import threading
import time
from urllib.parse import urlsplit

from gpugap.errors import UsageError, option

DEFAULT_TIMEOUT_S = 10.0
# Schemes of distributed's comms that gpugap can reach; tls is checked as far as TCP (its
# handshake is encrypted); inproc (a cluster inside this process) is taken as given.
SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")
# A handshake is a few dozen bytes; more than this is not one.
_HANDSHAKE_MAX = 1 << 20
_HANDSHAKE_KEYS = (b"pickle-protocol", b"compression")


def check_address(address: str) -> tuple[str, str, int]:
    """(scheme, host, port) of *address* (``tcp://HOST:PORT``; a bare ``HOST:PORT`` is
    tcp, as distributed reads it); UsageError naming what is wrong otherwise."""
    text = address.strip()
    given = text if "://" in text else f"tcp://{text}"
    hint = "give the scheduler's address, tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786)"
    if given.startswith("inproc://"):        # a cluster inside this process (tests)
        return "inproc", given[len("inproc://"):], 0
    try:
        parts = urlsplit(given)
        port = parts.port
    except ValueError:
        raise UsageError(f"{address!r} is not a Dask scheduler address (bad port); {hint}") \
            from None
    if parts.scheme not in SCHEMES:
        raise UsageError(f"{address!r} is not a Dask scheduler address (scheme "
                         f"{parts.scheme or 'none'!r}; Dask's are {', '.join(SCHEMES)}); "
                         f"{hint}")
    if (not parts.hostname or port is None or parts.path not in ("", "/") or parts.query
            or parts.fragment or given.endswith(("?", "#"))):
        raise UsageError(f"{address!r} is not a Dask scheduler address (it needs a host and "
                         f"a port, nothing after them); {hint}")
    if not 0 < port < 65536:
        raise UsageError(f"{address!r}: port {port} is out of range (1-65535); {hint}")
    problem = _host_problem(parts.hostname, given)
    if problem:
        raise UsageError(f"{address!r} is not a Dask scheduler address (its host "
                         f"{parts.hostname!r} is {problem}); {hint}")
    return parts.scheme, parts.hostname, port


# A label of a host name: letters, digits and hyphens (RFC 1123), and the underscores of
# container and service names that resolvers accept.
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


def _host_problem(host: str, given: str) -> str | None:
    """What *host* is instead of an IP address or a host name (None if it is one);
    *given*: the address, whose control characters urlsplit drops without a word."""
    if any(c < " " or c == "\x7f" for c in given):
        return "broken by a control character"
    if ":" in host:                     # [v6] (with its %scope)
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return "not an IPv6 address"
        return "given an empty %scope" if host.endswith("%") else None
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return "not an IPv4 address"
        return None
    try:
        name = host.encode("idna").decode("ascii")
    except UnicodeError:
        return "not a host name"
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return "not a host name (letters, digits, hyphens and dots)"
    return None


def probe(address: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
    """Nothing if a Dask scheduler answers at *address* within *timeout* seconds (TCP
    schemes: its handshake is read and recognised; tls: the connection only); one
    UsageError line saying what answered, or that nothing did, otherwise."""
    scheme, host, port = check_address(address)
    if scheme not in ("tcp", "tls"):
        return
    deadline = time.monotonic() + timeout
    where = f"the Dask scheduler at {address}"
    try:
        found = _resolve(host, port, deadline)
    except TimeoutError:
        raise UsageError(f"the host name {host!r} did not resolve in {timeout:g} s; check "
                         "the address and this machine's name service (or give the "
                         "scheduler's IP address, or raise "
                         f"{option('scheduler-timeout')})") from None
    except OSError as exc:
        raise UsageError(f"cannot reach {where} ({exc.strerror or exc}); check the address "
                         "and that the scheduler is running") from None
    try:
        sock = _connect(found, deadline)
    except TimeoutError:
        raise UsageError(f"nothing answered at {address} in {timeout:g} s; check that "
                         f"{where} is running and reachable (or raise "
                         f"{option('scheduler-timeout')})") from None
    except OSError as exc:
        raise UsageError(f"cannot reach {where} ({exc.strerror or exc}); check the address "
                         "and that the scheduler is running") from None
    with sock:
        if scheme == "tls":
            return
        try:
            head = _read(sock, 8, deadline)
            (length,) = struct.unpack("<Q", head)
            if not 0 < length <= _HANDSHAKE_MAX:
                raise _NotDask(f"its first bytes {head!r} are no Dask handshake")
            body = _read(sock, length, deadline)
        except TimeoutError:
            raise UsageError(f"something listens at {address} but said nothing in "
                             f"{timeout:g} s: not a Dask scheduler (an HTTP server or "
                             "another service?); give the scheduler's address, usually "
                             "port 8786") from None
        except _NotDask as exc:
            raise UsageError(f"what answered at {address} is not a Dask scheduler ({exc}); "
                             "give the scheduler's address, usually port 8786") from None
        except OSError as exc:
            raise UsageError(f"{where} closed the connection ({exc.strerror or exc}); "
                             "check the address") from None
        if not any(key in body for key in _HANDSHAKE_KEYS):
            raise UsageError(f"what answered at {address} is not a Dask scheduler (its "
                             "first message is no Dask handshake); give the scheduler's "
                             "address, usually port 8786")


def check_comm(address: str) -> None:
    """UsageError if this dask.distributed has no working comm for *address*'s scheme:
    distributed 2025 keeps a ``ucx`` backend whose connector cannot be made (UCX-Py was
    removed; distributed-ucxx replaces it), which Client met with a TypeError."""
    scheme = check_address(address)[0]
    from distributed.comm.registry import get_backend

    try:
        get_backend(scheme).get_connector()
    except Exception as exc:            # noqa: BLE001 - a third-party backend's failure
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise UsageError(f"this dask.distributed cannot connect to {scheme}:// addresses "
                         f"({reason}); give the scheduler's tcp:// address") from None


class _NotDask(Exception):
    pass


def _resolve(host: str, port: int, deadline: float) -> list[tuple]:
    """getaddrinfo of *host* (TCP) before *deadline*, else TimeoutError. The system's
    resolver takes no timeout (a name server that does not answer holds it through its
    own retries, tens of seconds), so it runs in a daemon thread that is left behind
    when the deadline passes."""
    answer: list = []

    def resolve() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            answer.append(exc)

    worker = threading.Thread(target=resolve, daemon=True, name="gpugap-resolve")
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.0))
    if not answer:
        raise TimeoutError
    if isinstance(answer[0], OSError):
        raise answer[0]
    return answer[0]


def _connect(addresses: list[tuple], deadline: float) -> socket.socket:
    """A TCP connection to the first of *addresses* (getaddrinfo's) that accepts one
    before *deadline* (socket.create_connection without its own name lookup); the
    last address's error otherwise."""
    error: OSError = TimeoutError()
    for family, kind, proto, _, sockaddr in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error


def _read(sock: socket.socket, size: int, deadline: float) -> bytes:
    """Exactly *size* bytes before *deadline*; TimeoutError, or _NotDask if the peer
    closes first."""
    data = bytearray()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise _NotDask("it closed the connection" + (
                f" after {bytes(data)!r}" if data else " without a word"))
        data += chunk
    return bytes(data)


__all__ = ["DEFAULT_TIMEOUT_S", "check_address", "check_comm", "probe"]
