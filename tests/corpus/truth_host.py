#!/usr/bin/env python3
"""What the host ran while the GPU idled, from the report's own evidence (issue 44).

Plain sqlite3 + numpy on an nsys SQLite export; nothing here imports gpugap, on purpose
(a truth script measures what the report shows, independently of the analyzer).

    python3 tests/corpus/truth_host.py REPORT.sqlite[.xz] [--range REGEX] [--skip N]
                                       [--top K] [--json]

The steady window: with --range, from the start of the first NVTX range matching REGEX
(after skipping the first N) to the end of the last (as truthlib.window_of); without it,
the middle 80% of the span of GPU activity (first GPU operation's start to the last one's
end, 10% cut at each side to drop warm-up and teardown). GPU activity is the union of
kernels, copies, memsets and graph executions on every device (idle = no device busy).

Readings, each of the idle intervals inside the window:
 1. the idle intervals and the idle share of the window;
 2. CPU samples (COMPOSITE_EVENTS) whose time falls in an idle interval, per process and
    per thread (pid = globalTid >> 24 & 0xFFFFFF, tid = globalTid & 0xFFFFFF): count and
    share of the idle samples;
 3. for the thread(s) with most idle samples, from SAMPLING_CALLCHAINS (stackDepth 0 is
    the innermost frame): the innermost frame (symbol and module basename) by share; the
    first frame that is not "system" (modules libc, libpthread, ld-linux, linux-vdso,
    [kernel.kallsyms] and nsys's pseudo-modules in brackets, e.g. [Unknown] and
    [Broken backtraces]); the first frame that is neither system nor the Python
    interpreter (python3.x / libpython), since a Python program's first non-system frame
    is mostly the eval loop; the innermost module by share; and the modules found
    anywhere on the stack (inclusive share);
 4. the GIL trace (NVTX ranges 'Holding GIL' / 'Waiting for GIL' in each process's
    'GIL Trace' domain, found through its eventType 75 row): for the launching thread
    (the thread with most rows in CUPTI_ACTIVITY_KIND_RUNTIME), the share of the idle
    time it spent waiting for the GIL and holding it, and for the time it waited, which
    other threads held the GIL (overlap with their 'Holding GIL' ranges);
 5. Python samples: NVTX marks (eventType 34) in each process's 'Python Periodic
    Sampling' domain inside the idle intervals, per thread and per colour (nsys colours
    the marks, apparently by thread state; the export does not say which colour is
    which). Their frames live in binaryData, described by NVTX_PAYLOAD_SCHEMAS and
    NVTX_PAYLOAD_SCHEMA_ENTRIES (sampling schema: uint64 thread-state id @0, enum thread
    state @8, uint32 frame count @12, then that many 24-byte frames: registered-string
    handles Function @0 and File @8, int32 Line @16). A default export leaves binaryData
    NULL; then only counts are reported, and the output says so. Where payloads exist,
    they are decoded with that layout (read from the schema tables, not assumed), after
    the payload data entries nsys writes ahead of it (sample_payload), the string
    handles looked up in StringIds; a payload that does not fit is counted as
    undecodable.

Times are integer nanoseconds on the session clock; shares are percentages. Missing tables
are named in the output ("missing"), never a traceback.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import os
import re
import struct
import sys
from collections import Counter
from itertools import chain
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truthlib import Report, ms, pct, window_of  # noqa: E402

MASK = 0xFFFFFF
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
SYSTEM_MODULE = re.compile(r"^(\[.*\]|libc[.-].*|libc\.so.*|libpthread.*|ld-linux.*|"
                           r"linux-vdso.*|.*vdso.*)$")
INTERPRETER_MODULE = re.compile(r"^(python\d[\d.]*|libpython\d.*)$")
GIL_DOMAIN = "GIL Trace"
PY_SAMPLING_DOMAIN = "Python Periodic Sampling"
PY_CUDA_DOMAIN = "Python Backtrace on CUDA"
# NVTX payload entry types (nvToolsExtPayload.h) that the sampling schemas use
ENTRY_SIZE = {5: 4, 15: 4, 16: 4, 18: 8, 80: 8}
ENTRY_FMT = {5: "<i", 15: "<i", 16: "<I", 18: "<Q", 80: "<Q"}
FLAG_ARRAY_LENGTH_INDEX = 3 << 4


def pid_of(g):
    return (np.asarray(g) >> 24) & MASK


def tid_of(g):
    return np.asarray(g) & MASK


# -- intervals (vectorised) ---------------------------------------------------------------
def union(iv: np.ndarray) -> np.ndarray:
    """Disjoint sorted [start, end) rows covering the same time as *iv* (N x 2)."""
    if len(iv) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    reach = np.maximum.accumulate(iv[:, 1])
    new = np.r_[True, iv[1:, 0] > reach[:-1]]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(iv) - 1]
    return np.stack([iv[first, 0], reach[last]], axis=1)


def covered_before(u: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time of the disjoint sorted intervals *u* that lies before each time in *t*."""
    if len(u) == 0:
        return np.zeros(len(t), dtype=np.int64)
    lengths = u[:, 1] - u[:, 0]
    cum = np.r_[0, np.cumsum(lengths)]
    k = np.searchsorted(u[:, 0], t, side="right") - 1
    kk = np.clip(k, 0, None)
    part = np.clip(t - u[kk, 0], 0, lengths[kk])
    return np.where(k >= 0, cum[kk] + part, 0)


