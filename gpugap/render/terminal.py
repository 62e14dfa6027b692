"""The terminal view of an Analysis: the verdict first, then the steady state's
accounting and findings (of a --range: its instances, the time between them, the
findings of its steady part), then one-time costs (start-up), then the ranges. What is
listed, numbered and left out is gpugap.render.numbering's, as in every other view.

Every string that comes from a report (kernel, API and NVTX names, messages that quote
them) goes through gpugap.text: control characters escaped, long names cut, never
parsed as rich markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpugap.accounting.buckets import BUSY_IDS, BY_ID
from gpugap.accounting.metrics import Metrics
from gpugap.analysis import Analysis
from gpugap.render.fit import table_width, text_width, wrap_name
from gpugap.render.numbering import (
    Entry,
    analysis_listing,
    at,
    hidden_text,
    limited,
    sections,
    when,
)
from gpugap.render.numbering import head as finding_head
from gpugap.rules.base import Finding
from gpugap.rules.model import Severity
from gpugap.text import MESSAGE_LIMIT, fit_path, safe_rich, safe_text, shown_path
from gpugap.units import fmt_ns

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
KIND_STYLE = {"bottleneck": "bold red", "healthy": "bold green", "spread": "bold yellow",
              "no-gpu-work": "dim"}


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def metrics_table(m: Metrics, title: str) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None,
                  pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("span", fmt_ns(m.span_ns)),
        ("GPU busy / idle", f"{pct(m.gpu_busy_pct)} / {pct(m.gpu_idle_pct)}"),
        ("kernel overlap", pct(m.kernel_overlap_pct)),
        ("copy/compute overlap", pct(m.copy_compute_overlap_pct)),
        ("concurrency", _num(m.concurrency)),
        ("kernels / copies / memsets", f"{m.kernels} / {m.copies} / {m.memsets}"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    return table


def verdict_panel(analysis: Analysis) -> Panel | None:
    v = analysis.verdict
    if v is None:
        return None
    body = Text()
    body.append_text(safe_rich(v.headline, limit=MESSAGE_LIMIT))
    it = v.iteration or {}
    rep = it.get("representative")
    if rep:
        calls = ", ".join(f"{safe_text(c['name'], 60)} x{c['count']} ({fmt_ns(c['ns'])})"
                          for c in rep.get("calls", [])[:4])
        body.append("\nevidence: ", style="bold")
        body.append_text(safe_rich(
            f"iteration '{rep['label']}' ({fmt_ns(rep['end_ns'] - rep['start_ns'])}, "
            f"t={rep['start_ns'] / 1e9:.6f}s) lost {fmt_ns(rep['cost_ns'])}"
            + (f"; the host was in {calls}" if calls else ""), limit=MESSAGE_LIMIT))
    if v.finding:
        body.append("\nfinding: ", style="bold")
        body.append_text(safe_rich(v.finding))
    for item in v.also:
        body.append("\nalso: ", style="bold yellow")
        body.append_text(safe_rich(f"{item['headline']} [{item['finding']}]",
                                   limit=MESSAGE_LIMIT))
    if v.host is not None:
        # What the CPU ran while the GPU idled (gpugap.analysis.host_evidence).
        # (Its threads and frames follow the steady state: host_text.)
        for i, line in enumerate(v.host.brief()):
            body.append("\nhost: " if i == 0 else "\n  ", style="bold cyan")
            body.append_text(safe_rich(line, limit=MESSAGE_LIMIT))
    if v.fix:
        body.append("\nfix: ", style="bold green")
        body.append_text(safe_rich(v.fix, limit=MESSAGE_LIMIT))
    between = analysis.instances.between if analysis.instances is not None else None
    said = between.verdict_text() if between is not None else None
    if said:                            # the problem a --range leaves between its instances
        body.append("\nbetween: ", style="bold yellow")
        body.append_text(safe_rich(said, limit=MESSAGE_LIMIT))
        framework = analysis.program.framework if analysis.program is not None else None
        fix = between.fix(framework)
        if fix:
            body.append("\nfix: ", style="bold green")
            body.append_text(safe_rich(fix, limit=MESSAGE_LIMIT))
    title = Text.assemble(("VERDICT ", "bold"), (v.kind.upper(), KIND_STYLE.get(v.kind, "")),
                          f"  {v.scope}")
    return Panel(body, title=title, title_align="left",
                 border_style=KIND_STYLE.get(v.kind, "white"))


def joined(parts: list[Text], width: int | None = None, indent: int = 0,
           sep: str = " | ", first_indent: int | None = None) -> Text:
    """*parts* joined by *sep*, each line no wider than *width*: a part that would
    cross it starts a new line, indented by *indent* (the first line by *first_indent*,
    default *indent*), the separator's mark ('|' dropped, ';' kept) ending the line
    before. A part is broken only when it is wider than a line on its own."""
    start = indent if first_indent is None else first_indent
    out = Text(" " * start)
    column = start
    mark = sep.strip() if sep.strip() != "|" else ""
    for i, part in enumerate(parts):
        if i:
            if width is not None and column + len(sep) + part.cell_len > width:
                out.append(mark + "\n" + " " * indent, style="dim" if not mark else "")
                column = indent
            else:
                out.append(sep, style="dim" if sep == " | " else "")
                column += len(sep)
        out.append_text(part)
        column += part.cell_len
    return out


def breakdown_line(breakdown: dict[str, float], limit: int = 6, width: int | None = None,
                   indent: int = 0) -> Text:
    """'compute 54.5% | synchronization 28.2% | ...' (busy in green, idle in yellow),
    wrapped between its shares to *width*."""
    parts = []
    for bucket, share in list(breakdown.items())[:limit]:
        title = BY_ID[bucket].title if bucket in BY_ID else bucket
        parts.append(Text(f"{title} {share:.1f}%",
                          style="green" if bucket in BUSY_IDS else "yellow"))
    return joined(parts, width, indent)


def phases_text(analysis: Analysis, width: int | None = None) -> Text | None:
    out = Text()
    for d in analysis.devices:
        acc = d.get("accounting") or {}
        verdict = d.get("verdict") or {}
        it = acc.get("iterations")
        line = Text(f"GPU {d['device']}: ", style="bold")
        if it:
            steady = acc.get("steady") or {}
            first = (acc.get("first_use") or {}).get("iterations") or []
            line.append_text(safe_rich(
                f"{it['count']} iterations ({acc['how']}); {it['warmup']} warm-up, "
                + (f"{len(first)} first use{'s' if len(first) != 1 else ''} of new work, "
                   if first else "")
                + f"{it['steady']} steady{_steady_from(acc)}, median "
                f"{fmt_ns(steady.get('iteration_median_ns') or 0)} "
                f"(p90 {fmt_ns(steady.get('iteration_p90_ns') or 0)})", limit=MESSAGE_LIMIT))
        else:
            line.append_text(safe_rich(acc.get("how", "no phases"), limit=MESSAGE_LIMIT))
        phases = acc.get("phases") or {}
        startup = phases.get("start-up", {}).get("ns", 0) + phases.get("warm-up", {}).get("ns", 0)
        line.append(f"; start-up {fmt_ns(startup)}", style="dim")
        out.append_text(line)
        out.append("\n")
        out.append_text(breakdown_line(verdict.get("breakdown") or {}, width=width, indent=2))
        out.append("\n")
    return out if analysis.devices else None


def _steady_from(acc: dict) -> str:
    """' from t=15.361750s': where the steady state starts, on the report's clock."""
    span = (acc.get("phases") or {}).get("steady") or {}
    return f" from {at(span['start_ns'])}" if span.get("ns") else ""


