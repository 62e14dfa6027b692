"""Costs of findings from the one accounting of time.

Every finding claims the nanoseconds it explains (gpugap.rules.base.Claim). Claims are
settled in order, causes before consequences (each rule, and any of its causes, declares
when its findings settle: ``Rule.priority``, ``Cause.priority``; the findings of peer
rules, ``Rule.peer``, larger claim first, unless a finding's evidence defers it to a
peer present on its device and phase, ``Finding.settles_after``): a finding's cost is
its claim's weight times the nanoseconds of its claim that no earlier finding took. So
the costs of all findings in a scope never add up to more than its wall time. When more
than half of what a finding claims was already taken, it is a consequence of the
finding that took most of it (``consequence_of``) and costs only the rest: the warm-up
latency that a module-load gap explains; of small grids on streams the legacy stream
serialised, whichever of the two claims more (bigger grids, or running them concurrently)
explains the other.

A finding's share is of its scope: the steady state of its device, the whole timeline
for one-time costs (start-up, warm-up iterations, tail); under the user's ``--range``,
the range's steady part, or for its one-time parts the range's whole time on the device
(the phases stay inside the range: gpugap.rules.base.FINDING_PHASES). Severity: info
below 5%, warning from 5%, error from 20%; one-time costs are info (warning from 10 s).
Findings that ask for a minimum
share (``Finding.min_share_pct``) and fall below it in their scope are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from functools import partial

import numpy as np

from gpugap import intervals as tl
from gpugap import scan
from gpugap.accounting.buckets import IDS
from gpugap.rules.base import (
    FINDING_PHASES,
    ONE_TIME_PHASES,
    RANGE_PHASE,
    Context,
    Finding,
    Rule,
    severity_for,
)
from gpugap.rules.model import Severity

ONE_TIME_WARNING_NS = 10e9


def assign_ids(findings: list[Finding]) -> None:
    seen: dict[str, int] = {}
    for f in findings:
        base = f"{f.rule}/{f.cause}@{'' if f.device is None else f.device}:{f.phase or ''}"
        seen[base] = seen.get(base, 0) + 1
        f.id = base if seen[base] == 1 else f"{base}#{seen[base]}"


def _where(context: Context, f: Finding, scope: Mapping[int, tl.Intervals] | None
           ) -> _Where:
    """Where a finding's claim applies: its intervals, inside its phase and the scope."""
    c = f.claim
    windows = None
    if f.phase in FINDING_PHASES:                        # a finding lives in its phase
        windows = context.phase_span(int(c.device), f.phase)
    if scope is not None:
        mine = scope.get(int(c.device), tl.EMPTY)
        windows = mine if windows is None else tl.intersect(windows, mine)
    return _Where(_as_union(*c.intervals), windows)


def _as_union(starts: np.ndarray, ends: np.ndarray) -> tl.Intervals:
    """intervals.union, without a copy when the intervals are one already (claims of
    millions of kernels usually are)."""
    s, e = np.asarray(starts), np.asarray(ends)
    if s.dtype == np.int64 and e.dtype == np.int64 and bool((e > s).all()) \
            and bool((s[1:] > e[:-1]).all()):
        return s, e
    return tl.union(s, e)


