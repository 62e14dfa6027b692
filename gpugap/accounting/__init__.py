"""One accounting of GPU time: phases of each device's timeline (start-up, warm-up,
steady state, tail) and every nanosecond of it in exactly one bucket.

    from gpugap.accounting import account
    acc = account(trace)
    dev = acc.devices[0]
    dev.phases.spans["steady"]            # (start_ns, end_ns)
    dev.totals_in()                       # {"compute": ns, "launch-bound": ns, ...}
"""

from __future__ import annotations

from dataclasses import dataclass

from gpugap.accounting.attribution import DeviceAccount, Settings, account_device
from gpugap.accounting.buckets import BUCKETS, BUSY_IDS, IDLE_IDS, IDS
from gpugap.accounting.phases import PHASES, Phases
from gpugap.accounting.phases import detect as detect_phases
from gpugap.accounting.work import device_work
from gpugap.memory import give_back
from gpugap.program import Program, understand
from gpugap.report.trace import Trace


@dataclass
class Accounting:
    devices: dict[int, DeviceAccount]
    settings: Settings


def account(trace: Trace, settings: Settings | None = None, *,
            iteration: str | None = None, program: Program | None = None) -> Accounting:
    """Phases and the bucket partition of every device with GPU work, as the program
    model (*program*, else understood here with *iteration*) sees its devices."""
    settings = settings or Settings()
    program = program or understand(trace, iteration=iteration)
    devices = {}
    for device, seen in program.devices.items():
        work = device_work(trace, device, seen.ops)
        phases = detect_phases(trace, work, seen, warmup_factor=settings.warmup_factor)
        devices[device] = account_device(trace, work, phases, settings)
    trace.__dict__.pop("_thread_calls", None)     # large, and needed only above
    give_back()                                   # the batches' memory, to the system
    return Accounting(devices, settings)


__all__ = ["BUCKETS", "BUSY_IDS", "IDLE_IDS", "IDS", "PHASES", "Accounting", "DeviceAccount",
           "Phases", "Settings", "account"]
