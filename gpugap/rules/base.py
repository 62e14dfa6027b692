"""What a rule is and what it returns.

A rule is one module under ``gpugap.rules`` holding a ``RULE`` (a :class:`Rule`): its id,
title, documented default thresholds, rationale and fix, and a pure
``detect(trace, config, context) -> list[Finding]``. Rules never open files or print.

A finding does not compute its own cost: it *claims* the nanoseconds it explains (a
:class:`Claim`: where, which buckets of the accounting, what share of them), and
gpugap.rules.settle turns claims into costs from the one accounting of time, each
nanosecond counted for at most one finding (see there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpugap import intervals as tl
from gpugap.accounting import Accounting
from gpugap.accounting.phases import PHASES
from gpugap.accounting.scope import Scope
from gpugap.jsonout import Record
from gpugap.report.trace import Trace
from gpugap.rules.model import Cause, Mark, Severity

# Formatting lives in gpugap.units; imported from here by branches still in flight.

# What a finding belongs to: the accounting's phases (one-time costs before the steady
# state: start-up, then the warm-up iterations; the steady state; what follows it), so
# that a finding and the accounting's frame name the same nanoseconds alike. Under a
# --range the phases stay inside the range: the part of its instances in the steady
# state is 'range' (what the verdict judges; a cause is one finding there, its share of
# that part, as the range's breakdown counts it), the parts in start-up, warm-up (first
# uses included) or the tail are those one-time phases, shares of the range's whole
# time. A range with no time in the steady state on a device is all 'range' there.
FINDING_PHASES = ("start-up", "warm-up", "steady", "tail", "range")
RANGE_PHASE = "range"
# The phases of one-time costs: each a share of the device's whole window.
ONE_TIME_PHASES = ("start-up", "warm-up", "tail")
_FINDING_PHASE_NAMES = np.array(FINDING_PHASES, dtype=object)
_STEADY = FINDING_PHASES.index("steady")
_RANGE = FINDING_PHASES.index(RANGE_PHASE)
# accounting.phases.PHASES (then -1: outside the window) -> FINDING_PHASES; outside the
# window reads 'steady'.
_FINDING_PHASE_OF = np.array([FINDING_PHASES.index(p) for p in PHASES] + [_STEADY],
                             dtype=np.int8)
# The same under a --range: its steady part is 'range', and so is time outside the window.
_RANGE_PHASE_OF = np.where(_FINDING_PHASE_OF == _STEADY, _RANGE, _FINDING_PHASE_OF
                           ).astype(np.int8)


@dataclass
class Claim:
    """The nanoseconds a finding explains: the parts of *intervals* (on *device*) that
    the accounting put in one of *buckets*; it costs *weight* of each (1: all of it;
    small-grid: the idle share of the SMs)."""

    device: int
    intervals: tuple[np.ndarray, np.ndarray]
    buckets: tuple[str, ...]
    weight: float = 1.0


@dataclass
class Context:
    """What rules get besides the trace: the accounting (phases and buckets per device)
    and the scope of the analysis (gpugap.accounting.scope: a --range's windows, else
    each device's steady state; by default the steady state), which keeps the
    accounting's phases inside a --range (FINDING_PHASES)."""

    accounting: Accounting
    scope: Scope = None  # type: ignore[assignment]   # None: the steady state's

    def __post_init__(self) -> None:
        if self.scope is None:
            self.scope = Scope.of(self.accounting.devices)

    @property
    def framework(self) -> str | None:
        """The program's framework (gpugap.program.Program.framework): the language of
        fixes."""
        program = self.accounting.program
        return None if program is None else program.framework

    def in_scope(self, devices: ArrayLike, times: ArrayLike) -> np.ndarray:
        """Per (device, time): inside the scope? (all True without one)"""
        times = np.asarray(times, dtype=np.int64)
        if not self.scope.is_range:
            return np.ones(times.shape, dtype=bool)
        devices = np.broadcast_to(np.asarray(devices), times.shape)
        out = np.zeros(times.shape, dtype=bool)
        for d in np.unique(devices).tolist():
            on = devices == d
            out[on] = tl.within(times[on], self.scope.range_on(int(d)))
        return out

    @property
    def whole_phase(self) -> str | None:
        """The phase of a finding that spans the scope when it is a --range ('range', its
        steady part), else None: findings then belong to the phase their time falls
        in."""
        return RANGE_PHASE if self.scope.is_range else None

    def phase_of(self, device: int, times: ArrayLike) -> np.ndarray:
        """FINDING_PHASES name of each time on *device* ('steady' where it has no phases;
        under a --range, 'range' for its steady part). The phases are spans of the GPU's
        timeline: pass GPU times (an op's start), not the host's (launch calls run ahead
        of the GPU)."""
        return _FINDING_PHASE_NAMES[self.phase_code(device, times)]

    def phase_code(self, device: int, times: ArrayLike) -> np.ndarray:
        """phase_of as int8 indices into FINDING_PHASES (no strings: millions of items)."""
        t = np.asarray(times, dtype=np.int64)
        dev = self.accounting.devices.get(int(device))
        if self.scope.is_whole(int(device)):
            return np.full(t.shape, _RANGE, dtype=np.int8)
        if dev is None:
            return np.full(t.shape, _STEADY, dtype=np.int8)
        # -1 (outside the window) reads the trailing 'steady' ('range')
        of = _RANGE_PHASE_OF if self.scope.is_range else _FINDING_PHASE_OF
        return of[dev.phases.phase_codes(t)]

    def phases_of(self, devices: ArrayLike, times: ArrayLike) -> np.ndarray:
        """phase_of for items on several devices: the phase of each (device, time)."""
        return _FINDING_PHASE_NAMES[self.phase_codes_of(devices, times)]

    def phase_codes_of(self, devices: ArrayLike, times: ArrayLike) -> np.ndarray:
        """phases_of as int8 indices into FINDING_PHASES."""
        devices = np.asarray(devices)
        times = np.asarray(times, dtype=np.int64)
        # One device (most reports): seen in one pass, without sorting the devices.
        if devices.size and bool((devices == devices.flat[0]).all()):
            return self.phase_code(int(devices.flat[0]), times)
        ids = np.unique(devices)
        out = np.full(times.shape, _RANGE if self.scope.is_range else _STEADY,
                      dtype=np.int8)
        for d in ids.tolist():
            on = devices == d
            out[on] = self.phase_code(int(d), times[on])
        return out

    def judged_phases(self, device: int
                      ) -> Iterator[tuple[str, tl.Intervals, int, int]]:
        """Per FINDING_PHASES phase of *device* that has time in scope: (phase, its
        windows within the scope, their length, the wall a finding's share is of, as
        settling computes it: the steady state, or for one-time costs the device's whole
        window). Under a --range: ('range', its steady part, its length twice), then its
        one-time parts, each with the range's whole time on *device* as the wall."""
        if self.scope.is_range:
            whole = tl.total(self.scope.range_on(device))
            for phase in (RANGE_PHASE, *ONE_TIME_PHASES):
                span = self.phase_span(device, phase)
                wall = tl.total(span)
                if wall > 0:
                    yield phase, span, wall, wall if phase == RANGE_PHASE else whole
            return
        dev = self.accounting.devices[int(device)]
        whole = dev.window[1] - dev.window[0]
        for phase in ("start-up", "warm-up", "steady", "tail"):
            span = self.phase_span(device, phase)
            wall = tl.total(span)
            if wall > 0:
                yield phase, span, wall, wall if phase == "steady" else whole

    def phase_span(self, device: int, phase: str) -> tuple[np.ndarray, np.ndarray]:
        """The windows of a FINDING_PHASES phase on *device*, as a union; under a
        --range, inside its windows ('range': their steady part)."""
        if phase == RANGE_PHASE:
            return self.scope.on(int(device)) if self.scope.is_range else tl.EMPTY
        dev = self.accounting.devices[int(device)]
        ph = dev.phases
        if phase == "steady":                   # but its first-use iterations
            span = ph.steady_windows()
        else:
            lo, hi = ph.spans[phase]
            span = (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))
            if phase == "warm-up" and ph.first_use.size:   # the first uses are warm-up too
                extra = ph.first_use_windows()
                span = (np.r_[span[0], extra[0]], np.r_[span[1], extra[1]])
            span = tl.union(*span)
        if not self.scope.is_range:
            return span
        if self.scope.is_whole(int(device)):
            return tl.EMPTY
        return tl.intersect(span, self.scope.range_on(int(device)))


