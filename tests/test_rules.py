"""Each rule fires where the puzzle is, with the right cause, and stays silent where it is
not: exact verdicts on the real reports of every seed puzzle (tests/data/scenarios)."""

from __future__ import annotations

import pytest

from gpugap.analysis import Analysis, analyze
from tests.conftest import load_report


def measured(name: str) -> Analysis:
    return analyze(load_report(name), range_name="measured")


def causes(a: Analysis, rule: str) -> set[str]:
    return {f.cause for f in a.findings if f.rule == rule}


# (report, rule, cause) that must fire in the measured range of the bad variant, and
# must not fire (with that cause) in the measured range of the good variant.
PUZZLES = [
    ("h2d-copy", "blocking-memcpy", "pageable-async"),
    ("default-stream", "serialized-streams", "legacy-default-stream"),
    ("cublas-warmup", "warmup-latency", "module-load"),
    ("cublas-warmup", "launch-gap", "module-load"),
    ("moe-experts", "serialized-streams", "host-launch-bound"),
    ("grid-sweep", "small-grid", "undersized-grid"),
    ("prefetch-pipeline", "copy-compute-serialized", "same-stream"),
]


@pytest.mark.parametrize(("scenario", "rule", "cause"), PUZZLES)
def test_bad_variant_fires_with_cause(scenario: str, rule: str, cause: str) -> None:
    assert cause in causes(measured(f"{scenario}-bad"), rule)


@pytest.mark.parametrize(("scenario", "rule", "cause"), PUZZLES)
def test_good_variant_stays_silent(scenario: str, rule: str, cause: str) -> None:
    assert cause not in causes(measured(f"{scenario}-good"), rule)


def test_saturated_grids_are_serialized_by_saturation_as_info() -> None:
    good = measured("grid-sweep-good")
    saturated = good.findings_of("serialized-streams", "resource-saturation")
    assert saturated and all(f.severity == "info" and f.cost_ns == 0 for f in saturated)
    assert "neither possible nor needed" in saturated[0].message
    # Only saturation explains it; undersized grids overlap and are never 'serialized'.
    assert causes(good, "serialized-streams") == {"resource-saturation"}
    assert causes(measured("grid-sweep-bad"), "serialized-streams") == set()
    assert causes(good, "small-grid") == set()


def test_pinned_copies_never_block() -> None:
    for name in ("h2d-copy-good", "prefetch-pipeline-bad", "prefetch-pipeline-good"):
        assert measured(name).findings_of("blocking-memcpy") == [], name


def test_blocking_copy_evidence_names_the_copies() -> None:
    a = measured("h2d-copy-bad")
    # The measured range is one scope (its warm-up iteration included): one finding.
    (f,) = a.findings_of("blocking-memcpy", "pageable-async")
    assert f.phase == "range" and f.count == 8     # one per measured iteration
    found = [f]
    # The whole report: the steady iterations' copies apart from the warm-up's.
    whole = analyze(load_report("h2d-copy-bad"))
    (steady,) = [g for g in whole.findings_of("blocking-memcpy", "pageable-async")
                 if g.phase == "steady"]
    assert steady.count == 7 and steady.per_iteration["iterations"] == 7
    trace = load_report("h2d-copy-bad")
    copies = trace.memcpys
    assert f.evidence["api"] == "cudaMemcpyAsync"
    assert f.evidence["memory"] == "Pageable -> Device"
    assert f.evidence["bytes_total"] == 8 * 64 * 2**20
    # The cost is the GPU time the copies explain: their own time with nothing beside
    # them (the host, held in the call, could launch no GEMM) and the idle time they
    # left. About the time the thread sat in the calls, never more than the range.
    assert 0.8 * f.evidence["blocked_ns_total"] < f.cost_ns
    assert f.cost_ns <= f.evidence["blocked_ns_total"] + f.evidence["copy_ns_total"]
    assert sum(x.cost_ns for x in found) <= a.metrics.span_ns
    for c in f.evidence["copies"]:
        row = copies[copies["corr"] == c["correlation_id"]].iloc[0]
        assert c["bytes"] == row["bytes"] == 64 * 2**20
        assert c["copy_ns"] == row["end"] - row["start"]
        assert c["blocked_ns"] == row["api_end"] - row["api_start"]
        # ...and a pageable copy holds the thread about as long as the copy itself runs,
        assert c["blocked_ns"] >= 0.8 * c["copy_ns"]
        # at the bandwidth of a staged copy, far below a pinned one's.
        assert c["gbps"] < 25


