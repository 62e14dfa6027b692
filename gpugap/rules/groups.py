"""The rule kit's grouping: events by (device, phase, NVTX range), the unit a finding
speaks of, numbered once for a whole report however many batches its events come in.

A rule that weighs events per place in the program (small-grid: kernel time per range,
so a setup phase does not dilute a measured loop) groups them by the device they ran
on, the phase of their GPU time (gpugap.accounting.phases, FINDING_PHASES) and the user
NVTX range they were launched in (numbered instances folded: 'batch 7' -> 'batch N',
gpugap.accounting.labels). ``Groups.of_batch`` numbers a batch's events with integer
codes only (no Python work per event or per range name) and maps them to ids that hold
across batches, in order of first appearance; ``keys()`` names every id.

    groups = Groups(trace, context)
    for batch in batches:
        local, to_id = groups.of_batch(device, start, launched)
        per_group = np.bincount(local, weights=dur, minlength=to_id.size)  # then to_id
    for (device, phase, label), gid in groups.keys():
        ...
"""

from __future__ import annotations

import numpy as np

from gpugap import scan
from gpugap.accounting.labels import folded_label_codes
from gpugap.report.table import DENSE_RANGE, factorize
from gpugap.report.trace import Trace
from gpugap.rules.base import FINDING_PHASES, Context

GroupKey = tuple[int, str, str]          # device, phase, NVTX label ('' for none)
# first_seen_codes keeps its combined codes within a range table.factorize numbers
# through an array (table.DENSE_RANGE), without a sort.
_DENSE_RANGE = DENSE_RANGE


def first_seen_codes(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's code of its tuple of *keys* (integer columns), codes numbered in order
    of first appearance, and each code's first row."""
    size = keys[0].size
    if not size:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    code = np.zeros(size, dtype=np.int64)
    width = 1                                # the codes so far lie in 0..width-1
    for key in keys:
        lo = int(key.min())
        top = int(key.max()) - lo + 1
        if width * top > max(size, _DENSE_RANGE):
            # Dense again (at most one code per row), so that the codes stay in a
            # range factorize numbers without a sort, and far from overflowing:
            # renumbered in the order of their values (any order does here), through
            # an array over their range where it is short.
            if width <= max(size, _DENSE_RANGE):
                present = np.bincount(code, minlength=width) > 0
                code = (np.cumsum(present) - 1)[code]
                width = int(np.count_nonzero(present))
            else:
                code, seen = factorize(code)
                width = seen.size
        if width * top >= 2**62:             # a key too wide to widen by: its own codes
            key, distinct = factorize(key)
            lo, top = 0, distinct.size
        # In place: no temporary but a narrower key widened (int64 wraps around, so
        # adding the key before taking lo off gives the same codes).
        code *= top
        code += key.astype(np.int64, copy=False)
        code -= lo
        width *= top
    code, _ = factorize(code)
    # In first-appearance order, a row is its code's first when its code exceeds every
    # code before it.
    seen = np.maximum.accumulate(code)
    first = np.flatnonzero(np.r_[True, code[1:] > seen[:-1]])
    return code, first


def rows_of_codes(code: np.ndarray, n: int) -> list[np.ndarray]:
    """The rows of each code 0..n-1, each in row order: with first_seen_codes' codes,
    the groups of pandas' ``groupby(sort=False)``."""
    if not n:
        return []
    in_code_order = np.argsort(code, kind="stable")
    return np.split(in_code_order, np.cumsum(np.bincount(code, minlength=n))[:-1])


class Groups:
    """Ids of (device, phase, NVTX range) groups, kept across batches (module doc)."""

    def __init__(self, trace: Trace, context: Context) -> None:
        self.trace, self.context = trace, context
        self._ids: dict[GroupKey, int] = {}

    def of_batch(self, device: np.ndarray, start: np.ndarray, launched: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
        """For events on *device* whose GPU time began at *start*, launched at
        *launched*: each one's group numbered within the batch (0..k-1, in order of
        appearance), and each batch group's id (``to_id[local]`` is the event's id).
        Worked through a batch of events at a time (gpugap.scan: the working arrays of
        labels, phases and keys a few megabytes, not tens of them for a million): ids
        are given in order of first appearance, so numbering the parts in turn numbers
        the whole as one."""
        local = np.empty(device.size, dtype=np.intp)
        batch_ids: list[int] = []                 # the batch's groups' ids, in order
        code_of: dict[int, int] = {}              # an id's code within the batch

        def number(part: slice) -> None:
            part_code, part_ids = self._ids_of(device[part], start[part], launched[part])
            # The part's groups in order of first appearance, so the batch's codes are
            # too: one step per group, not per event.
            for g in part_ids.tolist():
                if g not in code_of:
                    code_of[g] = len(batch_ids)
                    batch_ids.append(g)
            local[part] = np.array([code_of[g] for g in part_ids.tolist()],
                                   dtype=np.intp)[part_code]

        scan.each(device.size, number)
        return local, np.array(batch_ids, dtype=np.int64)

    def _ids_of(self, device: np.ndarray, start: np.ndarray, launched: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """Each event's group numbered within these events (0..k-1, in order of first
        appearance), and each one's id (new groups numbered in order of first
        appearance)."""
        range_code, range_names = folded_label_codes(self.trace, launched)
        device_code, device_ids = factorize(device)
        n_ranges, n_phases = len(range_names), len(FINDING_PHASES)
        # The key (device, phase, range) built in place: one array, not one per step.
        code = device_code.astype(np.int64)
        del device_code
        code *= n_phases
        code += self.context.phase_codes_of(device, start)
        code *= n_ranges
        code += range_code
        del range_code
        local, keys = factorize(code)
        to_id = np.empty(len(keys), dtype=np.int64)
        for g, key in enumerate(keys.tolist()):            # one step per group, not event
            dev, rest = divmod(int(key), n_phases * n_ranges)
            phase, range_ = divmod(rest, n_ranges)
            to_id[g] = self._ids.setdefault((int(device_ids[dev]), FINDING_PHASES[phase],
                                             str(range_names[range_])), len(self._ids))
        return local, to_id

    def __len__(self) -> int:
        return len(self._ids)

    def keys(self):
        """((device, phase, label), id) of every group, in order of first appearance."""
        return self._ids.items()