def host_text(analysis: Analysis, width: int | None = None) -> Text | None:
    """The verdict's host evidence in full: each thread's share of the GPU's idle time
    and its top frames, the GIL, the launching thread's waits."""
    v = analysis.verdict
    lines = v.host.details() if v is not None and v.host is not None else []
    if not lines:
        return None
    out = Text(f"\nWhat the host ran while GPU {v.device} idled\n", style="bold")
    for line in lines:
        words = [safe_rich(w) for w in safe_text(line, MESSAGE_LIMIT).split(" ") if w]
        out.append_text(joined(words, width, indent=4, sep=" ", first_indent=2))
        out.append("\n")
    return out


def range_text(analysis: Analysis, width: int | None = None) -> Text:
    """The --range's instances (how many are warm-up) and the time between them
    (gpugap.analysis.instances), then the breakdown of its steady part."""
    out = Text()
    inst = analysis.instances
    if inst is not None:
        out.append_text(safe_rich(inst.text(), limit=MESSAGE_LIMIT))
        out.append("\n")
        if inst.between is not None:
            out.append_text(safe_rich(inst.between.text(), limit=MESSAGE_LIMIT))
            out.append("\n")
    if analysis.verdict is not None:
        out.append_text(breakdown_line(analysis.verdict.breakdown, width=width))
        out.append("\n")
    return out


