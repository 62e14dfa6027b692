"""What a rule is and what it returns.

A rule is one module under ``gpugap.rules`` holding a ``RULE`` (a :class:`Rule`): its id,
title, documented default thresholds, rationale and fix, and a pure
``detect(trace, config) -> list[Finding]``. Rules never open files or print.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpugap.report.trace import Trace

SEVERITIES = ("info", "warning", "error")


@dataclass(frozen=True)
class Threshold:
    default: float
    unit: str
    help: str


@dataclass
class Finding:
    rule: str
    cause: str
    severity: str              # info | warning | error
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    thresholds: Mapping[str, Threshold]
    rationale: str
    fix: str
    causes: Mapping[str, str]          # cause id -> what it means
    detect: Callable[[Trace, Mapping[str, float]], list[Finding]]

    def defaults(self) -> dict[str, float]:
        return {k: t.default for k, t in self.thresholds.items()}

    def run(self, trace: Trace, overrides: Mapping[str, float] | None = None) -> list[Finding]:
        config = self.defaults() | dict(overrides or {})
        return self.detect(trace, config)


def severity_for(cost_ns: float, span_ns: float, *, warn_pct: float = 1.0,
                 error_pct: float = 10.0) -> str:
    """Severity from the share of the analysed span a finding costs."""
    if span_ns <= 0:
        return "warning"
    share = 100.0 * cost_ns / span_ns
    return "error" if share >= error_pct else "warning" if share >= warn_pct else "info"


def fmt_ns(ns: float) -> str:
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def fmt_bytes(n: float) -> str:
    n = float(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
