"""What every rule shares: the rule filter and thresholds, typed severities and causes,
marks on events that exist, and how a new rule settles and heads the verdict. Each
rule's own cases (where it fires, where it stays silent, its messages) are in
tests/rules/test_<rule>.py (see tests/rules/kit.py)."""

from __future__ import annotations

import pytest

from gpugap.analysis import analyze
from tests.conftest import analyze_report, load_report


def test_rule_filter_and_thresholds() -> None:
    trace = load_report("cublas-warmup-bad")
    only = analyze(trace, rules=["launch-gap"], range_name="measured")
    assert {f.rule for f in only.findings} == {"launch-gap"}
    # A cause must hold min_share_pct of its phase: 100% silences the rule.
    quiet = analyze(trace, rules=["launch-gap"],
                    thresholds={"launch-gap": {"min_share_pct": 100}})
    assert quiet.findings == []


# --- typed results: severities, causes, marks ---------------------------------------

def test_severity_has_one_order_and_reads_as_its_name() -> None:
    import json

    from gpugap.rules import Severity
    from gpugap.rules.base import severity_for

    info, warning, error = Severity.INFO, Severity.WARNING, Severity.ERROR
    assert Severity.names() == ("info", "warning", "error")
    assert sorted([error, info, warning]) == [info, warning, error]
    assert info < warning < error and error >= "warning" and not info > "info"
    assert [s.rank for s in Severity] == [0, 1, 2] and Severity.of_rank(2) is error
    # As plain text: equal to its name, the same key in a dict, the same JSON.
    assert warning == "warning" and {"warning": 1}[warning] == 1
    assert f"{warning:>8}|{error}" == " warning|error" and str(info) == "info"
    assert json.dumps({"s": warning, warning: [error]}) == '{"s": "warning", "warning": ["error"]}'
    # Shares of the scope: below 5% info, from 5% warning, from 20% error.
    assert [severity_for(c, 100) for c in (0, 4.9, 5, 19.9, 20)] == [
        info, info, warning, warning, error]
    assert severity_for(1, 0) is warning and severity_for(0, 0) is info


def test_causes_are_typed_with_a_meaning_and_a_fix() -> None:
    import importlib

    from gpugap.accounting import BUCKETS, host
    from gpugap.rules import RULE_MODULES, Cause, registry

    for module_name in RULE_MODULES:
        module = importlib.import_module(f"gpugap.rules.{module_name}")
        rule = registry()[module.RULE.id]
        assert rule.causes, rule.id
        for cause_id, cause in rule.causes.items():
            assert isinstance(cause, Cause) and cause.id == cause_id
            assert cause.meaning and cause.fix, (rule.id, cause_id)
            assert cause.call_category in (None, *host.CATEGORIES), (rule.id, cause_id)
        assert callable(module.message), f"{module_name}: its wording in message()"
    assert {b.call_category for b in BUCKETS} <= {None, *host.CATEGORIES}


# Whole reports, so that the findings of every phase are checked (tests/rules checks each
# rule's findings on its own captures, kit.check_marks).
MARKED_REPORTS = ["h2d-copy-bad", "default-stream-bad", "cublas-warmup-bad",
                  "moe-experts-bad", "grid-sweep-bad", "prefetch-pipeline-bad",
                  "captures/ddp-manual", "corpus:pt-checkpoint"]


def test_every_finding_is_marked_on_events_that_exist() -> None:
    """Each finding carries marks, and every event a mark names is one event of the
    report (kind, correlation id, stream, process and start agree)."""
    from tests.rules.kit import check_marks

    for name in MARKED_REPORTS:
        check_marks(analyze_report(name).findings, load_report(name), name)


def steady_idle_rule(cause, **declared):
    """A rule written the way a new one would be, in its own module: one finding per
    device that claims all the idle time of its steady state, as *cause*; *declared*:
    what else the rule says of itself (its priority)."""
    from gpugap.accounting import IDLE_IDS
    from gpugap.rules import Finding, Rule, Severity
    from gpugap.rules.base import Claim

    def detect(trace, config, context):
        findings = []
        for device in context.accounting.devices:
            span = context.phase_span(device, "steady")
            findings.append(Finding(
                rule="steady-idle", cause=cause.id, severity=Severity.INFO,
                start_ns=int(span[0][0]), end_ns=int(span[1][-1]), cost_ns=0,
                message="the steady state's idle time", fix=cause.fix, device=int(device),
                phase="steady", claim=Claim(int(device), span, IDLE_IDS)))
        return findings

    return Rule(id="steady-idle", title="Idle time of the steady state", thresholds={},
                rationale="a test of what a rule declares", fix=cause.fix, causes=(cause,),
                detect=detect, **declared)


@pytest.fixture
def register_rule(monkeypatch):
    """Registers a rule the way a new one is: its module, one line in RULE_MODULES."""
    import sys
    import types

    import gpugap.rules

    def register(rule) -> None:
        module = types.ModuleType("gpugap.rules.steady_idle")
        module.RULE = rule
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setattr(gpugap.rules, "RULE_MODULES",
                            (*gpugap.rules.RULE_MODULES, "steady_idle"))
    return register


