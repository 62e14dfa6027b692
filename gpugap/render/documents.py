"""The JSON documents gpugap prints (``--json``): built here, from the results, so that
the command line only prints them. ``*_document`` build the document (a dict or list);
``*_json`` are the json format's render functions (gpugap.render.outputs): the
document as text, without its final newline."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gpugap import __version__
from gpugap.jsonout import dumps
from gpugap.rules.model import Severity

if TYPE_CHECKING:
    from gpugap.analysis import Analysis
    from gpugap.analysis.job import Jobs
    from gpugap.ci.diff import Diff
    from gpugap.ci.gates import Check
    from gpugap.render.outputs import View
    from gpugap.rules.model import Rule


def shown_findings(findings: list[dict[str, Any]], floor: Severity | None
                   ) -> list[dict[str, Any]]:
    """The findings (as JSON) of severity *floor* and up; all of them without a floor."""
    if floor is None:
        return findings
    return [f for f in findings if Severity(f["severity"]) >= floor]


def analysis_document(analysis: Analysis, min_severity: Severity | None = None
                      ) -> dict[str, Any]:
    """``gpugap analyze R --json``: the analysis, its findings from *min_severity* up."""
    document = analysis.to_dict()
    document["findings"] = shown_findings(document["findings"], min_severity)
    return document


def jobs_document(jobs: Jobs, min_severity: Severity | None = None) -> dict[str, Any]:
    """``gpugap analyze R1 R2 ... --json``: each report (its analysis, findings from
    *min_severity* up; or why it has none), then the jobs they form."""
    reports: list[dict[str, Any]] = []
    for s in jobs.summaries:
        if s.analysis is None:
            reports.append({"report": s.report, "status": s.status, "error": s.error})
        else:
            reports.append({**s.analysis, "findings": shown_findings(
                s.analysis["findings"], min_severity)})
    return {"gpugap_version": __version__, "reports": reports} | jobs.to_dict()


def rules_document(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    """``gpugap rules --json``: each rule, its causes, thresholds (defaults) and fix."""
    return [{"id": r.id, "title": r.title, "rationale": r.rationale, "fix": r.fix,
             "causes": {c.id: c.meaning for c in r.causes.values()},
             "thresholds": {k: {"default": t.default, "unit": t.unit, "help": t.help}
                            for k, t in r.thresholds.items()}}
            for r in rules]


def scenarios_document(suite: Iterable[Any]) -> list[dict[str, Any]]:
    """``gpugap scenarios --json``: each canned scenario (gpugap.scenarios) and its
    variants with what each expects."""
    return [{"name": s.name, "module": s.module, "seed": s.seed, "title": s.title,
             "look_for": s.look_for, "requires": list(s.requires), "params": s.params,
             "variants": {v.name: {"summary": v.summary,
                                   "expect": [e.describe() for e in v.expect],
                                   "bounds": [b.describe() for b in v.bounds]}
                          for v in s.variants.values()}} for s in suite]


def profile_document(run: Any, out: str) -> dict[str, Any]:
    """``gpugap profile CMD --json``: the profiled run (gpugap.run.runner), where it was
    written and its analysis (null when there is none)."""
    return {"run": run.to_dict(), "out": out,
            "analysis": run.analysis.to_dict() if run.analysis else None}


def scenario_runs_document(passed: bool,
                           results: Iterable[tuple[Any, Any, Mapping[str, Any]]]
                           ) -> dict[str, Any]:
    """``gpugap run SCENARIO --json``: whether every run matched its expectation, then
    each scenario's (scenario, output directory, runs by variant)."""
    return {"passed": passed, "scenarios": [
        {"name": s.name, "out": str(t), "variants": {v: r.to_dict() for v, r in runs.items()}}
        for s, t, runs in results]}


# --- the json format's render functions (gpugap.render.outputs) ----------------------

def analysis_json(analysis: Analysis, view: View) -> str:
    return dumps(analysis_document(analysis, view.min_severity))


def jobs_json(jobs: Jobs, view: View) -> str:
    return dumps(jobs_document(jobs, view.min_severity))


def check_json(check: Check, view: View | None = None) -> str:
    return dumps(check.to_dict())


def diff_json(diff: Diff, view: View | None = None) -> str:
    return dumps(diff.to_dict())


__all__ = ["analysis_document", "analysis_json", "check_json", "diff_json",
           "jobs_document", "jobs_json", "profile_document", "rules_document",
           "scenario_runs_document", "scenarios_document", "shown_findings"]
