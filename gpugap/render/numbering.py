"""How findings are numbered, the same in every output (terminal, HTML, SVG, PNG).

The terminal (gpugap.render.terminal.render) lists the *main* findings, numbered 1, 2,
... in the analysis's order (largest cost first): those no other finding explains and,
for a whole report, those of the steady state. A finding that another one explains
(``consequence_of``) is listed under it ("explains: ..."), and a whole report's
start-up and tail costs are listed apart, largest first. The pictures label findings
the same way: the main ones by the terminal's number, a consequence by its explainer's
number and a letter (``2a``; a consequence of a consequence too), the one-time costs
``S1``, ``S2``... in the terminal's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from string import ascii_lowercase

from gpugap.rules.base import ONE_TIME_PHASES, Finding


def partition(findings: Sequence[Finding], scope: str | None
              ) -> tuple[list[Finding], list[Finding]]:
    """(main, one_time): the findings the terminal numbers, in order, and the start-up
    and tail costs it lists apart (largest cost first); consequences are in neither."""
    main = [f for f in findings if not f.consequence_of
            and (scope is not None or f.phase in (None, "steady"))]
    one_time = [f for f in findings if not f.consequence_of and scope is None
                and f.phase in ONE_TIME_PHASES]
    return main, sorted(one_time, key=lambda f: -f.cost_ns)


def finding_labels(findings: Sequence[Finding], scope: str | None
                   ) -> tuple[list[str], list[int]]:
    """(labels, order): each finding's label ('3', '3a', 'S1'), by its index in
    *findings*, and the indices in the order the terminal lists them (each main
    finding followed by those it explains, then the one-time costs)."""
    main, one_time = partition(findings, scope)
    index = {id(f): i for i, f in enumerate(findings)}
    by_id = {f.id: f for f in findings}
    labels = [""] * len(findings)
    order: list[int] = []
    explained: dict[int, list[int]] = {}
    for i, f in enumerate(findings):
        root, seen = f, {f.id}
        while root.consequence_of in by_id and root.consequence_of not in seen:
            root = by_id[root.consequence_of]
            seen.add(root.id)
        if root is not f:           # a consequence of a consequence: under the first
            explained.setdefault(id(root), []).append(i)
    for n, f in enumerate(main, 1):
        labels[index[id(f)]] = str(n)
        order.append(index[id(f)])
        for k, i in enumerate(explained.get(id(f), [])):
            labels[i] = f"{n}{ascii_lowercase[k % 26]}"
            order.append(i)
    for n, f in enumerate(one_time, 1):
        labels[index[id(f)]] = f"S{n}"
        order.append(index[id(f)])
        for k, i in enumerate(explained.get(id(f), [])):
            labels[i] = f"S{n}{ascii_lowercase[k % 26]}"
            order.append(i)
    # Anything left (a consequence of a finding not in this list): after the rest.
    rest = [i for i in range(len(findings)) if not labels[i]]
    for n, i in enumerate(rest, len(main) + 1):
        labels[i] = str(n)
        order.append(i)
    return labels, order
