"""The typed values rules produce, besides findings: severities, causes and marks.

- :class:`Severity`: info < warning < error, the one order every filter and sort uses.
- :class:`Cause`: one cause a rule tells apart: its id (what findings, gates and docs
  name), what it means, the fix for it, and what the rest of gpugap needs to know of it
  without naming it (its colour, its title in a verdict, when its findings settle, the
  CUDA calls that show it).
- Marks (:data:`Mark`): where a finding is drawn on a timeline, in the report's own
  terms (times, devices, streams, threads, events by correlation id), so a renderer
  draws any rule's findings without knowing the rule: :class:`Band` (GPU time across a
  device's stream lanes), :class:`Span` (time on a host thread), :class:`Outline` (one
  event) and :class:`Link` (an arrow from one event to another).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from gpugap.accounting.buckets import fix_for


class Severity(str, Enum):
    """How much a finding matters, ordered info < warning < error (definition order).

    A str: a member equals, hashes and prints as its name ("warning"), so findings
    serialise as before and plain names from options and config files compare with it."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    __hash__ = str.__hash__        # Enum hashes the member's name; equal to "info": same hash

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for error."""
        return _ORDER.index(self)

    def __lt__(self, other: object) -> bool:
        return self.rank < Severity(other).rank

    def __le__(self, other: object) -> bool:
        return self.rank <= Severity(other).rank

    def __gt__(self, other: object) -> bool:
        return self.rank > Severity(other).rank

    def __ge__(self, other: object) -> bool:
        return self.rank >= Severity(other).rank

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """('info', 'warning', 'error'): the names options and config files accept."""
        return tuple(s.value for s in _ORDER)

    @classmethod
    def of_rank(cls, rank: int) -> Severity:
        return _ORDER[rank]

    @classmethod
    def of_share(cls, share_pct: float, warn_pct: float, error_pct: float) -> Severity:
        """The severity of a cost that is *share_pct* of its scope."""
        return (cls.ERROR if share_pct >= error_pct else cls.WARNING if share_pct >= warn_pct
                else cls.INFO)


_ORDER: tuple[Severity, ...] = tuple(Severity)


@dataclass(frozen=True)
class Cause:
    """One cause a rule reports: *id* (findings' ``cause``, gates' and docs' name for
    it), what it means, the fix for it (a rule may refine it per finding), and:

    - *color*: the colour its marks are drawn in (None: its rule's);
    - *title*: what a verdict calls it when it is the bottleneck ("Launch-bound"; None:
      ``rule-id [cause-id]``), and *occasional_title*: what it calls it when it strikes
      a few iterations of the steady state (None: *title*);
    - *priority*: when its findings' claims settle, lower first, causes before their
      consequences (gpugap.rules.settle; None: its rule's ``Rule.priority``);
    - *call_category*: the category of CUDA calls that show it
      (gpugap.accounting.host.CATEGORIES), listed for the verdict's representative
      iteration (None: the launching threads' longest calls of any kind);
    - *waits_for_device*: it says a device waited for another: for its data ('data': a
      pipeline stage) or inside a collective ('collective': a late rank); a symptom,
      whose cause the verdict looks for on the device waited for (None: not a wait);
    - *fixes*: the fix in the words of a framework (gpugap.program.Program.framework:
      'PyTorch', 'JAX', 'CuPy', 'CUDA C++', 'CUDA Python'), where it differs from *fix*;
      ``fix_for`` picks it;
    - *periodic*: whether its findings may recur every N iterations (False: a first use,
      named by the iterations it hit)."""

    id: str
    meaning: str
    fix: str
    color: str | None = None
    title: str | None = None
    occasional_title: str | None = None
    priority: int | None = None
    call_category: str | None = None
    fixes: Mapping[str, str] = field(default_factory=dict)
    waits_for_device: str | None = None
    # Can it recur every N iterations? A first use (a new shape's autotuning or
    # compilation) happens once per new thing, whatever period its iterations show: a
    # verdict names the iterations it hit, never 'every N'.
    periodic: bool = True

    def fix_for(self, framework: str | None) -> str:
        """The fix in the API of *framework* (None or unknown: the general one)."""
        return fix_for(self.fix, self.fixes, framework)




# --- marks -------------------------------------------------------------------------

GPU_EVENT_KINDS = ("kernel", "memcpy", "memset", "graph")    # gpugap.report.trace.OP_KINDS
EVENT_KINDS = (*GPU_EVENT_KINDS, "api")


@dataclass(frozen=True)
class EventRef:
    """One event of the report: a GPU operation (*kind* kernel, memcpy, memset or graph)
    or a CUDA API call (*kind* 'api'), by its correlation id. *stream*, *pid* and
    *start_ns* (when it began) pick among events sharing the id: the kernels of one graph
    launch, the processes of a multi-process report."""

    kind: str
    correlation_id: int
    stream: int | None = None
    pid: int | None = None
    start_ns: int | None = None


@dataclass(frozen=True)
class Band:
    """GPU time [start_ns, end_ns] shaded across *device*'s stream lanes (only those of
    *streams* when given), labelled; drawn in the colour of *cause* (None: the rule's)."""

    start_ns: int
    end_ns: int
    device: int | None
    streams: tuple[int, ...] = ()
    label: str = ""
    cause: str | None = None


@dataclass(frozen=True)
class Span:
    """Host time [start_ns, end_ns] marked on thread *gtid*: on its *lane* ('api': the
    CUDA API lane, 'nvtx': the NVTX lane) where it has one, else its other lane."""

    start_ns: int
    end_ns: int
    gtid: int
    lane: str = "api"
    label: str = ""


@dataclass(frozen=True)
class Outline:
    """One event outlined."""

    event: EventRef


@dataclass(frozen=True)
class Link:
    """An arrow from *source* to *target*; *ends*: which end of each it joins, 's'tart
    or 'e'nd ('es': from the end of the source to the start of the target)."""

    source: EventRef
    target: EventRef
    ends: str = "es"


Mark = Band | Span | Outline | Link
