"""Markdown for CI: an analysis, a check's gates or a diff, for $GITHUB_STEP_SUMMARY or a
PR comment."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpugap.ci.diff import FIXED, NEW, Diff, ScopeDiff
from gpugap.ci.gates import (
    BASELINE,
    FAIL,
    HIGHER,
    MIN,
    PASS,
    Check,
    GateResult,
    fmt_value,
    is_pct,
)
from gpugap.render.numbering import analysis_listing, cost_text, when
from gpugap.rules.model import Severity
from gpugap.text import MESSAGE_LIMIT, NAME_LIMIT, safe_text, shown_path

if TYPE_CHECKING:
    from gpugap.analysis import Analysis
    from gpugap.render.outputs import View

ICON = {PASS: "✅", FAIL: "❌", "skip": "⏭️"}
CHANGE_ICON = {"better": "🟢 better", "worse": "🔴 worse", "unchanged": "unchanged",
               "changed": "changed", "n/a": ""}
STATUS_ICON = {FIXED: "✅ fixed", NEW: "🆕 new", "worse": "🔴 worse", "better": "🟢 better",
               "changed": "count", "unchanged": "same"}
# The per-range table of a diff: the metrics that say whether the timeline has holes.
RANGE_COLUMNS = (("GPU busy", "gpu_busy_pct"), ("kernel overlap", "kernel_overlap_pct"),
                 ("copy/compute overlap", "copy_compute_overlap_pct"),
                 ("concurrency", "concurrency"), ("findings", "findings.count"))


# What can start markup in GitHub-flavoured Markdown inside a line: emphasis, code,
# links and images, raw HTML, autolinks and entities, strikethrough, table pipes, and the
# backslash itself ('>' only quotes at a line's start, where report text never is).
# Backslash-escaped, each is shown as itself (GFM escapes any ASCII punctuation).
_MARKUP = re.compile(r"([\\`*_\[\]<&~|])")


class Code(str):
    """Inline code (:func:`code`): nothing inside it is markup, so a table cell escapes
    only its pipes."""


def text(value: object, limit: int | None = MESSAGE_LIMIT) -> str:
    """Report-derived text on one Markdown line, shown as written: control characters
    escaped and cut to *limit* (gpugap.text), markup characters backslash-escaped (a
    range named '<img src=x onerror=...>' or '[x](http://...)' stays text)."""
    return _MARKUP.sub(r"\\\1", safe_text(str(value).replace("\n", " "), limit))


def cell(value: object) -> str:
    """Text safe inside a Markdown table cell."""
    if isinstance(value, Code):
        return value.replace("|", "\\|")
    return text(value)


def code(value: object) -> Code:
    """A name as inline code, whatever backticks it holds."""
    name = safe_text(value, NAME_LIMIT)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", name)), default=0) + 1)
    pad = " " if name.startswith("`") or name.endswith("`") else ""
    return Code(f"{fence}{pad}{name}{pad}{fence}")


def table(header: list[str], rows: list[list[object]], align: str = "") -> list[str]:
    """A GitHub-flavoured Markdown table; *align* is one of 'l', 'r', 'c' per column."""
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    align = align or "l" * len(header)
    return ["| " + " | ".join(header) + " |",
            "| " + " | ".join(marks[a] for a in align) + " |",
            *("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)]


def scope_name(scope: str | None) -> str:
    return "whole report" if scope is None else f"range {code(scope)}"


def fmt_delta(metric: str, delta: float | int | None) -> str:
    if delta is None:
        return ""
    if isinstance(delta, int):
        return f"{delta:+d}"
    text = f"{delta:+.3f}".rstrip("0").rstrip(".")
    return text + (" pts" if is_pct(metric) else "")


def limit_text(result: GateResult) -> str:
    """'≥ 50%': the bound a gate holds the value to (for a baseline, the worst allowed)."""
    if result.limit is None:
        return ""
    shown = fmt_value(result.metric, result.limit)
    if result.kind == BASELINE:
        at_least = (result.baseline or {}).get("direction") == HIGHER
    else:
        at_least = result.kind == MIN
    return f"{'≥' if at_least else '≤'} {shown}"


def check_markdown(check: Check, view: View | None = None) -> str:
    counts = check.counts()
    if check.passed:
        head = f"### gpugap check: ✅ passed ({counts['gates']} gates)"
    else:
        head = f"### gpugap check: ❌ {counts['failed']} of {counts['gates']} gates failed"
    lines = [head, ""]
    if check.baseline:
        lines += [f"Baseline: {code(check.baseline)}", ""]
    for report in check.reports:
        verdict = "✅ passed" if report.passed else f"❌ {len(report.failures)} failed"
        lines += [f"**{code(shown_path(report.report))}** · {scope_name(report.scope)} · "
                  f"{verdict}", ""]
        # Failures first: in a PR comment they are what the reader is looking for.
        ordered = sorted(report.results, key=lambda r: r.status != FAIL)
        lines += table(["", "Gate", "Value", "Limit", "Detail"],
                       [[ICON.get(r.status, r.status), code(r.name),
                         fmt_value(r.metric, r.value), limit_text(r), r.message]
                        for r in ordered], "clrrl")
        lines += [""] + [f"> ⚠️ {text(w)}" for w in report.warnings] + (
            [""] if report.warnings else [])
    return "\n".join(lines).rstrip() + "\n"


def _scope_table(scope: ScopeDiff) -> list[str]:
    rows = [[code(m.metric), fmt_value(m.metric, m.before), fmt_value(m.metric, m.after),
             fmt_delta(m.metric, m.delta), CHANGE_ICON[m.change]]
            for m in scope.metrics
            # Rules that found nothing on either side add rows, not information.
            if not (m.metric.count(".") == 2 and not m.before and not m.after)]
    return table(["Metric", "Before", "After", "Δ", ""], rows, "lrrrl")


def arrow(metric: str, before, after) -> str:
    if before == after:
        return fmt_value(metric, after)
    return f"{fmt_value(metric, before)} → {fmt_value(metric, after)}"


def diff_markdown(diff: Diff, view: View | None = None) -> str:
    """The findings first (what the change fixed or broke), then the metrics of the
    scope, then the NVTX ranges: a PR comment is read from the top."""
    summary = diff.summary()
    lines = [f"### gpugap diff: {code(shown_path(diff.before))} → "
             f"{code(shown_path(diff.after))}", ""]
    if diff.judgement is not None:
        word, _, rest = diff.judgement.text(diff.range).partition(": ")
        lines += [f"**{CHANGE_ICON.get(word) or word}**: {text(rest)}", ""]
    lines += [f"> ⚠️ {text(w)}" for w in diff.warnings] + ([""] if diff.warnings else [])
    lines += [f"Findings: {summary[FIXED]} fixed, {summary[NEW]} new, "
              f"{summary['changed']} changed, {summary['unchanged']} unchanged", ""]
    if diff.findings:
        rows = [[STATUS_ICON[f.change], f"{f.rule} [{f.cause}]",
                 " > ".join(f.where) or "outside NVTX ranges",
                 arrow("count", f.count_before, f.count_after),
                 f"{arrow('cost', f.cost_ms_before, f.cost_ms_after)} "
                 f"({f.cost_ms_delta:+.3f})"]
                for f in diff.findings]
        lines += ["#### Findings", "",
                  *table(["Status", "Rule [cause]", "Where", "Count", "Cost ms (Δ)"], rows,
                         "lllrr"), ""]
    main = diff.scope(diff.range)
    lines += [f"#### {scope_name(main.scope).capitalize()}", "", *_scope_table(main), ""]
    ranges = [s for s in diff.scopes if s.scope is not None and s is not main]
    if ranges:
        rows = []
        for s in ranges:
            where = s.scope if s.in_before and s.in_after else \
                f"{s.scope} ({'after only' if s.in_after else 'before only'})"
            rows.append([code(where), *(arrow(m, s.get(m).before, s.get(m).after)
                                         for _, m in RANGE_COLUMNS)])
        lines += ["#### NVTX ranges", "",
                  *table(["Range", *(c for c, _ in RANGE_COLUMNS)], rows, "lrrrrr"), ""]
    return "\n".join(lines).rstrip() + "\n"


def analysis_markdown(analysis: Analysis, view: View | None = None) -> str:
    """The verdict, then the findings the terminal lists, with its labels, costs and
    times on the report's clock (gpugap.render.numbering), and what it leaves out."""
    floor = view.min_severity if view is not None else None
    floor = None if floor is None or Severity(floor) <= Severity.INFO else floor
    lines = [f"### gpugap analyze: {code(shown_path(analysis.report))} · "
             f"{scope_name(analysis.scope.range_name)}", ""]
    v = analysis.verdict
    if v is not None:
        lines += [f"**{text(v.kind.upper())}** ({text(v.scope)}): {text(v.headline)}", ""]
        if v.finding:
            lines += [f"finding: {code(v.finding)}", ""]
        if v.fix:
            lines += [f"fix: {text(v.fix)}", ""]
    if analysis.error:
        lines += [f"> ⚠️ {text(analysis.error)}", ""]
    inst = analysis.instances
    if inst is not None:
        lines += [text(inst.text()), ""]
        if inst.between is not None:
            said = inst.between.verdict_text()
            lines += [f"**between:** {text(said)}" if said else text(inst.between.text()),
                      ""]
    listed = analysis_listing(analysis, floor)
    for title, entries in (("Findings " + ("in the range" if analysis.scope.is_range else
                                           "of the steady state"), listed.main),
                           (("Warm-up in the range and other one-time costs"
                             if analysis.scope.is_range else "Start-up and other one-time costs"),
                            listed.one_time)):
        if not entries:
            continue
        rows = [[e.label, Severity(e.finding.severity).upper(),
                 code(f"{e.finding.rule} [{e.finding.cause}]"),
                 cost_text(e), e.finding.phase or "",
                 " > ".join(e.finding.ranges) or "outside NVTX ranges", when(e.finding)]
                for e in entries]
        lines += [f"#### {title}", "",
                  *table(["#", "Severity", "Rule [cause]", "Cost", "Phase", "Where",
                          "When"], rows, "lllrlll"), ""]
    left_out = listed.left_out_text()
    if left_out:
        lines += [f"… {text(left_out)}", ""]
    if not listed.entries and not left_out:
        lines += ["No findings.", ""]
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["analysis_markdown", "check_markdown", "diff_markdown", "table"]