def intersect_ns(a: np.ndarray, b: np.ndarray) -> int:
    """Time covered by both disjoint sorted interval sets *a* and *b*."""
    if len(a) == 0 or len(b) == 0:
        return 0
    return int((covered_before(b, a[:, 1]) - covered_before(b, a[:, 0])).sum())


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The intervals of the intersection of disjoint sorted sets *a* and *b*."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    j0 = np.searchsorted(b[:, 1], a[:, 0], side="right")
    j1 = np.searchsorted(b[:, 0], a[:, 1], side="left")
    n = np.clip(j1 - j0, 0, None)
    ai = np.repeat(np.arange(len(a)), n)
    # each a-interval's run of overlapping b-intervals, j0[i] .. j1[i] - 1, flattened
    bj = np.repeat(j0, n) + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    s = np.maximum(a[ai, 0], b[bj, 0])
    e = np.minimum(a[ai, 1], b[bj, 1])
    keep = e > s
    return np.stack([s[keep], e[keep]], axis=1)


def inside(u: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Mask of the times *t* that fall in one of the disjoint sorted intervals *u*."""
    if len(u) == 0:
        return np.zeros(len(t), dtype=bool)
    k = np.searchsorted(u[:, 0], t, side="right") - 1
    return (k >= 0) & (t < u[np.clip(k, 0, None), 1])


# -- report readings ----------------------------------------------------------------------
class HostReport(Report):
    def arr(self, sql: str, cols: int, *args) -> np.ndarray:
        """The integer columns of *sql* as an N x cols array, streamed from the cursor
        (no list of tuples: SAMPLING_CALLCHAINS holds millions of rows)."""
        cur = self.db.execute(sql, args)
        flat = np.fromiter(chain.from_iterable(cur), dtype=np.int64)
        return flat.reshape(-1, cols)

    def gpu_union(self) -> np.ndarray:
        parts = [self.arr(f"select start, end from {t}", 2) for t in GPU_TABLES
                 if self.has(t)]
        return union(np.concatenate(parts)) if parts else np.zeros((0, 2), np.int64)

    def thread_names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        if self.has("ThreadNames"):
            for n, g in self.q("select nameId, globalTid from ThreadNames "
                               "order by priority"):
                names[g] = self.strings.get(n, str(n))
        return names

    def process_names(self) -> dict[int, str]:
        if not self.has("PROCESSES"):
            return {}
        return {pid: name for _, pid, name in
                self.q("select globalPid, pid, name from PROCESSES")}

    def domain_ids(self, name: str) -> set[tuple[int, int]]:
        """(pid, domainId) of every process's NVTX domain called *name* (domain ids are
        per process: the 'GIL Trace' of two processes may have different ids)."""
        if not self.has("NVTX_EVENTS"):
            return set()
        out = set()
        for dom, text, tid, g in self.q("select domainId, text, textId, globalTid from "
                                        "NVTX_EVENTS where eventType = 75"):
            if (text if text is not None else self.strings.get(tid, "")) == name:
                out.add((int(pid_of(g)), dom))
        return out

    def text_ids(self, value: str) -> list[int]:
        return [k for k, v in self.strings.items() if v == value]


def label(g: int, tnames: dict, pnames: dict) -> str:
    pid, tid = int(pid_of(g)), int(tid_of(g))
    return (f"pid {pid} ({pnames.get(pid, '?')}) tid {tid} "
            f"({tnames.get(g, '?')})")


def base(path: str) -> str:
    return os.path.basename(path) if path else path


def shares(keys: list, total: int, top: int) -> list[dict]:
    return [{"name": k, "samples": n, "pct": pct(n, total)}
            for k, n in Counter(keys).most_common(top)]


# -- 1. the steady window and its idle ----------------------------------------------------
def steady_window(r: HostReport, gpu: np.ndarray, regex: str | None, skip: int):
    if regex:
        rs = r.ranges(regex)
        if len(rs) <= skip:
            raise SystemExit(f"truth_host: {len(rs)} NVTX ranges match {regex!r}, "
                             f"need more than --skip {skip}; check the regex")
        lo, hi = window_of(rs, skip)
        return int(lo), int(hi), f"NVTX ranges {regex!r} after the first {skip}" \
            f" ({len(rs) - skip} ranges)"
    if not len(gpu):
        raise SystemExit("truth_host: the report has no GPU activity (no kernels, copies,"
                         " memsets); capture with -t cuda")
    a, b = int(gpu[0, 0]), int(gpu[-1, 1])
    cut = (b - a) // 10
    return a + cut, b - cut, "middle 80% of the span of GPU activity"


def idle_of(gpu: np.ndarray, lo: int, hi: int) -> np.ndarray:
    u = gpu[(gpu[:, 1] > lo) & (gpu[:, 0] < hi)]
    edges = np.clip(u, lo, hi)
    starts = np.r_[lo, edges[:, 1]]
    ends = np.r_[edges[:, 0], hi]
    keep = ends > starts
    return np.stack([starts[keep], ends[keep]], axis=1).astype(np.int64)


# -- 2. + 3. CPU samples and their stacks -------------------------------------------------
def cpu_samples(r: HostReport, idle: np.ndarray, top_threads: int, top: int,
                tnames: dict, pnames: dict) -> dict:
    if not r.has("COMPOSITE_EVENTS"):
        return {"missing": ["COMPOSITE_EVENTS"],
                "note": "no CPU samples: capture with --sample=process-tree "
                        "(or --sample=cpu) and --backtrace=fp|dwarf|lbr"}
    ev = r.arr("select id, start, globalTid, coalesce(threadState, -1) from "
               "COMPOSITE_EVENTS", 4)
    states = r.enum("ENUM_SAMPLING_THREAD_STATE")
    hit = ev[inside(idle, ev[:, 1])]
    out: dict = {"samples_total": len(ev), "samples_in_idle": len(hit)}
    if not len(hit):
        return out
    n = len(hit)
    pids, pc = np.unique(pid_of(hit[:, 2]), return_counts=True)
    order = np.argsort(-pc, kind="stable")
    out["per_process"] = [{"pid": int(pids[i]), "name": pnames.get(int(pids[i]), "?"),
                           "samples": int(pc[i]), "pct": pct(pc[i], n)} for i in order]
    gts, gc = np.unique(hit[:, 2], return_counts=True)
    order = np.argsort(-gc, kind="stable")
    out["per_thread"] = [{"thread": label(int(gts[i]), tnames, pnames),
                          "globalTid": int(gts[i]), "samples": int(gc[i]),
                          "pct": pct(gc[i], n)} for i in order[:max(top, top_threads)]]
    out["thread_states"] = shares([states.get(int(s), str(s)) for s in hit[:, 3]], n, top)
    if not r.has("SAMPLING_CALLCHAINS"):
        out["missing"] = ["SAMPLING_CALLCHAINS"]
        out["note"] = "samples without call stacks: capture with --backtrace=fp"
        return out
    stacks = []
    for i in order[:top_threads]:
        g = int(gts[i])
        ids = np.sort(hit[hit[:, 2] == g, 0])
        stacks.append({"thread": label(g, tnames, pnames), "samples": int(gc[i]),
                       "pct_of_idle_samples": pct(gc[i], n)}
                      | stack_shares(r, ids, top))
    out["top_threads_stacks"] = stacks
    return out


def stack_shares(r: HostReport, ids: np.ndarray, top: int) -> dict:
    """Frame and module shares over the samples *ids* (sorted). SQLite does the per-frame
    work (a report holds millions of frames; streaming them all into Python costs
    seconds): one row per sample for the innermost frame and for each "first frame
    outside" reading, one per (sample, module) for the inclusive module shares."""
    s = r.strings
    n = len(ids)
    span = (int(ids[0]), int(ids[-1]))

    def rows(sql: str, cols: int) -> np.ndarray:
        got = r.arr(sql, cols, *span)
        return got[np.isin(got[:, 0], ids)]

    # a module counts once per sample however many of its frames the stack holds
    pairs = rows("select distinct id, coalesce(module, -1) from SAMPLING_CALLCHAINS "
                 "where id between ? and ?", 2)
    mods = np.unique(pairs[:, 1])
    mod_base = {int(m): base(s.get(int(m), "?")) for m in mods} | {-1: "?"}
    system = [int(m) for m in mods if SYSTEM_MODULE.match(mod_base[int(m)])]
    interp = [int(m) for m in mods if INTERPRETER_MODULE.match(mod_base[int(m)])]

    def first_outside(skip: list[int]) -> np.ndarray:
        # SQLite gives a bare column of min() the values of the row holding the minimum
        not_in = f"and coalesce(module, -1) not in ({','.join(map(str, skip)) or 'NULL'})"
        return rows("select id, min(stackDepth), coalesce(symbol, -1), "
                    "coalesce(module, -1) from SAMPLING_CALLCHAINS where id between ? and ? "
                    f"{not_in} group by id", 4)

    def frame_shares(got: np.ndarray) -> list[dict]:
        if not len(got):
            return []
        # symbol and module ids (StringIds, non-negative or -1) packed into one key
        keys, counts = np.unique((got[:, 2] + 1) << 32 | (got[:, 3] + 1),
                                 return_counts=True)
        order = np.argsort(-counts, kind="stable")[:top]
        out = []
        for i in order:
            sym, mod = int(keys[i] >> 32) - 1, int(keys[i] & 0xFFFFFFFF) - 1
            out.append({"name": f"{s.get(sym, '?')}  [{mod_base.get(mod, '?')}]",
                        "samples": int(counts[i]), "pct": pct(int(counts[i]), n)})
        return out

    def module_shares(mod_ids: np.ndarray) -> list[dict]:
        counts = Counter(mod_base.get(int(m), "?") for m in mod_ids)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        return [{"name": k, "samples": c, "pct": pct(c, n)} for k, c in ranked]

    innermost = rows("select id, stackDepth, coalesce(symbol, -1), coalesce(module, -1) "
                     "from SAMPLING_CALLCHAINS where id between ? and ? and stackDepth = 0",
                     4)
    first_lib = first_outside(system + interp)
    return {
        "samples_with_stack": int(len(np.unique(pairs[:, 0]))),
        "innermost_frames": frame_shares(innermost),
        "innermost_modules": module_shares(innermost[:, 3]),
        "first_non_system_frames": frame_shares(first_outside(system)),
        "first_non_system_non_interpreter_frames": frame_shares(first_lib),
        "samples_without_such_frame": n - len(first_lib),
        "modules_anywhere_on_stack": module_shares(pairs[:, 1]),
    }