# A panel's title sits between "╭─ " and " ─╮": what is left of the width for it.
PANEL_TITLE_MARGIN = 6


# A finding title's layouts, widest first: (gap, the word before the cost, cause in it).
TITLE_LAYOUTS = (("  ", "cost ", True), (" ", "cost ", True), (" ", "", True),
                 (" ", "", False))
TITLE_FORMS = len(TITLE_LAYOUTS)


def finding_title(f: Finding, index: int | str, width: int | None = None,
                  first_form: int = 0) -> tuple[Text, bool]:
    """'1. ERROR rule [cause]  cost 1.03 ms (49.6%)  x20' (*index*: its number), and
    whether the cause is in it: at full width gpugap.render.numbering.head's words. A
    title wider than *width* would be cut at its end, where the cost and count are: it
    drops the double spaces, then the word 'cost', then moves the cause into the panel's
    body, so that the cost and the count always show. *first_form*: the widest layout
    to try (the findings of one list share one)."""
    share = f" ({f.share_pct:.1f}%)" if f.share_pct is not None else ""
    count = f"x{f.count}" if f.count > 1 else ""
    severity = (f"{f.severity.upper()} ", SEVERITY_STYLE.get(f.severity, ""))
    room = None if width is None else width - PANEL_TITLE_MARGIN
    for i, (gap, word, with_cause) in enumerate(TITLE_LAYOUTS):
        if i < first_form:
            continue
        head = Text.assemble((f"{index}. ", "bold"), severity, (f.rule, "bold"),
                             (f" [{f.cause}]", "magenta") if with_cause else "",
                             f"{gap}{word}{fmt_ns(f.cost_ns)}{share}",
                             f"{gap}{count}" if count else "")
        if room is None or head.cell_len <= room or i == TITLE_FORMS - 1:
            return head, with_cause
    raise AssertionError("unreachable")


def title_form(findings: list[Finding], width: int | None) -> int:
    """The widest title layout that every one of *findings* fits in *width*; a title
    that fits only with its cause moved out does not narrow the others'."""
    if width is None:
        return 0
    room = width - PANEL_TITLE_MARGIN

    def needed(index: int, f: Finding) -> int:
        for form in range(TITLE_FORMS - 1):              # the layouts with the cause
            if finding_title(f, index, None, form)[0].cell_len <= room:
                return form
        return 0

    return max((needed(i, f) for i, f in enumerate(findings, 1)), default=0)


def per_iteration_text(per: dict) -> str:
    """'lost per iteration: median 2.05 ms, p90 2.29 ms (in 39 of 39)'; a cost in a few
    iterations only (median 0): 'in 1 of 39 iterations: 6.36 ms at most', not a median
    of nothing."""
    if per["median_ns"] <= 0:
        return (f"in {per['with_cost']} of {per['iterations']} iterations only: "
                f"{fmt_ns(per.get('max_ns', 0))} at most in one")
    return (f"lost per iteration: median {fmt_ns(per['median_ns'])}, p90 "
            f"{fmt_ns(per['p90_ns'])} (in {per['with_cost']} of {per['iterations']})")


