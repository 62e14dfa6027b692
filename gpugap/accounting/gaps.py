"""The idle gaps of a device, read back from its partition when asked.

A gap is a run of idle pieces of the partition (busy time always lies between two
gaps), and the accounting cuts its blocks at gap starts, ``per_block`` gaps each: gap g
lies in block g // per_block. So the index holds no array per gap (a device of ten
million kernels has as many): the gaps of a block are decoded when asked, the block
read last kept.

    partition: |cmp|launch|cmp|sync  host-work|cmp|...     (blocks of per_block gaps)
    gaps:           [....)     [.............)
    next op:              ^cmp                ^cmp          (the first op to start at
                                                             or after the gap's end)
"""

from __future__ import annotations

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import CODE
from gpugap.accounting.partition import Partition, idle_runs
from gpugap.accounting.work import DeviceWork


class GapIndex:
    """The gaps of a device (module doc): *count* of them in *partition*'s blocks,
    *per_block* to a block; *work*: the device's ops (the op after each gap);
    *main_gtid*: the thread the trailing gap follows."""

    def __init__(self, partition: Partition, work: DeviceWork, main_gtid: int,
                 per_block: int, count: int) -> None:
        self.partition = partition
        self.work = work
        self.main_gtid = main_gtid
        self.per_block = per_block
        self._count = count
        self._last: tuple[int, tl.Intervals] | None = None     # the block read last

    def __len__(self) -> int:
        return self._count

    def in_block(self, k: int) -> tl.Intervals:
        """The gaps of block k (starts, ends), read from its pieces."""
        if self._last is not None and self._last[0] == k:
            return self._last[1]
        runs = idle_runs(*self.partition.decode(k, k + 1))
        self._last = (k, runs)
        return runs

    def starts(self, at=slice(None)):
        """The starts of gaps *at* (an index, array of indices or slice), int64."""
        return self._read(0, at)

    def ends(self, at=slice(None)):
        """The ends of gaps *at*, int64."""
        return self._read(1, at)

    def next_ops(self, at=slice(None)):
        """The positions in DeviceWork of the ops that ended gaps *at* (-1: none, the
        trailing gap)."""
        return self._read(2, at)

    def next_after(self, ends):
        """The next op of gaps that end at *ends*: the first op to start at or after;
        int32 (int64 for 2**31 ops or more), -1: none."""
        return next_ops(self.work, ends)

    def thread(self, g) -> np.ndarray:
        """The thread held responsible for gaps *g* (-1: unknown)."""
        nxt = self.next_ops(np.asarray(g))
        ops = self.work.order.take(np.maximum(nxt, 0))
        found = self.work.threads_of(ops[2], ops[3])
        return np.where(nxt >= 0, found, self.main_gtid)

    def containing(self, t) -> np.ndarray:
        """The gap (index) containing each time, -1 where the GPU was busy. A gap lies in
        one block: each time is looked for in the gaps of its block."""
        t = np.asarray(t, dtype=np.int64)
        n = self.partition.block_count
        block = np.clip(np.searchsorted(self.partition.block_start, t, side="right") - 1,
                        0, n - 1)
        out = np.full(t.shape, -1, dtype=np.int64)
        for k in np.unique(block).tolist():
            sel = block == k
            gs, ge = self.in_block(k)
            if not gs.size:
                continue
            local = np.searchsorted(gs, t[sel], side="right") - 1
            ok = (local >= 0) & (t[sel] < ge[np.maximum(local, 0)])
            out[sel] = np.where(ok, k * self.per_block + local, -1)
        return out

    def end_or(self, t) -> np.ndarray:
        """The end of the gap containing each time, the time itself where the GPU was
        busy: how long a host that stopped at *t* kept the GPU idle."""
        t = np.asarray(t, dtype=np.int64)
        gap = self.containing(t)
        return np.where(gap >= 0, self.ends(np.maximum(gap, 0)), t)

    def held(self, bucket: str, span: tl.Intervals
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the gaps holding time of *bucket* inside *span* (a union), that time in each,
        the end of each gap), read in one pass over the blocks."""
        gaps, ns, ends = [], [], []
        code = CODE[bucket]
        z = np.zeros(0, dtype=np.int64)
        if span[0].size == 0:
            return z, z, z
        for k, blo, bhi, s, e, c in self.partition.blocks(int(span[0].min()),
                                                          int(span[1].max())):
            mine = c == code
            ps, pe = tl.intersect((s[mine], e[mine]), tl.clip(span, blo, bhi))
            if ps.size:
                gs, ge = idle_runs(s, e, c)
                local = np.searchsorted(gs, ps, side="right") - 1
                inside = (local >= 0) & (ps < ge[np.maximum(local, 0)]) if gs.size \
                    else np.zeros(ps.size, dtype=bool)
                gaps.append(np.where(inside, k * self.per_block + local, -1))
                ends.append(ge[np.maximum(local, 0)] if gs.size else ps)
                ns.append(pe - ps)
        if not gaps:
            return z, z, z
        held, first, inverse = np.unique(np.concatenate(gaps), return_index=True,
                                         return_inverse=True)
        return (held, np.bincount(inverse, weights=np.concatenate(ns)).astype(np.int64),
                np.concatenate(ends)[first])

    def _read(self, column: int, at):
        """Starts (column 0), ends (1) or next ops (2) of gaps *at*, block by block."""
        index = np.arange(self._count)[at] if isinstance(at, slice) else np.asarray(at)
        flat = index.ravel().astype(np.int64)
        out = np.empty(flat.size, dtype=np.int64)
        block = flat // self.per_block
        for k in np.unique(block).tolist():
            sel = block == k
            out[sel] = self.in_block(k)[min(column, 1)][flat[sel] - k * self.per_block]
        if column == 2:
            out = self.next_after(out)
        return out.reshape(index.shape) if index.ndim else out.reshape(())[()]


def next_ops(work: DeviceWork, ends):
    """The op that ended each gap ending at *ends*: the first to start at or after it;
    int32 positions in *work* (int64 for 2**31 ops or more), -1: none."""
    found = work.searchsorted(ends, side="left")
    return np.where(found < len(work), found, -1).astype(
        np.int32 if len(work) < 2**31 - 1 else np.int64)