# -- 4. the GIL ---------------------------------------------------------------------------
def launching_thread(r: HostReport) -> int | None:
    if not r.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return None
    row = r.q("select globalTid, count(*) n from CUPTI_ACTIVITY_KIND_RUNTIME "
              "group by globalTid order by n desc limit 1")
    return int(row[0][0]) if row else None


def gil(r: HostReport, idle: np.ndarray, launcher: int | None, top: int,
        tnames: dict, pnames: dict) -> dict:
    if not r.has("NVTX_EVENTS"):
        return {"missing": ["NVTX_EVENTS"], "note": "no GIL trace: capture with "
                "-t ...,python-gil (nsys 2023.4 and later)"}
    doms = r.domain_ids(GIL_DOMAIN)
    hold_ids, wait_ids = r.text_ids("Holding GIL"), r.text_ids("Waiting for GIL")
    gil_ids = ",".join(map(str, hold_ids + wait_ids)) or "NULL"
    rows = r.arr(
        "select start, end, globalTid, coalesce(domainId, 0), coalesce(textId, -1) from "
        "NVTX_EVENTS where eventType in (59, 60) and end is not null and textId in "
        f"({gil_ids})", 5)
    texts = r.q("select start, end, globalTid, coalesce(domainId, 0), text from NVTX_EVENTS "
                "where eventType in (59, 60) and end is not null and text in "
                "('Holding GIL', 'Waiting for GIL')")
    note = None
    if doms:
        dom_keys = np.array([p << 32 | d for p, d in doms], dtype=np.int64)
        rows = rows[np.isin(pid_of(rows[:, 2]) << 32 | rows[:, 3], dom_keys)]
        texts = [x for x in texts if (int(pid_of(x[2])), x[3]) in doms]
    elif len(rows) or texts:
        # a trimmed report may lose the domain's eventType 75 row but keep its ranges
        note = ("no 'GIL Trace' domain row: took 'Holding GIL' / 'Waiting for GIL' "
                "ranges of any domain")
    else:
        return {"missing": ["'GIL Trace' NVTX domain"], "note": "no GIL trace: capture "
                "with -t ...,python-gil"}
    hold = rows[np.isin(rows[:, 4], hold_ids)]
    wait = rows[np.isin(rows[:, 4], wait_ids)]
    if texts:  # nsys versions that inline the text instead of a StringIds id
        t = np.array([(a, b, g, d, 1 if x == "Holding GIL" else 0)
                      for a, b, g, d, x in texts], dtype=np.int64)
        hold = np.concatenate([hold, t[t[:, 4] == 1]])
        wait = np.concatenate([wait, t[t[:, 4] == 0]])
    idle_ns = int((idle[:, 1] - idle[:, 0]).sum())
    out: dict = {"note": note} if note else {}
    out |= {"holding_ranges": len(hold), "waiting_ranges": len(wait),
                 "threads_traced": len(np.unique(np.r_[hold[:, 2], wait[:, 2]]))}
    if launcher is None:
        out["note"] = "no CUPTI_ACTIVITY_KIND_RUNTIME: no launching thread to follow"
        return out
    lw = union(wait[wait[:, 2] == launcher][:, :2])
    lh = union(hold[hold[:, 2] == launcher][:, :2])
    waited = intersect(idle, lw)
    waited_ns = int((waited[:, 1] - waited[:, 0]).sum())
    out |= {"launching_thread": label(launcher, tnames, pnames),
            "launcher_traced": bool(len(lw) or len(lh)),
            "idle_ms": ms(idle_ns),
            "launcher_waiting_for_gil_in_idle_pct": pct(waited_ns, idle_ns),
            "launcher_holding_gil_in_idle_pct": pct(intersect_ns(idle, lh), idle_ns)}
    holders = []
    for g in np.unique(hold[:, 2]):
        if g == launcher:
            continue
        ns = intersect_ns(waited, union(hold[hold[:, 2] == g][:, :2]))
        if ns:
            holders.append({"thread": label(int(g), tnames, pnames), "ms": ms(ns),
                            "pct_of_launcher_wait": pct(ns, waited_ns)})
    holders.sort(key=lambda h: -h["ms"])
    others = hold[hold[:, 2] != launcher]
    out["launcher_waited_while_no_other_thread_held_pct"] = pct(
        waited_ns - intersect_ns(waited, union(others[:, :2])), waited_ns)
    out["gil_holders_while_launcher_waited"] = holders[:top]
    return out