@dataclass
class _Where:
    """A claim's union restricted to *windows* (a union; None: no restriction), read
    block by block: the restriction is applied to each block's part of the claim, never
    copied whole (a claim can hold millions of kernels)."""

    claim: tl.Intervals
    windows: tl.Intervals | None

    def _part(self, lo: int, hi: int) -> tl.Intervals:
        """The claim's pieces that overlap [lo, hi), clipped to it (only the first can
        start before lo, only the last end after hi: the claim is a union)."""
        s, e = self.claim
        i0 = int(np.searchsorted(e, lo, side="right"))
        i1 = int(np.searchsorted(s, hi, side="left"))
        ps, pe = s[i0:i1].copy(), e[i0:i1].copy()
        if i1 > i0:
            ps[0], pe[-1] = max(int(ps[0]), lo), min(int(pe[-1]), hi)
        return ps, pe

    def clip(self, lo: int, hi: int) -> tl.Intervals:
        """The restricted claim inside [lo, hi) (intervals.clip of the whole)."""
        if self.windows is None:
            return self._part(lo, hi)
        ws, we = tl.clip(self.windows, lo, hi)
        if ws.size == 1:                     # one window (a phase): the claim inside it
            return self._part(int(ws[0]), int(we[0]))
        return tl.intersect(self._part(lo, hi), (ws, we))

    def bounds(self) -> tuple[int, int] | None:
        """The first start and the last end of the restricted claim (None: empty)."""
        s, e = self.claim
        if not s.size:
            return None
        if self.windows is None:
            return int(s[0]), int(e[-1])
        ws, we = self.windows
        i0 = np.searchsorted(e, ws, side="right")      # the claim's pieces in each window
        i1 = np.searchsorted(s, we, side="left")
        some = np.flatnonzero(i1 > i0)
        if not some.size:
            return None
        a, z = int(some[0]), int(some[-1])
        return max(int(s[i0[a]]), int(ws[a])), min(int(e[i1[z] - 1]), int(we[z]))


@dataclass
class _Claiming:
    """One finding's claim being settled, block by block."""

    finding: Finding
    where: _Where
    codes: list[int]
    iterations: tuple[np.ndarray, np.ndarray] | None   # steady iteration windows
    size: int = 0                  # ns its claim covers
    left: int = 0                  # of which no earlier finding had taken
    overlap: dict[str, int] = dc_field(default_factory=dict)   # taken by whom
    per_iteration: np.ndarray | None = None

    def add(self, tally: _Tally) -> None:
        """A run of blocks' figures (runs added in time order: ``overlap`` keeps the
        order in which one run after another first met each finding)."""
        self.size += tally.size
        self.left += tally.left
        for other, ns in tally.overlap.items():
            self.overlap[other] = self.overlap.get(other, 0) + ns
        if tally.per_iteration is not None and self.per_iteration is not None:
            self.per_iteration += tally.per_iteration


@dataclass
class _Tally:
    """One claim's figures in a run of blocks (see _Claiming)."""

    size: int = 0
    left: int = 0
    overlap: dict[str, int] = dc_field(default_factory=dict)
    per_iteration: np.ndarray | None = None


def _settle_device(dev, claims: list[_Claiming], processes: int | None = 1) -> None:
    """Settle the claims of one device (in priority order), block by block: the buckets
    partition time, so each claim meets only what was claimed in its own buckets, and
    blocks are disjoint, so each is settled on its own (runs of blocks in as many
    processes as *processes* allows, gpugap.scan.spread; their figures added up here,
    exact integers)."""
    bounds = [b for b in (c.where.bounds() for c in claims) if b is not None]
    if not bounds:
        return
    numbers = dev.block_range(min(b[0] for b in bounds), max(b[1] for b in bounds))
    for tallies in scan.spread(numbers, partial(_settle_blocks, dev, claims),
                               shared=(dev,), processes=processes):
        for c, tally in zip(claims, tallies, strict=True):
            c.add(tally)