def test_legacy_default_stream_evidence() -> None:
    a = measured("default-stream-bad")
    found = a.findings_of("serialized-streams", "legacy-default-stream")
    trace = load_report("default-stream-bad")
    legacy = sorted(s for _, s in trace.legacy_streams())
    assert legacy == [7]
    # 3 rounds x 5 streams of add_one, each followed by a bump on the NULL stream, in
    # the measured range (one scope: its warm-up round included): one finding, one run.
    assert [f.phase for f in found] == ["range"]
    assert found[0].evidence["kernels"] == 3 * 5 * 2 and found[0].evidence["runs"] == 1
    for f in found:
        assert set(f.streams) == {7, 13, 14, 15, 16, 17}
        first = f.evidence["transitions"][0]
        assert 7 in (first["first"]["stream"], first["then"]["stream"])
    # >1 ms of lost overlap in a 2 ms region, and never more than the region.
    assert 1_000_000 < sum(f.cost_ns for f in found) <= a.metrics.span_ns


def test_host_launch_bound_evidence() -> None:
    a = measured("moe-experts-bad")
    (f,) = a.findings_of("serialized-streams", "host-launch-bound")
    assert len(f.streams) == 8 and f.phase == "range"
    assert f.evidence["runs"] == 20              # one run per measured forward
    # Per iteration, over the whole report's steady state.
    (steady,) = [g for g in analyze(load_report("moe-experts-bad")).findings_of(
        "serialized-streams", "host-launch-bound") if g.phase == "steady"]
    assert steady.evidence["runs"] == 19
    assert steady.per_iteration["iterations"] == 19 and steady.per_iteration["with_cost"] == 19
    # The GPU waited on the host for most of the measured region: the verdict.
    assert f.cost_ns > 0.5 * a.metrics.span_ns
    assert a.verdict.finding == f.id


def test_module_load_gap_points_at_cublas_loading() -> None:
    a = measured("cublas-warmup-bad")
    (gap,) = a.findings_of("launch-gap", "module-load")
    assert gap.cost_ns > 50e6           # tens of cuLibraryLoadData calls, cuBLAS between
    names = {h["name"] for g in gap.evidence["gaps"] for h in g["host_calls"]}
    assert "cuLibraryLoadData" in names
    assert a.verdict.finding == gap.id and a.verdict.share_pct > 50
    # The slow first iteration is the same stall: linked to it, not counted again.
    (first_iter,) = a.findings_of("warmup-latency", "first-iteration")
    assert first_iter.evidence["items"][0]["first_ns"] > 100 * \
        first_iter.evidence["items"][0]["typical_ns"]
    assert first_iter.consequence_of is not None
    assert first_iter.cost_ns < 0.01 * gap.cost_ns
    assert sum(f.cost_ns for f in a.findings) <= a.metrics.span_ns


def test_small_grid_weighs_by_time_share() -> None:
    bad = measured("grid-sweep-bad")
    by_range = {tuple(f.ranges): f for f in bad.findings_of("small-grid")}
    # 5 concurrent grids of 1 or 8 blocks leave most of the 132 SMs idle; 5 x 32 = 160
    # blocks running together cover them all, so grid=32 stays silent.
    assert set(by_range) == {("measured", "grid=1"), ("measured", "grid=8")}
    one = by_range[("measured", "grid=1")]
    assert one.evidence["kernels"][0]["blocks"] == 1
    assert one.evidence["kernels"][0]["sms_used"] == 1
    assert one.evidence["sm_count"] == 132
    assert one.evidence["idle_sm_pct"] > 95                 # 5 of 132 SMs busy
    # 5 x 8 = 40 of 132 SMs busy while all five run: about 70% idle.
    assert 65 < by_range[("measured", "grid=8")].evidence["idle_sm_pct"] < 80
    # Idle SM time is counted once per instant, not once per concurrent kernel: it
    # cannot exceed the time the kernels were running.
    for f in by_range.values():
        assert f.cost_ns <= f.end_ns - f.start_ns
    # Rare tiny kernels stay silent: prefetch-pipeline's 'check' range launches 15 of
    # them, but they take about 0.1% of its kernel time (threshold 5%).
    trace = load_report("prefetch-pipeline-bad")
    k = trace.kernels
    from gpugap.rules._common import range_labels
    in_check = range_labels(trace, k["api_start"].where(k["api_start"] >= 0, k["start"])) == "check"
    assert (k["blocks"][in_check] < 66).sum() == 15
    assert analyze(trace, range_name="check").findings_of("small-grid") == []


