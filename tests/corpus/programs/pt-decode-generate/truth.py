"""Truth figures for pt-decode-generate: tokens counted by their argmax kernel.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the program launches exactly one argmax reduction per new token (greedy
choice of the next token) and none elsewhere inside ``generate``: the kernels whose
demangled name holds ``ArgMax`` and whose launch call lies inside the ``generate`` NVTX
range are the token steps. Steady state: from the third token's argmax kernel to the
end of the last kernel launched inside ``generate``. The launch-bound share is the GPU
idle time of that window (there is nothing else in the loop: no sync, no copy).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, iv, pct  # noqa: E402

SKIP = 2


def kernels_launched_in(r: Report, lo: int, hi: int) -> list[tuple[int, int, str]]:
    """(start, end, demangled name) of kernels whose runtime launch call started in [lo, hi)."""
    if not (r.has("CUPTI_ACTIVITY_KIND_KERNEL") and r.has("CUPTI_ACTIVITY_KIND_RUNTIME")):
        return []
    corr = {c for (c,) in r.q("select correlationId from CUPTI_ACTIVITY_KIND_RUNTIME "
                              "where start >= ? and start < ?", lo, hi)}
    rows = r.q("select start, end, demangledName, correlationId from "
               "CUPTI_ACTIVITY_KIND_KERNEL order by start")
    return [(a, b, r.strings.get(n, str(n))) for a, b, n, c in rows if c in corr]


def token_sequences(r: Report, lo: int, hi: int) -> dict:
    """Whether every token launches the same kernels: the per-token sequences of kernel
    names (demangled, i.e. the exact function and template instance, and short), each
    token from its argmax kernel to the next one's."""
    if not (r.has("CUPTI_ACTIVITY_KIND_KERNEL") and r.has("CUPTI_ACTIVITY_KIND_RUNTIME")):
        return {}
    corr = {c for (c,) in r.q("select correlationId from CUPTI_ACTIVITY_KIND_RUNTIME "
                              "where start >= ? and start < ?", lo, hi)}
    rows = [(r.strings.get(d, str(d)), r.strings.get(n, str(n))) for d, n, c in r.q(
        "select demangledName, shortName, correlationId from CUPTI_ACTIVITY_KIND_KERNEL "
        "order by start") if c in corr]
    marks = [i for i, (d, _) in enumerate(rows) if re.search(r"ArgMax", d)] + [len(rows)]
    demangled = [tuple(d for d, _ in rows[a:b]) for a, b in zip(marks, marks[1:])]
    short = [tuple(n for _, n in rows[a:b]) for a, b in zip(marks, marks[1:])]
    changes = [i for i in range(1, len(demangled)) if demangled[i] != demangled[i - 1]]
    return {"distinct_token_sequences_demangled": len(set(demangled)),
            "distinct_token_sequences_demangled_from_token_3": len(set(demangled[SKIP:])),
            "distinct_token_sequences_short": len(set(short)),
            "distinct_token_sequences_short_from_token_3": len(set(short[SKIP:])),
            "demangled_sequence_changes_at_token": changes,
            "kernels_per_token_set": sorted({len(t) for t in demangled})}


def main(path: str) -> dict:
    r = Report(path)
    gen = r.ranges(r"^generate$")
    pre = r.ranges(r"^prefill$")
    out: dict = {"generate_ranges": len(gen), "prefill_ranges": len(pre)}
    if not gen:
        return out
    g = gen[0]
    ks = kernels_launched_in(r, g.start, g.end)
    argmax = [k for k in ks if re.search(r"ArgMax", k[2])]
    out |= {"generate_ms": round(g.ns / 1e6, 3), "kernels_in_generate": len(ks),
            "tokens": len(argmax),
            "kernels_per_token": round(len(ks) / len(argmax), 2) if argmax else None}
    if len(argmax) <= SKIP:
        return out
    lo = argmax[SKIP][0]
    hi = max(b for _, b, _ in ks)
    out |= token_sequences(r, g.start, g.end)
    dev = r.devices()[0] if r.devices() else None
    busy = r.busy_ns(lo, hi, dev)
    steady = [k for k in ks if k[0] >= lo]
    syncs = r.api_calls(r"Synchronize|Memcpy", g.start, g.end)
    kdur = np.array([b - a for a, b, _ in steady], dtype=np.int64)
    out |= {
        "steady_tokens": len(argmax) - SKIP,
        "steady_window_ms": round((hi - lo) / 1e6, 3),
        "ms_per_token": round((hi - lo) / 1e6 / (len(argmax) - SKIP), 4),
        "steady_busy_pct": pct(busy, hi - lo),
        # the designed cause: GPU idle between launches, the whole idle time of the window
        "launch_bound_idle_pct": pct((hi - lo) - busy, hi - lo),
        "kernel_us_median": round(float(np.median(kdur)) / 1e3, 2) if len(kdur) else 0.0,
        "sync_or_copy_calls_in_generate": len(syncs),
        "sync_or_copy_ms_in_generate": round(
            clipped_ns(iv(syncs), g.start, g.end) / 1e6, 3),
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