def finding_panel(f: Finding, index: int | str, consequences: list[Entry],
                  width: int | None = None, form: int = 0) -> Panel:
    where = " > ".join(f.ranges) or "outside NVTX ranges"
    streams = ", ".join(map(str, f.streams[:8])) + ("..." if len(f.streams) > 8 else "")
    head, cause_in_title = finding_title(f, index, width, form)
    body = Text()
    if not cause_in_title:
        body.append(f"cause [{f.cause}]\n", style="magenta")
    body.append_text(safe_rich(f"where: {where}", "dim", limit=MESSAGE_LIMIT))
    if f.device is not None:
        body.append(f"; GPU {f.device}", style="dim")
    if f.pid is not None:
        body.append(f"; process {f.pid}", style="dim")
    if streams:
        body.append(f"; streams {streams}", style="dim")
    body.append(f"; {when(f)}", style="dim")
    per = f.per_iteration
    if per and per.get("iterations"):
        body.append(f"\n{per_iteration_text(per)}", style="dim")
    body.append("\n")
    body.append_text(safe_rich(f.message, limit=MESSAGE_LIMIT))
    body.append("\nfix: ", style="bold green")
    body.append_text(safe_rich(f.fix, limit=MESSAGE_LIMIT))
    for c in consequences:
        body.append("\nexplains: ", style="bold")
        body.append_text(safe_rich(finding_head(c)))
    return Panel(body, title=head, title_align="left",
                 border_style=SEVERITY_STYLE.get(f.severity, "white"))


RANGE_HEADERS = ("count", "span", "busy", "k-overlap", "copy/comp", "conc.")
RANGE_NAME_MIN = 12         # the range column never narrower than this


def _wrapped_name(name: str, indent: int, width: int) -> str:
    """*name* (after *indent* spaces) on lines of *width*: broken at spaces, dots and
    dashes (gpugap.render.fit.wrap_name), every line under the first indented by one
    more step, so that the tree still reads."""
    first = wrap_name(name, max(1, width - indent)).split("\n")[0]
    rest = name[len(first):].lstrip(" ")
    lines = [" " * indent + first]
    if rest:
        lines += [" " * (indent + 2) + line
                  for line in wrap_name(rest, max(1, width - indent - 2)).split("\n")]
    return "\n".join(lines)


def ranges_table(analysis: Analysis, width: int | None = None) -> Table:
    """The range table: one row per path of nested ranges, as a tree (indented by depth,
    relative to the shallowest row listed). The numbers and headers are never cut: in
    *width* columns, the range names get what they leave and wrap under their indent."""
    omitted = analysis.ranges_omitted
    several_domains = len({r.domain for r in analysis.ranges}) > 1
    top = min((r.depth for r in analysis.ranges), default=0)
    rows = []
    for r in analysis.ranges:
        m = r.metrics
        name = safe_text((f"{r.domain}:" if several_domains and r.domain else "") + r.name,
                         80)
        rows.append((r.depth - top, name,
                     [str(r.count), fmt_ns(m.span_ns), pct(m.gpu_busy_pct),
                      pct(m.kernel_overlap_pct), pct(m.copy_compute_overlap_pct),
                      _num(m.concurrency)]))
    widths = [max([len(h), *(text_width(values[i]) for _, _, values in rows)])
              for i, h in enumerate(RANGE_HEADERS)]
    longest = max((2 * depth + len(name) for depth, name, _ in rows), default=0)
    room = longest if width is None else \
        max(RANGE_NAME_MIN, min(longest, width - table_width([*widths, 0])))
    table = Table(title="NVTX ranges", title_justify="left",
                  caption=(f"+{omitted} more range paths not listed (the table keeps the "
                           "ones with the most CPU time)") if omitted else None,
                  caption_justify="left")
    table.add_column("range", no_wrap=True, min_width=min(room, max(5, longest)),
                     max_width=room)
    for header, column_width in zip(RANGE_HEADERS, widths, strict=True):
        table.add_column(header, justify="right", no_wrap=True, min_width=column_width)
    for depth, name, values in rows:
        table.add_row(Text(_wrapped_name(name, 2 * depth, room)), *values)
    return table