# -- 5. Python samples --------------------------------------------------------------------
def sampling_layout(r: HostReport, dom: int) -> dict | None:
    """The sample and frame layout from the schema tables of domain *dom*, or None."""
    if not (r.has("NVTX_PAYLOAD_SCHEMAS") and r.has("NVTX_PAYLOAD_SCHEMA_ENTRIES")):
        return None
    ent = r.q("select schemaId, idx, coalesce(flags, 0), type, name, "
              "coalesce(arrayOrUnionDetail, 0), coalesce(offset, 0) from "
              "NVTX_PAYLOAD_SCHEMA_ENTRIES where domainId = ? order by schemaId, idx", dom)
    sizes = dict(r.q("select schemaId, payloadSize from NVTX_PAYLOAD_SCHEMAS where "
                     "domainId = ?", dom))
    by_schema: dict[int, list] = {}
    for e in ent:
        by_schema.setdefault(e[0], []).append(e)
    for entries in by_schema.values():
        arrays = [e for e in entries if e[2] == FLAG_ARRAY_LENGTH_INDEX]
        if not arrays:
            continue
        frame_schema = arrays[0][3]
        frame = by_schema.get(frame_schema)
        count = next((e for e in entries if e[1] == arrays[0][5]), None)
        if not frame or count is None or count[3] not in ENTRY_FMT:
            return None
        return {"schema": entries[0][0],
                "count": (count[6], ENTRY_FMT[count[3]]), "frames_at": arrays[0][6],
                "frame_size": sizes.get(frame_schema) or 24,
                "fields": {e[4]: (e[6], ENTRY_FMT.get(e[3]), e[3]) for e in frame}}
    return None


