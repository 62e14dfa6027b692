"""NVTX ranges as time windows on the GPU timeline.

An NVTX range marks CPU time, but the GPU work launched inside it runs later. A range's
*window* is therefore [range start, max(range end, end of the last GPU op its thread
launched inside the range)]; all instances of a name make one union of windows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.index import AccountingIndex
from gpugap.accounting.labels import name_codes
from gpugap.errors import UsageError, option
from gpugap.program.nvtx import base_name, program_ranges, shown_name
from gpugap.program.nvtx import ranges as all_ranges
from gpugap.report.table import Table, factorize, unique_in_order
from gpugap.report.trace import Trace


@dataclass(frozen=True)
class RangeKey:
    name: str
    domain: str

    @property
    def label(self) -> str:
        return f"{self.domain}:{self.name}" if self.domain else self.name


def _slice_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, empty: np.ndarray
               ) -> np.ndarray:
    """max(values[lo[i]:hi[i]]) for every i (``empty[i]`` where the slice is empty),
    in one ``reduceat`` over interleaved bounds; the few slices that run to the end
    (which reduceat cannot bound) one by one, so that *values* (every kernel's end) is
    never copied."""
    n = values.size
    if n == 0:
        return empty
    out = np.array(empty, dtype=np.int64)
    inner = np.flatnonzero(hi < n)
    if inner.size:
        bounds = np.empty(2 * inner.size, dtype=np.int64)
        bounds[0::2] = np.minimum(lo[inner], n - 1)      # lo >= n: an empty slice anyway
        bounds[1::2] = hi[inner]
        found = np.maximum.reduceat(values, bounds)[0::2]
        out[inner] = np.where(hi[inner] > lo[inner], found, out[inner])
    for i in np.flatnonzero((hi >= n) & (lo < n)).tolist():
        out[i] = values[lo[i]:].max()
    return out


def _projected_ends(trace: Trace, ranges: Table) -> np.ndarray:
    """For each range: max(its end, end of the GPU work its thread launched inside it).
    *ranges*: rows of the NVTX table (select's instances)."""
    ends = np.array(ranges["end"], dtype=np.int64)
    if not len(ranges) or not trace.has_gpu_activity:
        return ends
    launches = AccountingIndex.of(trace).launches_by_thread
    starts = np.asarray(ranges["start"], dtype=np.int64)
    gtids = np.asarray(ranges["gtid"])
    by_thread = np.argsort(gtids, kind="stable")     # each thread's rows, in row order
    bounds = np.flatnonzero(np.r_[True, gtids[by_thread][1:] != gtids[by_thread][:-1],
                                  True])
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        idx = by_thread[a:b]
        gtid = gtids[idx[0]]
        own_ends = ends[idx].copy()
        for launch, op_end in launches.get(int(gtid), []):
            lo = np.searchsorted(launch, starts[idx], side="left")
            hi = np.searchsorted(launch, own_ends, side="right")
            ends[idx] = np.maximum(ends[idx], _slice_max(op_end, lo, hi, own_ends))
    return ends


# The range table (reported_ranges): paths up to this depth (0: outermost), at most this
# many rows, the largest (CPU time) first; the rest are counted, not listed.
TABLE_MAX_DEPTH = 3
TABLE_MAX_ROWS = 40


def select(trace: Trace, name: str) -> Table:
    """Instances of the range called *name* (or ``domain:name``); UsageError naming the
    ranges there if none. Numbered instances fold as ``--iteration`` folds them
    (gpugap.program.nvtx.base_name): without a range of that exact name, ``step`` and
    ``step N`` (as the range table shows them) select every ``step 0``, ``step 1``...;
    ``step 7`` alone selects ``step 7``. The program's ranges first; a library's (CUB,
    NCCL...) when only it has that name."""
    for nv in (program_ranges(trace), all_ranges(trace)):
        code, names = name_codes(nv["name"])
        match = _named(code, names, name)
        if not match.any() and ":" in name:
            domain, _, short = name.partition(":")
            match = _named(*name_codes(nv["domain"]), domain) & _named(code, names, short)
        if not match.any():                             # numbered instances, folded
            match = _folded_match(code, names, name)
            if not match.any() and ":" in name:
                domain, _, short = name.partition(":")
                match = (_named(*name_codes(nv["domain"]), domain)
                         & _folded_match(code, names, short))
        if match.any():
            return nv.rows(np.flatnonzero(match))
    if program_ranges(trace).empty:
        raise UsageError(f"no NVTX range named '{name}': {trace.info.path} has no NVTX "
                         f"ranges of its own; leave {option('range')} out")
    raise UsageError(f"no NVTX range named '{name}' in {trace.info.path} (ranges: "
                     f"{known_names(trace)}); pick one of those with {option('range')}")


# The error of an unknown --range lists at most this many names.
KNOWN_NAMES_SHOWN = 12


def known_names(trace: Trace) -> str:
    """The program's range names as --range takes them, numbered instances folded as the
    range table folds them ('step N (100 instances)'), the most instances first: 'none'
    when there are none."""
    nv = program_ranges(trace)
    if nv.empty:
        return "none"
    code, names = name_codes(nv["name"])
    # Instances per folded name: the names in string order, then the most instances
    # first (a stable sort: ties stay in string order).
    folded, per_folded = np.unique(folded_names(names), return_inverse=True)
    instances = np.zeros(folded.size, dtype=np.int64)
    np.add.at(instances, per_folded, np.bincount(code, minlength=names.size))
    order = np.argsort(-instances, kind="stable")
    shown = [f"{n} ({k} instances)" if k > 1 else str(n)
             for n, k in zip(folded[order[:KNOWN_NAMES_SHOWN]].tolist(),
                             instances[order[:KNOWN_NAMES_SHOWN]].tolist(), strict=True)]
    more = folded.size - len(shown)
    return ", ".join(shown) + (f", ... ({more} more)" if more > 0 else "")


def folded_names(names: np.ndarray) -> np.ndarray:
    """For each distinct name: itself, or 'step N' for a numbered one ('step 7') when
    at least two numbered names share its stem ('step 7', 'step 8'): the instances of a
    loop, shown as one row (the stem and numbering of gpugap.accounting.phases, which
    names iterations the same way). A lone 'epoch 1' stays as it is."""
    texts = [str(n) for n in np.asarray(names).tolist()]
    out = np.array(texts, dtype=object)
    # Only a name with a digit last (or before a final newline) can be numbered: the
    # regex runs on those only.
    maybe = [i for i, n in enumerate(texts) if n[-1:].isdecimal() or n[-2:-1].isdecimal()]
    stems = [(i, base_name(texts[i])) for i in maybe]
    numbered = [(i, stem) for i, stem in stems if stem != texts[i]]
    names_per_stem = Counter(stem for _, stem in numbered)
    shared = [(i, stem) for i, stem in numbered if names_per_stem[stem] >= 2]
    if shared:
        out[[i for i, _ in shared]] = [shown_name(stem, True) for _, stem in shared]
    return out


def _named(code: np.ndarray, names: np.ndarray, name: str) -> np.ndarray:
    """Rows (by *code* into the distinct *names*: name_codes) named *name*."""
    return np.isin(code, np.flatnonzero(names == name))


def _folded_match(code: np.ndarray, names: np.ndarray, name: str) -> np.ndarray:
    """Rows (by *code* into the distinct *names*: name_codes) whose name is a numbered
    instance of *name*'s stem: 'step' or 'step N' -> 'step 0', 'step 1'... (the folding
    of --iteration: base_name)."""
    stem = name.removesuffix(" N")
    if not stem:
        return np.zeros(code.size, dtype=bool)
    wanted = [i for i, n in enumerate(names.tolist())
              if isinstance(n, str) and n != stem and base_name(n) == stem]
    return np.isin(code, wanted)


def windows_of(trace: Trace, instances: Table) -> tl.Intervals:
    """The union of the windows of *instances* (rows of the NVTX table, or select's)."""
    return tl.union(*instance_windows(trace, instances))


def instance_windows(trace: Trace, instances: Table) -> tuple[np.ndarray, np.ndarray]:
    """Each instance's window (module doc), in the rows' order: (starts, ends)."""
    return np.asarray(instances["start"], dtype=np.int64), _projected_ends(trace, instances)


def window(trace: Trace, name: str) -> tl.Intervals:
    return windows_of(trace, select(trace, name))


def parents(nv: Table, max_depth: int | None = None) -> np.ndarray:
    """For each range (row of the NVTX table *nv*): the row of the range it is nested in
    (same thread and domain, the innermost one open when it began), -1 for an outermost
    one; ranges deeper than *max_depth* get -1 too (not looked at). One vectorised pass
    per nesting level, over the rows of that level only.

    In (thread, domain, start, longest first) order, the range a level-d range is nested
    in is the nearest level-(d-1) range before it, if that one is still open when it
    begins (it always is for push/pop ranges; start/end ranges may overlap loosely)."""
    n = len(nv)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    depth = nv["depth"].astype(np.int64, copy=False)
    top = int(depth.max()) if max_depth is None else min(int(depth.max()), max_depth)
    if top <= 0:
        return out
    gtid = nv["gtid"].astype(np.int64, copy=False)
    domain = name_codes(nv["domain"])[0]
    start = nv["start"].astype(np.int64, copy=False)
    end = nv["end"].astype(np.int64, copy=False)
    # Ties (same thread, domain, start and end): the shallower first, as nesting_depth
    # numbered them.
    order = np.lexsort((depth, -end, start, domain, gtid))
    d = depth[order]
    by_level = np.argsort(d, kind="stable")         # positions in `order`, level by level
    bounds = np.searchsorted(d[by_level], np.arange(top + 2))
    for level in range(1, top + 1):
        above = by_level[bounds[level - 1]:bounds[level]]   # sorted positions
        mine = by_level[bounds[level]:bounds[level + 1]]
        if not (above.size and mine.size):
            continue
        k = np.searchsorted(above, mine) - 1
        p = above[np.maximum(k, 0)]
        rp, rm = order[p], order[mine]
        ok = ((k >= 0) & (gtid[rp] == gtid[rm]) & (domain[rp] == domain[rm])
              & (end[rp] > start[rm]))
        out[rm[ok]] = rp[ok]
    return out


@dataclass(frozen=True)
class TableRow:
    """One row of the range table: a path of nested ranges (``path``: names, outermost
    first, ending with ``key.name``) and every instance of it (``instances``: rows of the
    NVTX frame)."""
    key: RangeKey
    path: tuple[str, ...]
    instances: Table

    @property
    def depth(self) -> int:
        return len(self.path) - 1


@dataclass(frozen=True)
class RangeTable:
    rows: list[TableRow]
    omitted: int          # paths (up to TABLE_MAX_DEPTH) not listed: beyond max_rows


def reported_ranges(trace: Trace, *, all_domains: bool = False,
                    within: Table | None = None,
                    max_depth: int = TABLE_MAX_DEPTH,
                    max_rows: int = TABLE_MAX_ROWS) -> RangeTable:
    """The range table: the user's ranges (every range with *all_domains*) grouped by
    path, i.e. by (domain, the names of the ranges it is nested in, its name), so that
    ``warmup > gemms`` and ``measured > iter > gemms`` are two rows, each with its own
    instances. Paths up to *max_depth*; at most *max_rows* rows: the paths with the most
    CPU time (sum of their instances' durations), a path always with the paths it is
    nested in; listed as a tree (depth first, siblings in order of first appearance).
    With *within* (instances of a range), only instances that begin inside it.

    Vectorised: a few passes over the ranges per nesting level, whatever the number of
    distinct names; Python loops only over the rows listed."""
    nv = program_ranges(trace, all_domains=all_domains)
    if nv.empty:
        return RangeTable([], 0)
    parent = parents(nv, max_depth)
    depth = nv["depth"].astype(np.int64, copy=False)
    start = nv["start"].astype(np.int64, copy=False)
    keep = depth <= max_depth
    name_code, names = name_codes(nv["name"])
    # Numbered instances ('token 0' ... 'token 66') are one row, 'token N'.
    fold_code, names = factorize(folded_names(names))
    name_code = fold_code[name_code]
    domain_code, domains = name_codes(nv["domain"])
    width = np.int64(max(len(names), 1))
    offset = np.int64(len(domains) + 1)
    # Path codes level by level: a path is (the code of the path it is nested in, or its
    # domain for an outermost range; its name). Outermost ranges first, then each level,
    # so a path's code is larger than the code of the path it is nested in.
    code = np.full(len(nv), -1, dtype=np.int64)
    code_parent: list[np.ndarray] = []
    code_name: list[np.ndarray] = []
    code_domain: list[np.ndarray] = []
    n_codes = 0
    root = keep & (parent < 0)
    levels = [np.flatnonzero(root)] + [
        np.flatnonzero(keep & ~root & (depth == level)) for level in range(1, max_depth + 1)]
    for i, rows in enumerate(levels):
        if not rows.size:
            continue
        up = -1 - domain_code[rows].astype(np.int64) if i == 0 else code[parent[rows]]
        local, uniq = factorize((up + offset) * width + name_code[rows])
        code[rows] = local + n_codes
        up_u, name_u = np.divmod(np.asarray(uniq, dtype=np.int64), width)
        up_u -= offset
        code_parent.append(np.where(up_u < 0, -1, up_u))
        code_name.append(name_u)
        code_domain.append(np.where(up_u < 0, -1 - up_u, -1))
        n_codes += up_u.size
    if not n_codes:
        return RangeTable([], 0)
    c_parent = np.concatenate(code_parent)
    c_name = np.concatenate(code_name)
    c_domain = np.concatenate(code_domain)
    # The instances counted: every one, or those that begin inside *within*.
    counted = code >= 0
    if within is not None:
        cpu_of_scope = tl.union(np.asarray(within["start"], dtype=np.int64),
                                np.asarray(within["end"], dtype=np.int64))
        counted &= tl.within(start, cpu_of_scope)
    listed = np.flatnonzero(counted)
    c = code[listed]
    dur = nv["end"][listed].astype(np.int64) - start[listed]
    count = np.bincount(c, minlength=n_codes)
    cpu = np.zeros(n_codes, dtype=np.int64)
    np.add.at(cpu, c, dur)
    big = np.iinfo(np.int64).max
    first = np.full(n_codes, big, dtype=np.int64)
    np.minimum.at(first, c, start[listed])
    # Every path's depth and domain, and its rank: the least CPU time on its way up (of
    # the paths with instances), so that no path outranks the paths it is nested in.
    c_depth = np.zeros(n_codes, dtype=np.int64)
    rank = np.where(count > 0, cpu, big)
    nested = np.flatnonzero(c_parent >= 0)
    for _ in range(max_depth):
        if not nested.size:
            break
        p = c_parent[nested]
        c_depth[nested] = c_depth[p] + 1
        c_domain[nested] = c_domain[p]
        rank[nested] = np.minimum(np.where(count[nested] > 0, cpu[nested], big), rank[p])
    # The top max_rows by (rank desc, depth asc, first asc), among paths with instances.
    candidates = np.flatnonzero(count > 0)
    order = candidates[np.lexsort((first[candidates], c_depth[candidates],
                                   -rank[candidates]))]
    shown = np.sort(order[:max_rows])
    omitted = int(candidates.size - shown.size)
    # Instances of the shown paths, in one grouping.
    slot = np.full(n_codes, -1, dtype=np.int64)
    slot[shown] = np.arange(shown.size)
    mine = slot[c] >= 0
    rows_mine = listed[mine]
    # Per shown path, its instances (rows of the table), in row order.
    by_slot = np.argsort(slot[c[mine]], kind="stable")
    slot_bounds = np.searchsorted(slot[c[mine]][by_slot], np.arange(shown.size + 1))

    out = []
    for s_, k in enumerate(shown.tolist()):
        chain = [k]
        while c_parent[chain[-1]] >= 0:
            chain.append(int(c_parent[chain[-1]]))
        chain.reverse()
        path = tuple(str(names[c_name[j]]) for j in chain)
        key = RangeKey(name=path[-1], domain=str(domains[c_domain[k]]))
        # Depth first, siblings in order of first appearance (ties: by path code); a
        # path without instances here (outside *within*) sorts as its nested ones do.
        sort_key = tuple((int(first[j]), j) for j in chain)
        rows = np.sort(rows_mine[by_slot[slot_bounds[s_]:slot_bounds[s_ + 1]]])
        out.append((sort_key, TableRow(key=key, path=path, instances=nv.rows(rows))))
    out.sort(key=lambda item: item[0])
    return RangeTable([row for _, row in out], omitted)


def shallow_names(trace: Trace, max_depth: int = 1, *, folded: bool = False) -> list[str]:
    """Distinct names of the user's ranges at nesting depth <= *max_depth*, in order of
    first appearance (of any instance of the name): the ranges ``check`` measures one
    by one. *folded*: numbered instances as one name, as the range table shows them
    (``step N`` for ``step 0``, ``step 1``...: :func:`folded_names`), which ``diff``
    measures."""
    nv = program_ranges(trace)
    if nv.empty:
        return []
    code, names = name_codes(nv["name"])
    first = np.full(names.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, code, nv["start"])
    # The shallow names in order of first appearance, then by first start (stable).
    shallow = unique_in_order(code[nv["depth"] <= max_depth])
    order = np.argsort(first[shallow], kind="stable")
    found = [str(n) for n in names[shallow[order]].tolist()]
    if folded:
        fold = dict(zip([str(n) for n in names.tolist()],
                        folded_names(names).tolist(), strict=True))
        found = list(dict.fromkeys(fold[n] for n in found))
    return found
