"""One accounting of GPU time: phases of each device's timeline (start-up, warm-up,
steady state, tail) and every nanosecond of it in exactly one bucket.

    from gpugap.accounting import account
    acc = account(trace)
    dev = acc.devices[0]
    dev.phases.spans["steady"]            # (start_ns, end_ns)
    dev.totals_in()                       # {"compute": ns, "launch-bound": ns, ...}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpugap import intervals as tl
from gpugap.accounting.attribution import DeviceAccount, account_device
from gpugap.accounting.buckets import BUCKETS, BUSY_IDS, CODE, IDLE_IDS, IDS
from gpugap.accounting.host import ThreadWaits
from gpugap.accounting.index import AccountingIndex
from gpugap.accounting.phases import PHASES, Phases, first_uses
from gpugap.accounting.phases import align as align_phases
from gpugap.accounting.phases import detect as detect_phases
from gpugap.accounting.policy import Settings
from gpugap.accounting.work import device_work
from gpugap.memory import give_back
from gpugap.program import Program, understand
from gpugap.report.trace import Trace


@dataclass
class Accounting:
    devices: dict[int, DeviceAccount]
    settings: Settings
    program: Program | None = None       # the program model the devices were read from
    # What the accounting derived from the trace (categories of calls, buckets of ops...),
    # for the rules and the verdict to read rather than compute again.
    index: AccountingIndex | None = field(default=None, repr=False)


def account(trace: Trace, settings: Settings | None = None, *,
            iteration: str | None = None, program: Program | None = None,
            processes: int | None = 1, not_before: tuple[int, str] | None = None
            ) -> Accounting:
    """Phases and the bucket partition of every device with GPU work, as the program
    model (*program*, else understood here with *iteration*) sees its devices; each
    device's slices in at most *processes* processes (None: every core). *not_before*:
    (a time on the report's clock, who): no steady state before it, because another
    rank of the job (who) was still warming up then (gpugap.accounting.phases.align)."""
    settings = settings or Settings()
    program = program or understand(trace, iteration=iteration)
    interpreted = program.framework in INTERPRETED
    spans = program.compile_spans
    compiling = tl.union(spans.start, spans.end)
    index = AccountingIndex.of(trace)
    waits = ThreadWaits.of(program, index.calls)
    works, phases = {}, {}
    for device, seen in program.devices.items():
        works[device] = work = device_work(trace, device, seen.ops, index.op_buckets)
        phases[device] = detect_phases(trace, work, seen,
                                       warmup_factor=settings.warmup_factor)
    align_phases(phases, _peers(works, program), not_before)
    for device, ph in phases.items():
        first_uses(trace, works[device], ph, program.compile_spans)
    devices = {}
    for device, seen in program.devices.items():
        devices[device] = account_device(trace, works[device], phases[device], settings,
                                         waits, compiling, lambda seen=seen: seen.driver,
                                         interpreted, index, processes,
                                         loader=program.data_loader is not None)
    _cross_device_waits(devices, program)
    give_back()                                   # the batches' memory, to the system
    return Accounting(devices, settings, program, index)


def _peers(works: dict, program: Program) -> dict[int, set[int]]:
    """The devices each device talks to: every other device that runs communication
    kernels when it does (one job's collectives), and those linked to it (peer copies,
    event waits: gpugap.program.DeviceLink)."""
    talking = {d for d, w in works.items() if w.positions(CODE["communication"]).size}
    peers = {d: (talking - {d}) if d in talking else set() for d in works}
    for link in program.links:
        if link.src in peers and link.dst in peers:
            peers[link.src].add(link.dst)
            peers[link.dst].add(link.src)
    return peers


# Frameworks that launch from Python (a gap is host work only well beyond their pace).
INTERPRETED = ("PyTorch", "JAX", "CuPy", "CUDA Python")


def _cross_device_waits(devices: dict[int, DeviceAccount], program: Program) -> None:
    """Queued work that waited while a GPU it takes data from (the program model's
    links: peer copies) was busy waited for that GPU: queued-wait becomes
    cross-device-wait where most of a piece overlaps the other GPU's work."""
    for link in program.links:
        src, dst = devices.get(link.src), devices.get(link.dst)
        if src is None or dst is None:
            continue
        s, e, _ = src.pieces(*src.window, buckets=BUSY_IDS)
        dst.relabel("queued-wait", "cross-device-wait", tl.union(s, e))


__all__ = ["BUCKETS", "BUSY_IDS", "IDLE_IDS", "IDS", "PHASES", "Accounting",
           "AccountingIndex", "DeviceAccount", "Phases", "Settings", "account"]