def _settle_blocks(dev, claims: list[_Claiming], numbers: range) -> list[_Tally]:
    """Each claim's figures in the blocks *numbers* (reads the claims, changes none)."""
    tallies = [_Tally(per_iteration=None if c.per_iteration is None
                      else np.zeros_like(c.per_iteration)) for c in claims]
    for blo, bhi, s, e, code in dev.blocks(numbers=numbers):
        of_code = _CodePieces(s, e, code)
        claimed: dict[int, tl.Intervals] = {}
        taken: dict[int, list[tuple[str, tl.Intervals]]] = {}
        for c, tally in zip(claims, tallies, strict=True):
            w = c.where.clip(blo, bhi)
            if not w[0].size:
                continue
            for k in c.codes:
                region = _intersect(of_code[k], w)
                if not region[0].size:
                    continue
                before = claimed.get(k, tl.EMPTY)
                fresh = tl.subtract(region, before) if before[0].size else region
                got, total = tl.total(fresh), tl.total(region)
                tally.size += total
                tally.left += got
                if total > got:                      # who had taken the rest
                    for other, theirs in taken.get(k, []):
                        tally.overlap[other] = tally.overlap.get(other, 0) + \
                            tl.intersect_total(region, theirs)
                taken.setdefault(k, []).append((c.finding.id, region))
                claimed[k] = tl.merge(before, region) if before[0].size else region
                if c.iterations is not None and tally.per_iteration is not None and got:
                    # Only the iterations that meet this block (the windows follow one
                    # another): adding to every iteration would grow as blocks x
                    # iterations.
                    ilo, ihi = c.iterations
                    i0 = int(np.searchsorted(ihi, blo, side="right"))
                    i1 = int(np.searchsorted(ilo, bhi, side="left"))
                    tally.per_iteration[i0:i1] += tl.total_between(fresh, ilo[i0:i1],
                                                                   ihi[i0:i1])
    return tallies


class _CodePieces:
    """A block's pieces of each code, in time order: sorted by code once, when first
    asked (a block meets the claims of many codes), then a slice per code."""

    def __init__(self, s: np.ndarray, e: np.ndarray, code: np.ndarray) -> None:
        self._pieces = s, e, code
        self._by_code: tuple[np.ndarray, np.ndarray, list[int]] | None = None

    def __getitem__(self, k: int) -> tl.Intervals:
        if self._by_code is None:
            s, e, code = self._pieces
            order = np.argsort(code, kind="stable")
            first = np.r_[0, np.cumsum(np.bincount(code, minlength=len(IDS)))].tolist()
            self._by_code = s[order], e[order], first
        s, e, first = self._by_code
        return s[first[k]:first[k + 1]], e[first[k]:first[k + 1]]


def _intersect(a: tl.Intervals, b: tl.Intervals) -> tl.Intervals:
    """intervals.intersect of two sets of disjoint intervals in time order: the same
    pieces whichever cuts the other, so the edges of the fewer are searched among the
    more."""
    return tl.intersect(a, b) if a[0].size <= b[0].size else tl.intersect(b, a)