@dataclass(frozen=True)
class Threshold:
    default: float
    unit: str
    help: str
    # The accounting setting (gpugap.accounting.policy.Settings) this threshold sets, by
    # name: the accounting receives its value (gpugap.rules.thresholds).
    setting: str | None = None


@dataclass
class Finding(Record):
    rule: str
    cause: str
    severity: Severity
    start_ns: int
    end_ns: int
    cost_ns: int               # time lost (or, for info findings, 0)
    message: str               # what happened and why, with numbers
    fix: str                   # what to do about it
    streams: list[int] = field(default_factory=list)
    device: int | None = None
    count: int = 1             # occurrences folded into this finding
    at_ns: int | None = None   # the moment the finding is attributed to (NVTX ranges)
    evidence: dict[str, Any] = field(default_factory=dict)
    ranges: list[str] = field(default_factory=list)   # enclosing NVTX ranges (outer first)
    phase: str | None = None   # FINDING_PHASES
    id: str = ""               # unique in an analysis: rule/cause@device:phase
    share_pct: float | None = None        # of its scope's wall time (see settle)
    per_iteration: dict[str, Any] | None = None   # steady state: cost per iteration
    consequence_of: str | None = None     # the id of the finding that explains it
    pid: int | None = None
    claim: Claim | None = field(default=None, repr=False, compare=False)
    iteration_costs: np.ndarray | None = field(default=None, repr=False, compare=False)
    # Dropped when its settled share of its scope is below this (rules that report a
    # share of time whatever its size, e.g. launch-gap's min_share_pct).
    min_share_pct: float | None = field(default=None, repr=False, compare=False)
    # At most this severity, whatever its share (a rule's judgement that the evidence is
    # not worth acting on: a library kernel's grid, a few percent of skew between ranks);
    # INFO: context, never the verdict's bottleneck.
    max_severity: Severity | None = field(default=None, repr=False, compare=False)
    # Peer rules whose findings on the same device settle before this one, whatever
    # their claims' sizes: the rule's evidence says they are what the program can
    # change first (small grids already on several streams: what serializes the streams
    # comes first; a fixed problem size cannot grow its grid).
    settles_after: tuple[str, ...] = field(default=(), repr=False, compare=False)
    # What the rule's finish() still has to do (evidence worth gathering only for the
    # findings that settling keeps).
    pending: Any = field(default=None, repr=False, compare=False)
    # Where it is drawn on a timeline (gpugap.rules.model); not part of its JSON.
    marks: list[Mark] = field(default_factory=list, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items()
               if k not in ("claim", "iteration_costs", "min_share_pct",
                            "pending", "marks", "max_severity", "settles_after")}
        return asdict_plain(out)