def payload_bytes(blob) -> bytes | None:
    if blob is None:
        return None
    if isinstance(blob, (bytes, bytearray, memoryview)):
        return bytes(blob)
    text = str(blob).strip()
    for decode in (bytes.fromhex, lambda t: base64.b64decode(t, validate=True)):
        try:
            return decode(text)
        except ValueError:
            pass
    return text.encode("latin-1", "replace")


def sample_payload(data: bytes, schema: int) -> bytes:
    """The sample's payload inside a mark's binaryData: nsys 2025.3 writes the mark's
    payload data entries first (nvtxPayloadData_t of nvToolsExtPayload.h: uint64 count,
    then per entry uint64 schema id, uint64 size, uint64 offset of the payload in the
    blob, where the C struct holds a pointer); the entry of *schema* gives the payload.
    A blob without such entries is taken as the payload itself."""
    if len(data) >= 8:
        (n,) = struct.unpack_from("<Q", data, 0)
        if 1 <= n <= 16 and len(data) >= 8 + 24 * n:
            for i in range(n):
                sid, size, off = struct.unpack_from("<QQQ", data, 8 + 24 * i)
                if sid == schema and off >= 8 + 24 * n and off + size <= len(data):
                    return data[off:off + size]
    return data


def decode_sample(data: bytes, layout: dict, strings: dict) -> list[tuple] | None:
    """(function, file, line) frames of one sample, innermost first as stored; None when
    the payload does not fit the layout. Strings as Python spells them: StringIds holds
    them with XML entities ('&lt;module&gt;')."""
    data = sample_payload(data, layout["schema"])
    off, fmt = layout["count"]
    try:
        (count,) = struct.unpack_from(fmt, data, off)
        base_off, size = layout["frames_at"], layout["frame_size"]
        if count < 0 or base_off + count * size > len(data):
            return None
        frames = []
        for i in range(count):
            vals = {}
            for name, (o, f, typ) in layout["fields"].items():
                if f is None:
                    return None
                (v,) = struct.unpack_from(f, data, base_off + i * size + o)
                vals[name] = (html.unescape(strings.get(v, f"<handle {v}>")) if typ == 80
                              else v)
            frames.append((vals.get("Function"), vals.get("File"), vals.get("Line")))
        return frames
    except struct.error:
        return None