def _sync_item():
    """A real capture whose steady state is idle in host synchronization (its verdict)."""
    return load_report("captures/sync-item")


def test_a_new_rule_settles_and_heads_the_verdict_as_its_causes_declare(register_rule):
    """Adding a rule touches its module, its tests and the registry: settling and the
    verdict take its priority, title and calls from its Cause, with no change to
    gpugap.rules.settle or gpugap.analysis.verdict."""
    from gpugap.accounting import IDLE_IDS, host
    from gpugap.rules import Cause

    register_rule(steady_idle_rule(Cause(
        "idle", "the GPU had nothing to run", "keep it fed",
        title="Idle in the steady state", priority=-1, call_category="synchronization")))
    trace = _sync_item()
    analysis = analyze(trace)

    # Priority -1: it settles before every other rule, so it takes all the steady
    # state's idle time and no other steady finding keeps any of it.
    dev = analysis.accounting.devices[0]
    idle = analysis.findings_of("steady-idle", "idle")
    assert [f.id for f in idle] == ["steady-idle/idle@0:steady"]
    totals = dev.totals_in(analysis.judged(0))
    assert idle[0].cost_ns == sum(totals[b] for b in IDLE_IDS) > 0
    assert idle[0].consequence_of is None
    assert [f.id for f in analysis.findings if f.phase == "steady" and f.cost_ns > 0
            ] == [idle[0].id]
    # Its title heads the verdict; the calls shown are those of its call category.
    verdict = analysis.verdict
    assert (verdict.rule, verdict.cause) == ("steady-idle", "idle")
    assert verdict.headline.startswith("Idle in the steady state: ")
    calls = verdict.iteration["representative"]["calls"]
    sync_names = set(trace.api["name"][host.api_categories(trace) == host.SYNC])
    assert calls and {c["name"] for c in calls} <= sync_names


def test_a_new_rule_that_declares_nothing_settles_last(register_rule):
    """A rule that declares no priority and a cause with no title: its findings settle
    after every other rule's (consequences of theirs), and a verdict calls it by its ids."""
    from gpugap.rules import Cause

    trace = _sync_item()
    without = analyze_report("captures/sync-item")
    register_rule(steady_idle_rule(Cause("idle", "the GPU had nothing to run",
                                         "keep it fed")))
    analysis = analyze(trace)
    [idle] = analysis.findings_of("steady-idle", "idle")
    # launch-gap's steady findings explain this idle time first: it is theirs.
    assert idle.consequence_of == without.verdict.finding
    assert idle.consequence_of.startswith("launch-gap/") and idle.cost_ns == 0
    assert analysis.verdict.headline == without.verdict.headline
    alone = analyze(trace, rules=["steady-idle"]).verdict
    assert alone.rule == "steady-idle"
    assert alone.headline.startswith("steady-idle [idle]: ")


def test_settle_and_verdict_name_no_rule_or_cause():
    """What settling and the verdict need of a rule or a cause, the rule declares
    (Rule.priority, Cause.title, Cause.priority, Cause.call_category...): no rule's or
    cause's id among their string literals (docstrings may quote one as an example)."""
    import re
    from pathlib import Path

    from gpugap.rules import registry
    from tests.conftest import code_strings

    gpugap = Path(__file__).parents[1] / "gpugap"
    rules = registry().values()
    ids = {r.id for r in rules} | {c for r in rules for c in r.causes}
    for path in (gpugap / "rules" / "settle.py", gpugap / "analysis" / "verdict.py"):
        words = {w for text in code_strings(path.read_text())
                 for w in re.findall(r"[A-Za-z0-9_-]+", text)}
        assert words and sorted(words & ids) == [], path.name


def test_rule_kit_groups_in_batches_equal_one_batch():
    """rules.groups.Groups: the ids of (device, phase, NVTX range) groups hold across
    batches: numbering a report's kernels in three batches names every kernel's group as
    numbering them at once does."""
    import numpy as np

    from gpugap.report.trace import NO_CALL
    from gpugap.rules.base import Context
    from gpugap.rules.groups import Groups

    result = analyze_report("causes/causes-streams")
    trace = load_report("causes/causes-streams")
    k = trace.kernels
    device, start = k["device"].to_numpy(), k["start"].to_numpy()
    launch = k["api_start"].to_numpy()
    at = np.where(launch == NO_CALL, start, launch)

    def keys_of(batches):
        groups = Groups(trace, Context(result.accounting))
        ids = np.concatenate([to_id[local] for local, to_id in
                              (groups.of_batch(device[b], start[b], at[b]) for b in batches)])
        names = {gid: key for key, gid in groups.keys()}
        return [names[i] for i in ids.tolist()], len(groups)

    whole, n = keys_of([slice(None)])
    cut = len(k) // 3
    batched, m = keys_of([slice(0, cut), slice(cut, 2 * cut), slice(2 * cut, None)])
    assert batched == whole and n == m
    assert n > 1 and {phase for _, phase, _ in whole} >= {"steady"}
    assert any(label for _, _, label in whole)              # NVTX ranges name groups
