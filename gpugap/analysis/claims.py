"""No claim contradicts another: one check of every number an analysis states.

Costs come from one accounting and settle so that they never add up to more than their
scope (gpugap.rules.settle); this module checks what is said with them, before anything
is printed (gpugap.analysis.core runs it on every analysis; a contradiction found is a
warning of the analysis, and the tests run it over every committed capture):

- a share of a scope is between 0 and 100%, and the findings of one device and phase
  cost no more than that phase's wall time together;
- "k of n" (iterations, instances) has k <= n, wherever a sentence says it;
- a percentage said of something ("52.8% of the steady state") is at most 100%;
- a part is no larger than its whole: a wait inside collectives no longer than the
  communication it waited in, the mean cost of an iteration no more than the mean
  iteration, a median no more than its p90;
- a finding's cost per iteration is not more than the iteration.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from gpugap.rules.base import ONE_TIME_PHASES

# An analysis (gpugap.analysis.core.Analysis, which runs these checks: typed by what is
# read of it, not imported, so that the two modules do not import each other).
Analysis = Any

# "3 of 47 iterations", "in 38 of 39": k of n.
_K_OF_N = re.compile(r"\b(\d+) of (\d+)\b(?! ?(?:%|ms|us|ns|s\b|MB|GB|KB|B\b))")
# "52.8% of the steady state", "(70.6% of ...)": a share of a whole.
_SHARE_OF = re.compile(r"(\d+(?:\.\d+)?)% of\b")
# Slack for rounding (ns): figures are compared as printed numbers come from them.
_SLACK_NS = 1000


def _texts(analysis: Analysis) -> list[tuple[str, str]]:
    """(where, sentence) of everything the analysis says in words."""
    out: list[tuple[str, str]] = []
    v = analysis.verdict
    if v is not None:
        out.append(("verdict", v.headline))
        out += [(f"verdict also {a.get('finding')}", a.get("headline") or "") for a in v.also]
    for d in analysis.devices:
        head = (d.get("verdict") or {}).get("headline")
        if head:
            out.append((f"GPU {d['device']} verdict", head))
    out += [(f.id or f.rule, f.message) for f in analysis.findings]
    return out


def contradictions(analysis: Analysis) -> list[str]:
    """Every contradiction in *analysis*, one line each (empty: none)."""
    found: list[str] = []
    for where, text in _texts(analysis):
        for k, n in _K_OF_N.findall(text):
            if int(k) > int(n):
                found.append(f"{where}: '{k} of {n}' says more than all")
        for pct in _SHARE_OF.findall(text):
            if float(pct) > 100.0 + 1e-9:
                found.append(f"{where}: a share of {pct}% of a whole")
    v = analysis.verdict
    if v is not None:
        found += _verdict(v.to_dict(), "verdict")
    for d in analysis.devices:
        if d.get("verdict"):
            found += _verdict(d["verdict"], f"GPU {d['device']} verdict")
    walls = _phase_walls(analysis)
    spent: dict[tuple[int | None, str | None], int] = defaultdict(int)
    for f in analysis.findings:
        where = f.id or f.rule
        if f.share_pct is not None and not 0.0 <= f.share_pct <= 100.0 + 1e-9:
            found.append(f"{where}: share {f.share_pct}% outside 0-100%")
        if f.cost_ns < 0:
            found.append(f"{where}: negative cost {f.cost_ns} ns")
        spent[(f.device, f.phase)] += f.cost_ns
        found += _evidence(where, f.evidence)
        per = f.per_iteration or {}
        if per.get("median_ns", 0) > per.get("p90_ns", per.get("median_ns", 0)) + _SLACK_NS:
            found.append(f"{where}: per-iteration median above its p90")
        hits, of = per.get("iterations_hit"), per.get("iterations")
        if hits is not None and of is not None and hits > of:
            found.append(f"{where}: hit {hits} of {of} iterations")
    for (device, phase), cost in spent.items():
        wall = walls.get((device, phase))
        if wall is not None and cost > wall + _SLACK_NS:
            found.append(f"GPU {device} {phase}: findings cost {cost} ns in a {wall} ns "
                         "phase")
    return found


def _verdict(v: dict[str, Any], where: str) -> list[str]:
    out = []
    share = v.get("share_pct")
    if share is not None and not 0.0 <= share <= 100.0 + 1e-9:
        out.append(f"{where}: share {share}% outside 0-100%")
    busy = v.get("busy_pct")
    if busy is not None and not 0.0 <= busy <= 100.0 + 1e-9:
        out.append(f"{where}: busy {busy}% outside 0-100%")
    it = v.get("iteration") or {}
    if "cost_mean_ns" in it and it["cost_mean_ns"] > it.get("mean_ns", 0) + _SLACK_NS:
        out.append(f"{where}: {it['cost_mean_ns']} ns lost of a {it.get('mean_ns')} ns "
                   "iteration")
    if it.get("median_ns", 0) > it.get("p90_ns", it.get("median_ns", 0)) + _SLACK_NS:
        out.append(f"{where}: iteration median above its p90")
    rep = it.get("representative") or {}
    if rep and rep.get("cost_ns", 0) > rep.get("end_ns", 0) - rep.get("start_ns", 0) \
            + _SLACK_NS:
        out.append(f"{where}: iteration '{rep.get('label')}' lost more than its length")
    return out


# Evidence (part, whole) pairs: the part can never exceed the whole.
_PARTS = (("waiting_for_peer_ns", "comm_time_ns"), ("waiting_for_peer_ns", "exposed_ns"),
          ("exposed_ns", "comm_time_ns"), ("side_by_side_ns", None))


def _evidence(where: str, evidence: dict[str, Any]) -> list[str]:
    out = []
    for part, whole in _PARTS:
        a = evidence.get(part)
        b = evidence.get(whole) if whole else None
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
                and a > b + _SLACK_NS:
            out.append(f"{where}: {part} {a} exceeds {whole} {b}")
    return out


def _phase_walls(analysis: Analysis) -> dict[tuple[int | None, str | None], int]:
    """Each device's wall time per finding phase: the steady state, the whole window for
    one-time costs (start-up, tail: their shares are of it); under a --range, its steady
    part, and its whole time for its one-time parts."""
    out: dict[tuple[int | None, str | None], int] = {}
    acc = analysis.accounting
    if acc is None:
        return out
    scope = analysis.scope
    for device, dev in acc.devices.items():
        windows = analysis.judged(device)
        out[(device, "range" if scope.is_range else "steady")] = \
            int((windows[1] - windows[0]).sum())
        whole = int(dev.window[1] - dev.window[0])
        if scope.is_range:
            mine = scope.range_on(device)
            whole = int((mine[1] - mine[0]).sum())
        for phase in ONE_TIME_PHASES:
            out[(device, phase)] = whole
    return out