def python_samples(r: HostReport, idle: np.ndarray, top: int, tnames: dict,
                   pnames: dict) -> dict:
    if not r.has("NVTX_EVENTS"):
        return {"missing": ["NVTX_EVENTS"]}
    doms = r.domain_ids(PY_SAMPLING_DOMAIN)
    out: dict = {"python_backtrace_on_cuda_marks": 0}
    cuda_doms = r.domain_ids(PY_CUDA_DOMAIN)
    if cuda_doms:
        out["python_backtrace_on_cuda_marks"] = r.q(
            "select count(*) from NVTX_EVENTS where eventType = 34 and domainId in "
            f"({','.join(str(d) for _, d in cuda_doms)})")[0][0]
    if not doms:
        out |= {"missing": ["'Python Periodic Sampling' NVTX domain"],
                "note": "no Python samples: capture with --python-sampling=true"}
        return out
    cols = {c[1] for c in r.q("pragma table_info(NVTX_EVENTS)")}
    has_blob = "binaryData" in cols
    marks = r.arr("select rowid, start, globalTid, domainId, coalesce(color, -1), "
                  + ("binaryData is not null and length(binaryData) > 0" if has_blob
                     else "0")
                  + " from NVTX_EVENTS where eventType = 34 and domainId in "
                  f"({','.join(str(d) for _, d in doms)})", 6)
    dom_keys = np.array([p << 32 | d for p, d in doms], dtype=np.int64)
    marks = marks[np.isin(pid_of(marks[:, 2]) << 32 | marks[:, 3], dom_keys)]
    hit = marks[inside(idle, marks[:, 1])]
    n = len(hit)

    def counted(keys: np.ndarray, name) -> list[dict]:
        vals, counts = np.unique(keys, return_counts=True)
        order = np.argsort(-counts, kind="stable")[:top]
        return [{"name": name(int(vals[i])), "samples": int(counts[i]),
                 "pct": pct(int(counts[i]), n)} for i in order]

    out |= {"marks_total": len(marks), "marks_in_idle": n,
            "per_thread": counted(hit[:, 2], lambda g: label(g, tnames, pnames)),
            "per_colour": counted(hit[:, 4] & 0xFFFFFFFF, lambda c: f"0x{c:08x}")}
    with_blob = hit[hit[:, 5] == 1]
    out["payloads_in_idle"] = len(with_blob)
    if not has_blob:
        out["payload_note"] = "NVTX_EVENTS has no binaryData column: counts only"
        return out
    if not len(with_blob):
        out["payload_note"] = ("binaryData is NULL (a default export leaves the payloads"
                               " out): counts only, no Python frames")
        return out
    layouts = {d: sampling_layout(r, d) for _, d in doms}
    first, frames_any, bad = [], [], 0
    for lo in range(0, len(with_blob), 500):
        chunk = with_blob[lo:lo + 500]
        for dom, data in r.q("select domainId, binaryData from NVTX_EVENTS where rowid in "
                             f"({','.join(map(str, chunk[:, 0]))})"):
            lay = layouts.get(dom)
            raw = payload_bytes(data)
            fr = decode_sample(raw, lay, r.strings) if lay and raw else None
            if not fr:
                bad += 1
                continue
            first.append("{1}:{0}:{2}".format(*fr[0]))
            frames_any += sorted({"{1}:{0}".format(*f) for f in fr})
    k = len(with_blob)
    out |= {"payloads_undecodable": bad,
            # the payload's frame order (innermost or outermost first) is nsys's; the
            # first stored frame is shown as stored
            "first_stored_python_frames": shares(first, k, top),
            "python_functions_anywhere_on_stack": shares(frames_any, k, top)}
    if bad == k:
        out["payload_note"] = "payloads present but none fits the schema: counts only"
    return out