# The priority of a rule that declares none: its findings settle after those of every
# rule that does, as consequences of theirs rather than causes of them.
DEFAULT_PRIORITY = 100


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    thresholds: Mapping[str, Threshold]
    rationale: str
    fix: str
    # Given as Cause objects; kept as cause id -> Cause, in that order.
    causes: Mapping[str, Cause]
    detect: Callable[[Trace, Mapping[str, float], Context], list[Finding]]
    # Completes the findings settling kept (costly evidence, messages quoting costs).
    finish: Callable[[Trace, list[Finding]], None] | None = None
    color: str | None = None           # its findings' colour on a timeline (None: any)
    # When its findings' claims settle, lower first: causes before the consequences
    # they explain (gpugap.rules.settle); a Cause may have its own (Cause.priority).
    priority: int = DEFAULT_PRIORITY
    # Peers: rules of one priority whose findings claim the same time as two remedies for
    # it (small grids; the serialisation that keeps them from running concurrently).
    # Their findings settle larger claim first, so the one that would recover more takes
    # the time they share and explains the other; others settle in time order.
    peer: bool = False

    def __post_init__(self) -> None:
        causes = self.causes
        if not isinstance(causes, Mapping):
            causes = {c.id: c for c in causes}
        object.__setattr__(self, "causes", dict(causes))

    def priority_of(self, cause: str) -> int:
        """When findings of *cause* settle: the cause's priority, else the rule's."""
        own = self.causes.get(cause)
        return self.priority if own is None or own.priority is None else own.priority

    def defaults(self) -> dict[str, float]:
        return {k: t.default for k, t in self.thresholds.items()}

    def run(self, trace: Trace, context: Context,
            overrides: Mapping[str, float] | None = None) -> list[Finding]:
        config = self.defaults() | dict(overrides or {})
        return self.detect(trace, config, context)


# Values asdict_plain returns as they are, by exact type (most of what findings hold).
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})


def asdict_plain(value: Any) -> Any:
    """dataclasses.asdict for the plain values findings hold (dicts, lists, numbers)."""
    if type(value) in _PLAIN_TYPES:
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: asdict_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [asdict_plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


WARN_PCT, ERROR_PCT = 5.0, 20.0


def severity_for(cost_ns: float, span_ns: float, *, warn_pct: float = WARN_PCT,
                 error_pct: float = ERROR_PCT) -> Severity:
    """Severity from the share of its scope's wall time a finding costs."""
    if span_ns <= 0:
        return Severity.INFO if cost_ns <= 0 else Severity.WARNING
    return Severity.of_share(100.0 * cost_ns / span_ns, warn_pct, error_pct)
