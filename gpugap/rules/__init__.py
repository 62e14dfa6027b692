"""The rule registry: one module per rule, discovered from RULE_MODULES."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import partial

from gpugap.errors import UsageError
from gpugap.memory import give_back
from gpugap.report.trace import Trace
from gpugap.rules import catalogue
from gpugap.rules.base import Context, Finding, Rule, Threshold
from gpugap.rules.model import Cause, Severity

RULE_MODULES = (
    "blocking_memcpy",
    "launch_gap",
    "serialized_streams",
    "small_grid",
    "warmup_latency",
    "copy_compute_serialized",
    "exposed_communication",
    "periodic_save",
    "shared_gpu",
    "first_use",
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


def finish(trace: Trace, rules: list[Rule], findings: list[Finding],
           context: Context | None = None) -> list[Finding]:
    """Each rule completes the settled findings it made (see Rule.finish); then each is
    named from the catalogue of causes, its fix read from the evidence
    (gpugap.rules.catalogue, with *context*)."""
    for rule in rules:
        if rule.finish is not None:
            rule.finish(trace, [f for f in findings if f.rule == rule.id])
    if context is not None:
        catalogue.refine(trace, context, findings)
    return findings


def detections(trace: Trace, context: Context, rules: list[Rule],
               config: Mapping[str, Mapping[str, float]]
               ) -> list[Callable[[], list[Finding]]]:
    """Each of *rules*' detection, to be run (in any order, in any process: rules only
    read the trace and the context), with its thresholds in effect, *config* (checked
    and merged with the defaults once: gpugap.rules.thresholds.effective)."""
    return [partial(_detection, rule, trace, context, config[rule.id]) for rule in rules]


def _detection(rule: Rule, trace: Trace, context: Context, config: Mapping[str, float]
               ) -> list[Finding]:
    found = rule.detect(trace, config, context)
    give_back()                              # the rule's batches' memory, to the system
    return found


__all__ = ["Cause", "Context", "Finding", "Rule", "Severity", "Threshold", "RULE_MODULES",
           "detections", "finish", "registry", "select"]