# -- driver -------------------------------------------------------------------------------
def host_truth(path: str, regex: str | None = None, skip: int = 0, top: int = 10,
               top_threads: int = 2) -> dict:
    r = HostReport(path)
    missing = [t for t in ("StringIds", "NVTX_EVENTS", "COMPOSITE_EVENTS",
                           "SAMPLING_CALLCHAINS", "CUPTI_ACTIVITY_KIND_RUNTIME",
                           "CUPTI_ACTIVITY_KIND_KERNEL", "ThreadNames", "PROCESSES")
               if not r.has(t)]
    gpu = r.gpu_union()
    lo, hi, how = steady_window(r, gpu, regex, skip)
    idle = idle_of(gpu, lo, hi)
    lengths = idle[:, 1] - idle[:, 0]
    tnames, pnames = r.thread_names(), r.process_names()
    launcher = launching_thread(r)
    return {
        "report": path,
        "missing_tables": missing,
        "window": {"how": how, "lo": lo, "hi": hi, "ms": ms(hi - lo)},
        "idle": {"intervals": len(idle), "ms": ms(int(lengths.sum())),
                 "pct": pct(int(lengths.sum()), hi - lo),
                 "median_us": round(float(np.median(lengths)) / 1e3, 1)
                 if len(lengths) else None,
                 "longest_ms": ms(int(lengths.max())) if len(lengths) else None},
        "launching_thread": label(launcher, tnames, pnames) if launcher else None,
        "cpu_samples": cpu_samples(r, idle, top_threads, top, tnames, pnames),
        "gil": gil(r, idle, launcher, top, tnames, pnames),
        "python_samples": python_samples(r, idle, top, tnames, pnames),
    }