def test_rule_filter_and_thresholds() -> None:
    trace = load_report("cublas-warmup-bad")
    only = analyze(trace, rules=["launch-gap"], range_name="measured")
    assert {f.rule for f in only.findings} == {"launch-gap"}
    # A cause must hold min_share_pct of its phase: 100% silences the rule.
    quiet = analyze(trace, rules=["launch-gap"],
                    thresholds={"launch-gap": {"min_share_pct": 100}})
    assert quiet.findings == []


def test_copies_taking_turns_with_compute_on_one_stream() -> None:
    (f,) = measured("prefetch-pipeline-bad").findings_of("copy-compute-serialized")
    assert f.cause == "same-stream"
    trace = load_report("prefetch-pipeline-bad")
    batches = trace.nvtx[trace.nvtx["name"] == "batch"]
    assert len(batches) == 12
    # Every copy but the first sits between two compute kernels on the same stream.
    assert f.count == 11
    assert {c["kernel_streams"][0] for c in f.evidence["copies"]} == set(f.streams)
    assert f.cost_ns == f.evidence["copy_ns_alone"]
    assert all(c["alone_ns"] >= 0.8 * (c["end_ns"] - c["start_ns"])
               for c in f.evidence["copies"])
    # The pipelined variant overlaps them: silent there, and its overlap shows it.
    good = measured("prefetch-pipeline-good")
    assert good.findings_of("copy-compute-serialized") == []
    assert good.metrics.copy_compute_overlap_pct > 80
    # Blocking copies are blocking-memcpy's: h2d-copy-bad's pageable copies overlap no
    # kernel either, but are not reported twice.
    assert measured("h2d-copy-bad").findings_of("copy-compute-serialized") == []


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


# Reports on which every rule fires (exposed-communication needs two GPUs: ddp-manual).
MARKED_REPORTS = ["h2d-copy-bad", "default-stream-bad", "cublas-warmup-bad",
                  "moe-experts-bad", "grid-sweep-bad", "prefetch-pipeline-bad", "ddp-manual",
                  "corpus:pt-checkpoint"]


def _trace(name: str):
    from gpugap.report import load

    if name == "ddp-manual":
        from tests.conftest import DATA

        return load(DATA / "captures" / "ddp-manual.sqlite")
    if name.startswith("corpus:"):
        from tests.conftest import corpus_capture

        return load(corpus_capture(name.removeprefix("corpus:")))
    return load_report(name)


def _events_matching(frames: dict, ref) -> int:
    """How many events of the report *ref* (gpugap.rules.model.EventRef) names."""
    f = frames[ref.kind]
    hit = f["corr"] == ref.correlation_id
    for column, wanted in (("stream", ref.stream), ("pid", ref.pid), ("start", ref.start_ns)):
        if wanted is not None:
            hit &= f[column] == wanted
    return int(hit.sum())


def test_every_finding_is_marked_on_events_that_exist() -> None:
    """Each rule attaches marks to its findings, and every event a mark names is one
    event of the report (kind, correlation id, stream, process and start agree)."""
    from gpugap.rules import registry
    from gpugap.rules.model import Band, Link, Outline, Span

    seen: set[str] = set()
    for name in MARKED_REPORTS:
        trace = _trace(name)
        frames = {"kernel": trace.kernels, "memcpy": trace.memcpys, "memset": trace.memsets,
                  "graph": trace.graphs, "api": trace.api}
        threads = set(trace.api["gtid"].tolist()) | set(trace.nvtx["gtid"].tolist())

        for f in analyze(trace).findings:
            assert f.marks, f.id
            assert "marks" not in f.to_dict() and type(f.to_dict()["severity"]) is str
            seen.add(f.rule)
            for mark in f.marks:
                if isinstance(mark, Outline):
                    assert _events_matching(frames, mark.event) == 1, (name, f.id, mark)
                elif isinstance(mark, Link):
                    assert _events_matching(frames, mark.source) == 1, (name, f.id, mark)
                    assert _events_matching(frames, mark.target) == 1, (name, f.id, mark)
                elif isinstance(mark, Band):
                    assert mark.start_ns <= mark.end_ns and mark.device == f.device
                else:
                    assert isinstance(mark, Span) and mark.gtid in threads
                    assert mark.start_ns <= mark.end_ns and mark.lane in ("api", "nvtx")
    assert seen == set(registry())


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
    from gpugap.report import load
    from tests.conftest import DATA

    return load(DATA / "captures" / "sync-item.sqlite")


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
    without = analyze(trace)
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