def devices_table(analysis: Analysis) -> Table:
    table = Table(title="Devices", title_justify="left")
    for col in ("GPU", "name", "processes", "busy", "verdict"):
        table.add_column(col, overflow="fold")
    for d in analysis.devices:
        v = d.get("verdict") or {}
        table.add_row(str(d["device"]), safe_rich(d.get("name") or "?", limit=40),
                      ", ".join(str(p) for p in d.get("pids", [])) or "-",
                      pct(v.get("busy_pct")),
                      Text(safe_text(v.get("headline", ""), MESSAGE_LIMIT),
                           style=KIND_STYLE.get(v.get("kind", ""), "")))
    return table


def _one_time_line(e: Entry, width: int | None = None) -> Text:
    """'  S1. INFO launch-gap [module-load] cost 219 ms (2.2%) x16 in warm-up on GPU 0 in
    step N' (gpugap.render.numbering.head), wrapped between its parts to *width* under
    the text (never to column 0); what the finding's evidence notes about it (``note``:
    'waiting for rank 1's start-up') after its GPU. One it explains: 'explains: S1a.
    ...', under it."""
    f = e.finding
    style = SEVERITY_STYLE.get(f.severity, "")
    if not e.root:                      # where and when are its explainer's
        words = [safe_rich(w, style) for w in finding_head(e).split(" ")]
        return joined([Text("explains:", style="bold"), *words],
                      width, indent=8, sep=" ", first_indent=4)
    parts = [safe_rich(finding_head(e), style), safe_rich(f"in {f.phase}")]
    if f.device is not None:
        parts.append(Text(f"on GPU {f.device}" + (":" if f.evidence.get("note") else "")))
    note = f.evidence.get("note")
    if note:
        parts.append(safe_rich(note, limit=50))
    where = " > ".join(f.ranges)
    if where:
        parts.append(safe_rich(f"in {where}", "dim", limit=80))
    return joined(parts, width, indent=6, sep=" ", first_indent=2)


# One-time costs on more GPUs than this are summed without naming each one's.
ONE_TIME_DEVICES_NAMED = 4


def one_time_total(findings: list[Finding]) -> list[str]:
    """['7.01 s']; on several GPUs, each GPU's time counted (GPU time, not the wall's):
    ['4.75 s summed over 2 GPUs:', 'GPU 0 2.4 s,', 'GPU 1 2.35 s'] (parts a line
    breaks between)."""
    per: dict[int | None, int] = {}
    for f in findings:
        per[f.device] = per.get(f.device, 0) + f.cost_ns
    total = fmt_ns(sum(per.values()))
    if len(per) < 2:
        return [total]
    if len(per) > ONE_TIME_DEVICES_NAMED:
        return [f"{total} summed over {len(per)} GPUs"]
    each = [f"GPU {d} {fmt_ns(ns)}" if d is not None else fmt_ns(ns)
            for d, ns in sorted(per.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))]
    return [f"{total} summed over {len(per)} GPUs:",
            *(f"{e}," for e in each[:-1]), each[-1]]


def _hidden_line(console: Console, hidden: int, shown_roots: int, limit: int) -> None:
    """What --max-findings left out of a list, if anything."""
    text = hidden_text(hidden, shown_roots, f"--max-findings {limit}")
    if text:
        console.print(text)


