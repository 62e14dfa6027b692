"""What every view shows of an analysis's findings, how it numbers them, and what it
leaves out: one model that the terminal, JSON, Markdown, HTML, SVG and PNG all read, so
that they list the same findings with the same numbers, costs and times, and none
selects on its own.

Listed (:func:`listing`):

- the *main* findings, numbered 1, 2, ... in the analysis's order (largest cost first):
  those no other finding explains, of the steady state (of a ``--range``'s steady part);
- under each, the findings it explains (``consequence_of``, a consequence of a
  consequence too), lettered ``2a``, ``2b``...: their time is counted in the first;
- the one-time costs (start-up, warm-up, tail; a range's one-time parts), largest first,
  ``S1``, ``S2``..., each with the findings it explains (``S1a``).

Left out, and counted wherever a view leaves them out (:meth:`Listing.left_out_text`):

- below the severity floor asked for (``--min-severity``);
- *minor* findings: at info, explained by none, costing under MINOR_PCT of their scope
  (0 ns included), with what they explain ('and 3 more below 0.5% of their scope');
- beyond a view's room (the terminal's ``--max-findings``, the SVG's list):
  :func:`hidden_text`.

Every view writes a finding's head (:func:`head`: number, severity, rule and cause,
cost, share, count) and its time (:func:`when`: on the report's clock, as nsys shows it)
in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from string import ascii_lowercase

from gpugap.analysis import Analysis
from gpugap.rules.base import ONE_TIME_PHASES, Finding
from gpugap.rules.model import Severity
from gpugap.units import fmt_ns

# A finding at info that explains none of the scope's time past this share is not
# listed (counted as left out).
MINOR_PCT = 0.5


@dataclass(frozen=True)
class Entry:
    """One listed finding: its index in the analysis's findings, its label ('3', '3a',
    'S1'), and whether it is a root (explained by no listed finding) or listed under
    one."""

    finding: Finding
    index: int
    label: str
    root: bool
    one_time: bool


@dataclass
class Listing:
    """The findings a view lists, in order (:func:`listing`), and those it leaves out."""

    main: list[Entry]              # the main findings, each followed by its consequences
    one_time: list[Entry]          # the one-time costs, each followed by its consequences
    minor: int = 0                 # left out: below MINOR_PCT, with what they explain
    below_floor: int = 0           # left out: below the severity floor
    floor: Severity | None = None
    scope: str | None = None       # the --range, if any
    _by_index: dict[int, Entry] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_index = {e.index: e for e in self.entries}

    @property
    def entries(self) -> list[Entry]:
        """Every listed finding, in the order the views list them."""
        return self.main + self.one_time

    def entry(self, index: int) -> Entry | None:
        """The entry of the finding at *index* of the analysis's findings (None: left
        out)."""
        return self._by_index.get(index)

    def left_out_text(self) -> str | None:
        """What every view says of the findings it leaves out whatever its room: 'and 3
        more below 0.5% of their scope (--json lists them); 2 below warning
        (--min-severity)'. None when it leaves none out."""
        parts = []
        if self.minor:
            parts.append(f"and {self.minor} more below {MINOR_PCT:g}% of their scope "
                         "(--json lists them)")
        if self.below_floor:
            word = "and " if not parts else ""
            parts.append(f"{word}{self.below_floor} more below {self.floor} "
                         "(--min-severity)")
        return "; ".join(parts) or None


def sections(entries: Sequence[Entry]) -> list[list[Entry]]:
    """*entries* (a list of Listing.main or one_time) as groups: a root and the entries
    listed under it."""
    out: list[list[Entry]] = []
    for e in entries:
        if e.root or not out:
            out.append([e])
        else:
            out[-1].append(e)
    return out


def hidden_text(hidden: int, shown_roots: int, limit_option: str | None) -> str | None:
    """What a view with room for *shown_roots* of a list says of the *hidden* findings it
    had no room for (roots with what they explain): '... and 5 more hidden (--max-findings
    20); --json lists all'; None when none is hidden."""
    if hidden <= 0:
        return None
    why = f" ({limit_option})" if limit_option else ""
    lead = f"{hidden} findings" if not shown_roots else f"... and {hidden} more"
    return f"{lead} hidden{why}; --json lists all"


def limited(entries: Sequence[Entry], roots: int | None) -> tuple[list[Entry], int]:
    """The first *roots* groups of *entries* (None: all), and how many findings that
    leaves out."""
    groups = sections(entries)
    if roots is None or len(groups) <= roots:
        return list(entries), 0
    kept = groups[:roots]
    return [e for g in kept for e in g], sum(len(g) for g in groups[roots:])


