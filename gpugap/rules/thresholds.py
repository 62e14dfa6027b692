"""Rule thresholds, parsed and checked once, here, in the layer that owns the rules.

A threshold is named ``RULE.NAME`` (``launch-gap.min_gap_us``) wherever a user writes
one: the command line's ``--set RULE.NAME=VALUE``, the API's
``thresholds={"RULE.NAME": VALUE}`` (or nested by rule), a configuration file's
``[tool.gpugap.thresholds.RULE]`` table (gpugap.ci.config reads the file and hands each
value here). Every value is checked by :func:`check` (a known rule and threshold, a
finite number, >= 0, at most 1 for a fraction and 100 for a percentage); an analysis
then takes each selected rule's defaults with the values set on top, once
(:func:`effective`), and the accounting receives the settings some thresholds declare
(``Threshold.setting``), by name (:func:`accounting_settings`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gpugap.accounting.policy import Settings
from gpugap.errors import UsageError
from gpugap.rules import registry
from gpugap.rules.base import Rule

# Rule thresholds are all non-negative; shares have an upper bound too.
UNIT_MAXIMUM = {"fraction": 1.0, "%": 100.0}
EXAMPLE = "launch-gap.min_gap_us"


def number(value: Any, where: str, *, minimum: float | None = None,
           maximum: float | None = None) -> float:
    """*value* as a float: a finite number within [minimum, maximum], else UsageError
    naming *where*."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where} must be a number, not {value!r}")
    if not math.isfinite(value):
        raise UsageError(f"{where} must be a finite number, not {value!r}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{where} must be >= {minimum:g}, not {value!r}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{where} must be <= {maximum:g}, not {value!r}")
    return float(value)


def check(rule_id: str, name: str, value: Any, where: str) -> float:
    """*value* checked as the threshold *name* of rule *rule_id*: a known rule and
    threshold (else UsageError naming the valid ones), a finite number, >= 0, and at
    most 1 for a fraction, 100 for a percentage. *where* names the source in errors."""
    rules = registry()
    rule = rules.get(rule_id)
    if rule is None:
        raise UsageError(f"unknown rule '{rule_id}' in {where}; rules: {', '.join(rules)}")
    if name not in rule.thresholds:
        raise UsageError(f"rule {rule_id} has no threshold {name} ({where}); it has: "
                         f"{', '.join(rule.thresholds)}")
    unit = rule.thresholds[name].unit
    return number(value, f"{where} {rule_id}.{name} ({unit})", minimum=0,
                  maximum=UNIT_MAXIMUM.get(unit))


def split_name(key: str) -> tuple[str, str] | None:
    """``RULE.NAME`` as (rule, name), spaces around either stripped; None where it is
    not of that form."""
    rule, dot, name = key.strip().partition(".")
    rule, name = rule.strip(), name.strip()
    return (rule, name) if dot and rule and name else None


def from_assignments(items: Iterable[str], where: str = "--set"
                     ) -> dict[str, dict[str, float]]:
    """``RULE.NAME=VALUE`` strings (the command line's --set), each checked, nested by
    rule."""
    out: dict[str, dict[str, float]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        named = split_name(key)
        if not (eq and named and value.strip()):
            raise UsageError(f"bad {where} '{item}'; write RULE.NAME=VALUE, "
                             f"e.g. {EXAMPLE}=50")
        try:
            figure = float(value)
        except ValueError:
            raise UsageError(f"bad {where} '{item}': '{value.strip()}' is not a "
                             "number") from None
        rule, name = named
        out.setdefault(rule, {})[name] = check(rule, name, figure, where)
    return out


def from_mapping(thresholds: Mapping[str, Any], where: str = "thresholds"
                 ) -> dict[str, dict[str, float]]:
    """The API's thresholds, each checked, nested by rule: keyed ``"RULE.NAME"``
    (``{"launch-gap.min_gap_us": 50}``) or nested (``{"launch-gap": {"min_gap_us":
    50}}``); a key of neither form is a TypeError or a UsageError."""
    if not isinstance(thresholds, Mapping):
        raise TypeError(f"{where} must be a mapping such as {{'{EXAMPLE}': 50}}")
    out: dict[str, dict[str, float]] = {}
    for key, values in thresholds.items():
        if not isinstance(key, str):
            raise TypeError(f"{where} keys must be 'RULE.NAME' strings, not {key!r}")
        if isinstance(values, Mapping):
            pairs = [(key, name, value) for name, value in values.items()]
        else:
            rule, dot, name = key.partition(".")
            if not (dot and rule and name):
                raise UsageError(f"bad {where} key '{key}'; write 'RULE.NAME', e.g. "
                                 f"{{'{EXAMPLE}': 50}}, or nest it: "
                                 "{'launch-gap': {'min_gap_us': 50}}")
            pairs = [(rule, name, values)]
        for rule, name, value in pairs:
            out.setdefault(rule, {})[name] = check(rule, name, value, where)
    return out


def from_tables(tables: Mapping[str, Any], where: Callable[..., str]
                ) -> dict[str, dict[str, float]]:
    """A configuration file's ``[thresholds]``: a table per rule id of values by
    threshold name, each checked, nested by rule. *where*(*keys*) names the table of
    *keys* (``where("thresholds", "launch-gap")``) in errors."""
    rules = registry()
    out: dict[str, dict[str, float]] = {}
    for rule_id, values in tables.items():
        rule = rules.get(rule_id)
        if rule is None:
            raise UsageError(f"unknown rule '{rule_id}' in {where('thresholds')}; rules: "
                             f"{', '.join(rules)}")
        table = where("thresholds", rule_id)
        if not isinstance(values, dict):
            raise UsageError(f"{table} must be a table, not {type(values).__name__}")
        unknown = [k for k in values if k not in rule.thresholds]
        if unknown:
            raise UsageError(f"unknown key '{unknown[0]}' in {table}; known: "
                             f"{', '.join(rule.thresholds)}")
        out[rule_id] = {k: check(rule_id, k, v, where("thresholds"))
                        for k, v in values.items()}
    return out


def effective(rules: Iterable[Rule], overrides: Mapping[str, Mapping[str, float]] | None
              ) -> dict[str, dict[str, float]]:
    """Each of *rules*' thresholds in effect: its defaults with *overrides* on top (the
    overrides of other rules are not theirs to take); an override naming a threshold the
    rule lacks is a UsageError naming those it has."""
    out = {}
    for rule in rules:
        mine = dict((overrides or {}).get(rule.id, {}))
        unknown = set(mine) - set(rule.thresholds)
        if unknown:
            raise UsageError(f"rule {rule.id} has no threshold {', '.join(sorted(unknown))}; "
                             f"it has: {', '.join(rule.thresholds)}")
        out[rule.id] = rule.defaults() | mine
    return out


def accounting_settings(rules: Iterable[Rule],
                        values: Mapping[str, Mapping[str, float]] | None) -> Settings:
    """The accounting's settings from the thresholds in effect, *values* (effective):
    each threshold that declares an accounting setting (``Threshold.setting``: launch-
    gap's min_gap_us, the accounting's own MIN_GAP_US) hands its value over by that
    setting's name; one set to other than its default decides alone
    (gpugap.accounting.policy.Settings.with_min_gap)."""
    named = {t.setting: (values or {}).get(r.id, {}).get(name)
             for r in rules for name, t in r.thresholds.items() if t.setting is not None}
    return Settings.with_min_gap(named.get("min_gap_us"))