def settle(findings: list[Finding], rules: Sequence[Rule], context: Context,
           processes: int | None = 1) -> list[Finding]:
    """Costs, consequences, shares, severities and per-iteration figures of *findings*
    (made by *rules*), within the context's scope (a --range's windows; else each
    finding's phase), each device's blocks in at most *processes* processes (None: every
    core; gpugap.forkjoin). Returns them ordered steady first, then by cost; findings
    outside the scope go."""
    # Per device, the --range's windows (None: no --range, each finding's phase).
    scope = context.scope.range_scope()
    assign_ids(findings)
    by_id = {r.id: r for r in rules}
    kept: list[Finding] = []
    claims: dict[int, list[_Claiming]] = {}
    # Per device, its steady iterations' windows (None: none), shared by its claims
    # (read only): built once, not per finding (an array from a range of thousands).
    steady_windows: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
    present = {(f.rule, None if f.claim is None else int(f.claim.device), f.phase)
               for f in findings}

    def deferred(f: Finding) -> bool:
        device = None if f.claim is None else int(f.claim.device)
        return any((r, device, f.phase) in present for r in f.settles_after)
    for f in sorted(findings, key=lambda f: (
            by_id[f.rule].priority_of(f.cause), deferred(f),
            -_claimed_ns(f) if by_id[f.rule].peer else 0.0, f.start_ns)):
        if f.claim is None:
            f.cost_ns = 0
            if scope is None or _at_in_scope(f, scope):
                kept.append(f)
            continue
        device = int(f.claim.device)
        dev = context.accounting.devices.get(device)
        if dev is None:
            continue
        where = _where(context, f, scope)
        if scope is not None and where.bounds() is None and not _at_in_scope(f, scope):
            continue
        iterations = None
        if f.phase == "steady":
            if device not in steady_windows:
                its = dev.phases.iteration_windows(dev.phases.steady_iterations)
                steady_windows[device] = its if its[0].size else None
            iterations = steady_windows[device]
        claims.setdefault(device, []).append(_Claiming(
            f, where, [IDS.index(b) for b in dict.fromkeys(f.claim.buckets) if b in IDS],
            iterations, per_iteration=None if iterations is None
            else np.zeros(iterations[0].size, dtype=np.int64)))
    for device, mine in claims.items():
        _settle_device(context.accounting.devices[device], mine, processes)
        for c in mine:
            f = c.finding
            if c.size > 0 and c.size - c.left > 0.5 * c.size:
                f.consequence_of = max(c.overlap, key=c.overlap.get)
            f.cost_ns = int(round(f.claim.weight * c.left))
            wall = _wall(context, f, scope)
            f.share_pct = None if wall <= 0 else round(100.0 * f.cost_ns / wall, 3)
            if f.phase == "steady" or (scope is not None
                                       and f.phase not in ONE_TIME_PHASES):
                f.severity = severity_for(f.cost_ns, wall)
            else:
                f.severity = (Severity.WARNING if f.cost_ns >= ONE_TIME_WARNING_NS
                              else Severity.INFO)
            if f.max_severity is not None and f.severity > f.max_severity:
                f.severity = f.max_severity
            if c.per_iteration is not None:
                cost = f.claim.weight * c.per_iteration
                f.iteration_costs = cost
                f.per_iteration = {
                    "iterations": int(cost.size), "with_cost": int((cost > 0).sum()),
                    "median_ns": int(np.median(cost)), "p90_ns": int(np.percentile(cost, 90)),
                    "max_ns": int(cost.max())}
            kept.append(f)
    dropped = {f.id for f in kept if f.min_share_pct is not None
               and (f.share_pct or 0.0) < f.min_share_pct}
    kept = [f for f in kept if f.id not in dropped]
    for f in kept:
        if f.consequence_of in dropped:
            f.consequence_of = None
    # The steady state (a --range's steady part) first, then the one-time costs.
    rank = {"steady": 0, RANGE_PHASE: 0, "start-up": 1, "warm-up": 2, "tail": 3}
    kept.sort(key=lambda f: (rank.get(f.phase or "steady", 0), -f.cost_ns,
                             -Severity(f.severity).rank))
    return kept


def _claimed_ns(f: Finding) -> float:
    """What a finding claims on its own: its claim's weighted length (0 without one),
    by which peers' findings settle (Rule.peer)."""
    if f.claim is None:
        return 0.0
    return f.claim.weight * tl.total(_as_union(*f.claim.intervals))


def _wall(context: Context, f: Finding, scope: Mapping[int, tl.Intervals] | None) -> int:
    device = int(f.claim.device)
    if scope is not None:
        # One-time parts of a range: a share of its whole time; else of its steady part.
        if f.phase in ONE_TIME_PHASES:
            return tl.total(scope.get(device, tl.EMPTY))
        return tl.total(context.phase_span(device, RANGE_PHASE))
    dev = context.accounting.devices.get(device)
    if dev is None:
        return 0
    if f.phase in ONE_TIME_PHASES:            # one-time: a share of the whole timeline
        return dev.window[1] - dev.window[0]
    return tl.total(context.phase_span(device, f.phase or "steady"))


def _at_in_scope(f: Finding, scope: Mapping[int, tl.Intervals]) -> bool:
    at = f.at_ns if f.at_ns is not None else f.start_ns
    windows = [scope[d] for d in ([f.device] if f.device in scope else scope)]
    return any(bool(tl.within([at], w)[0]) for w in windows)
