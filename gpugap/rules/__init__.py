"""The rule registry: one module per rule, discovered from RULE_MODULES."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from gpugap.errors import UsageError
from gpugap.report.trace import Trace
from gpugap.rules.base import Finding, Rule, Threshold

RULE_MODULES = (
    "blocking_memcpy",
    "launch_gap",
    "serialized_streams",
    "small_grid",
    "warmup_latency",
    "copy_compute_serialized",
)


def registry() -> dict[str, Rule]:
    rules = [importlib.import_module(f"gpugap.rules.{m}").RULE for m in RULE_MODULES]
    return {r.id: r for r in rules}


def select(ids: list[str] | None = None) -> list[Rule]:
    reg = registry()
    if not ids:
        return list(reg.values())
    unknown = [i for i in ids if i not in reg]
    if unknown:
        raise UsageError(f"unknown rule {', '.join(unknown)}; rules: {', '.join(reg)}")
    return [reg[i] for i in ids]


def run(trace: Trace, rules: list[Rule] | None = None,
        thresholds: Mapping[str, Mapping[str, float]] | None = None) -> list[Finding]:
    """Every selected rule on *trace*, findings sorted by cost (largest first)."""
    findings: list[Finding] = []
    for rule in rules or select():
        overrides = dict((thresholds or {}).get(rule.id, {}))
        unknown = set(overrides) - set(rule.thresholds)
        if unknown:
            raise UsageError(f"rule {rule.id} has no threshold {', '.join(sorted(unknown))}; "
                             f"it has: {', '.join(rule.thresholds)}")
        findings.extend(rule.run(trace, overrides))
    severity_rank = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: (-f.cost_ns, severity_rank.get(f.severity, 3)))


__all__ = ["Finding", "Rule", "Threshold", "RULE_MODULES", "registry", "run", "select"]