def render(analysis: Analysis, console: Console, max_findings: int = 20,
           min_severity: str = Severity.INFO) -> None:
    gpu = analysis.gpu
    header = Text.assemble(("gpugap ", "bold"), fit_path(shown_path(analysis.report),
                                                         console.width - len("gpugap ")), "\n")
    header.append_text(joined([
        Text.assemble(("nsys ", "dim"), safe_rich(analysis.nsys_version or "unknown")),
        Text.assemble(("GPU ", "dim"), safe_rich(
            f"{gpu.get('name') or 'unknown'}"
            + (f" ({gpu['sm_count']} SMs, cc {gpu['compute_capability']})"
               if gpu.get("sm_count") else ""))),
        Text.assemble(("range ", "dim"), safe_rich(analysis.scope.range_name or "whole report"))],
        console.width))
    console.print(header)
    if analysis.program is not None:
        parts = [safe_rich(part, limit=MESSAGE_LIMIT)
                 for part in analysis.program.line().split("; ")]
        parts[0] = Text.assemble(("Program: ", "bold"), parts[0])
        console.print(joined(parts, console.width, indent=2, sep="; ", first_indent=0))
    if analysis.error:
        console.print(safe_rich(analysis.error, "bold red", limit=MESSAGE_LIMIT))
    panel = verdict_panel(analysis)
    if panel is not None:
        console.print(panel)
    if len(analysis.devices) > 1:
        console.print(devices_table(analysis))
    if not analysis.scope.is_range:
        text = phases_text(analysis, console.width)
        if text is not None:
            console.print(Text("Steady state", style="bold"))
            console.print(text, end="")
    elif analysis.verdict is not None:
        console.print(Text(f"Range {safe_text(analysis.scope.range_name)}", style="bold"))
        console.print(range_text(analysis, console.width), end="")
    host = host_text(analysis, console.width)
    if host is not None:
        console.print(host, end="")
    floor = Severity(min_severity)
    # What is listed, numbered and left out: the same in every view.
    listed = analysis_listing(analysis, floor if floor > Severity.INFO else None)
    main_findings = sections(listed.main)
    if main_findings:
        what = "in the range" if analysis.scope.is_range else "of the steady state"
        console.print(Text(f"\nFindings {what} ({len(main_findings)}), largest cost first",
                           style="bold"))
        shown, hidden = limited(listed.main, max_findings)
        groups = sections(shown)
        form = title_form([g[0].finding for g in groups], console.width)
        for g in groups:
            console.print(finding_panel(g[0].finding, g[0].label, g[1:], console.width,
                                        form))
        _hidden_line(console, hidden, len(groups), max_findings)
    elif analysis.metrics is not None:
        console.print(Text("\nNo findings " + ("in the range" if analysis.scope.is_range else
                                               "in the steady state")
                           + (f" at or above {floor}" if floor > Severity.INFO else "")
                           + ".",
                           style="green"))
    if listed.one_time:
        roots = [e.finding for e in listed.one_time]   # each ns once (settle)
        parts = one_time_total(roots)
        parts[0] = (("Warm-up in the range and other one-time costs" if analysis.scope.is_range
                     else "Start-up and other one-time costs") + f" ({parts[0]}")
        parts[-1] += ")"
        console.print()
        console.print(joined([Text(p, style="bold") for p in parts], console.width,
                             indent=2, sep=" ", first_indent=0))
        shown, hidden = limited(listed.one_time, max_findings)
        for e in shown:
            console.print(_one_time_line(e, console.width))
        _hidden_line(console, hidden, len(sections(shown)), max_findings)
    left_out = listed.left_out_text()
    if left_out:
        console.print(Text(("\n" if listed.entries else "") + "... " + left_out,
                           style="dim"))
    if analysis.metrics is not None:
        console.print(metrics_table(analysis.metrics,
                                    "\nTimeline " + ("(range)" if analysis.scope.is_range
                                                     else "(whole report)")))
    if analysis.ranges:
        console.print(ranges_table(analysis, console.width))
    for w in analysis.warnings:
        console.print(safe_rich(f"warning: {w}", "yellow", limit=MESSAGE_LIMIT))