def render(d: dict) -> str:
    w, i = d["window"], d["idle"]
    out = [f"report: {d['report']}"]
    if d["missing_tables"]:
        out.append(f"missing tables: {', '.join(d['missing_tables'])}")
    out += [f"window: {w['how']}: {w['ms']} ms",
            f"GPU idle: {i['pct']}% of the window, {i['ms']} ms in {i['intervals']} "
            f"intervals (median {i['median_us']} us, longest {i['longest_ms']} ms)",
            f"launching thread: {d['launching_thread']}", ""]

    def table(title: str, items: list[dict], key: str = "name", indent: str = "  "):
        if not items:
            return
        out.append(f"{indent}{title}")
        for it in items:
            out.append(f"{indent}  {it['pct']:6.2f}%  {it['samples']:>7}  {it[key]}")

    c = d["cpu_samples"]
    out.append("CPU samples in GPU idle:")
    if "samples_total" in c:
        out.append(f"  {c['samples_in_idle']} of {c['samples_total']} samples")
    table("per process:", [p | {"name": f"pid {p['pid']} ({p['name']})"}
                           for p in c.get("per_process", [])])
    table("per thread:", c.get("per_thread", []), key="thread")
    table("thread states:", c.get("thread_states", []))
    for s in c.get("top_threads_stacks", []):
        out.append(f"  -- {s['thread']}: {s['samples']} samples "
                   f"({s['pct_of_idle_samples']}% of idle samples)")
        table("innermost frame:", s["innermost_frames"], indent="    ")
        table("innermost module:", s["innermost_modules"], indent="    ")
        table("first non-system frame:", s["first_non_system_frames"], indent="    ")
        table("first frame outside system and interpreter:",
              s["first_non_system_non_interpreter_frames"], indent="    ")
        table("modules anywhere on the stack:", s["modules_anywhere_on_stack"],
              indent="    ")
    for k in ("missing", "note"):
        if k in c:
            out.append(f"  {k}: {c[k]}")
    g = d["gil"]
    out += ["", "GIL:"]
    for k in ("holding_ranges", "waiting_ranges", "threads_traced", "launcher_traced",
              "launcher_waiting_for_gil_in_idle_pct", "launcher_holding_gil_in_idle_pct",
              "launcher_waited_while_no_other_thread_held_pct", "missing", "note"):
        if k in g:
            out.append(f"  {k}: {g[k]}")
    if g.get("gil_holders_while_launcher_waited"):
        out.append("  holders while the launching thread waited (% of its wait):")
    for h in g.get("gil_holders_while_launcher_waited", []):
        out.append(f"    {h['pct_of_launcher_wait']:6.2f}%  {h['ms']} ms  {h['thread']}")
    p = d["python_samples"]
    out += ["", "Python samples in GPU idle:"]
    for k in ("marks_total", "marks_in_idle", "payloads_in_idle", "payloads_undecodable",
              "python_backtrace_on_cuda_marks", "missing", "note", "payload_note"):
        if k in p:
            out.append(f"  {k}: {p[k]}")
    table("per thread:", p.get("per_thread", []))
    table("per colour (thread state, mapping not exported):", p.get("per_colour", []))
    table("first stored Python frame:", p.get("first_stored_python_frames", []))
    table("Python functions anywhere on the stack:",
          p.get("python_functions_anywhere_on_stack", []))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="nsys SQLite export (.sqlite or .sqlite.xz)")
    ap.add_argument("--range", dest="regex", help="NVTX range regex of the steady steps")
    ap.add_argument("--skip", type=int, default=0, help="warm-up ranges to skip")
    ap.add_argument("--top", type=int, default=10, help="rows per table")
    ap.add_argument("--threads", type=int, default=2,
                    help="threads (most idle samples first) whose stacks to show")
    ap.add_argument("--json", action="store_true", help="print the dict as JSON")
    a = ap.parse_args(argv)
    if not Path(a.report).is_file():
        print(f"truth_host: no such file {a.report}; pass an nsys SQLite export",
              file=sys.stderr)
        return 2
    try:
        d = host_truth(a.report, a.regex, a.skip, a.top, a.threads)
    except __import__("sqlite3").DatabaseError as e:
        print(f"truth_host: {a.report} is not a readable SQLite export ({e}); "
              "export it with `nsys export --type sqlite`", file=sys.stderr)
        return 2
    print(json.dumps(d, indent=1) if a.json else render(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