def cost_text(entry: Entry) -> str:
    """'cost 2.41 s (80.7%) x39'; of a finding listed under another, whose time that one
    counts: 'x5, counted in S2' ('x4, counted in S1, 10.8 us more on its own')."""
    f = entry.finding
    count = f" x{f.count}" if f.count > 1 else ""
    if not entry.root:
        root = entry.label.rstrip(ascii_lowercase)
        own = f", {fmt_ns(f.cost_ns)} more on its own" if f.cost_ns > 0 else ""
        return f"{count.strip() + ', ' if count else ''}counted in {root}{own}"
    share = f" ({f.share_pct:.1f}%)" if f.share_pct is not None else ""
    return f"cost {fmt_ns(f.cost_ns)}{share}{count}"


def head(entry: Entry) -> str:
    """'1. ERROR launch-gap [input] cost 2.41 s (80.7%) x39': how every view names a
    listed finding (the terminal's titles at full width; the rest as written)."""
    f = entry.finding
    return (f"{entry.label}. {Severity(f.severity).upper()} {f.rule} [{f.cause}] "
            f"{cost_text(entry)}")


def when(f: Finding) -> str:
    """'t=15.361750s..18.333479s': a finding's time on the report's clock (nsys's: from
    the start of the session), as every view gives it."""
    return f"t={f.start_ns / 1e9:.6f}s..{f.end_ns / 1e9:.6f}s"


def at(ns: int) -> str:
    """'t=15.361750s': a moment on the report's clock."""
    return f"t={ns / 1e9:.6f}s"


def listing(findings: Sequence[Finding], scope: str | None = None,
            min_severity: Severity | str | None = None,
            keep: Sequence[str] = (), minor_pct: float | None = MINOR_PCT) -> Listing:
    """What the views list of *findings* (an analysis's, in its order; *scope*: its
    --range), from *min_severity* up; the ids in *keep* (what the verdict names) are
    never minor (*minor_pct*: None, none is)."""
    floor = None if min_severity is None else Severity(min_severity)
    above = [(i, f) for i, f in enumerate(findings)
             if floor is None or Severity(f.severity) >= floor]
    below_floor = len(findings) - len(above)
    by_id = {f.id: f for _, f in above}
    index = {id(f): i for i, f in above}

    def root_of(f: Finding) -> Finding:
        root, seen = f, {f.id}
        while root.consequence_of in by_id and root.consequence_of not in seen:
            root = by_id[root.consequence_of]
            seen.add(root.id)
        return root

    explained: dict[int, list[Finding]] = {}
    roots: list[Finding] = []
    for _, f in above:
        root = root_of(f)
        if root is f:
            roots.append(f)
        else:
            explained.setdefault(id(root), []).append(f)
    wanted = set(keep)

    def minor(f: Finding) -> bool:
        return (minor_pct is not None and Severity(f.severity) == Severity.INFO
                and f.id not in wanted
                and (f.share_pct if f.share_pct is not None else 0.0) < minor_pct)

    listed = [f for f in roots if not minor(f)]
    n_minor = sum(1 + len(explained.get(id(f), [])) for f in roots if minor(f))
    main = [f for f in listed if f.phase not in ONE_TIME_PHASES]
    one_time = sorted((f for f in listed if f.phase in ONE_TIME_PHASES),
                      key=lambda f: -f.cost_ns)

    def entries(group: list[Finding], prefix: str, is_one_time: bool) -> list[Entry]:
        out = []
        for n, f in enumerate(group, 1):
            label = f"{prefix}{n}"
            out.append(Entry(f, index[id(f)], label, True, is_one_time))
            out += [Entry(c, index[id(c)], f"{label}{ascii_lowercase[k % 26]}", False,
                          is_one_time)
                    for k, c in enumerate(explained.get(id(f), []))]
        return out

    return Listing(main=entries(main, "", False), one_time=entries(one_time, "S", True),
                   minor=n_minor, below_floor=below_floor, floor=floor, scope=scope)


def analysis_listing(analysis: Analysis, min_severity: Severity | str | None = None
                     ) -> Listing:
    """:func:`listing` of an Analysis: its findings, its scope, what its verdicts name."""
    keep: list[str] = []
    verdicts = [analysis.verdict.to_dict()] if analysis.verdict is not None else []
    verdicts += [d["verdict"] for d in analysis.devices if d.get("verdict")]
    for v in verdicts:
        keep += [v.get("finding") or "", *(a.get("finding") or "" for a in v.get("also", []))]
    return listing(analysis.findings, analysis.scope.range_name, min_severity, keep)


def finding_labels(findings: Sequence[Finding], scope: str | None
                   ) -> tuple[list[str], list[int]]:
    """(labels, order) of every finding of *findings*, none left out: each one's label
    ('3', '3a', 'S1'), by its index, and the indices in the order the views list them."""
    listed = listing(findings, scope, minor_pct=None)
    labels = [""] * len(findings)
    for e in listed.entries:
        labels[e.index] = e.label
    return labels, [e.index for e in listed.entries]
