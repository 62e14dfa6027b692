"""Truth figures for pt-server: the GPU idle while the main thread waits on the queue.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``request N`` (pushed after ``q.get()`` returns). Steady
state: requests 2..99 with the wait before each, i.e. from the end of ``request 1`` to
the end of the last request. Thread-wait share: the GPU idle time of the window that
the main thread (the thread of the request ranges) spends inside blocking OS-runtime
calls (semaphore / condition-variable / mutex / futex waits, sleeps), as a % of the
window. Also: the GPU idle time between the request ranges (the main thread is then in
``q.get()``), and the blocking calls found on the main thread by name.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truthlib import Report, clipped_ns, overlap_ns, pct, union  # noqa: E402

SKIP = 2
BLOCKING = (r"(?i)^(sem_(timed|clock)?wait|pthread_cond_(timed|clock)?wait|"
            r"pthread_mutex_(timed|clock)?lock|pthread_rwlock_\w*lock|futex|\w*sleep|"
            r"poll|ppoll|select|pselect\w*|epoll_p?wait|pthread_join|wait\w*)$")


def main(path: str) -> dict:
    r = Report(path)
    reqs = sorted(r.ranges(r"^request \d+$"), key=lambda s: int(re.findall(r"\d+", s.name)[0]))
    out: dict = {"requests": len(reqs)}
    if len(reqs) <= SKIP:
        return out
    dev = r.devices()[0] if r.devices() else None
    lo, hi = reqs[SKIP - 1].end, reqs[-1].end
    window = hi - lo
    main_tid = reqs[0].gtid
    u = union(r.gpu_intervals(dev))
    busy = clipped_ns(u, lo, hi)
    idle = r.idle_gaps(lo, hi, dev)
    calls = [c for c in r.osrt_calls(BLOCKING, lo, hi) if c[3] == main_tid]
    waits = np.array([(a, min(b, hi)) for a, b, *_ in calls], dtype=np.int64).reshape(-1, 2)
    between = np.array([(reqs[i - 1].end, reqs[i].start) for i in range(SKIP, len(reqs))],
                       dtype=np.int64)
    by_name = r.call_time_by_name(calls)
    out |= {
        "steady_requests": len(reqs) - SKIP,
        "steady_window_ms": round(window / 1e6, 3),
        "handle_ms_median": round(float(np.median([x.ns for x in reqs[SKIP:]])) / 1e6, 3),
        "period_ms_median": round(float(np.median(np.diff([x.start for x in reqs]))) / 1e6, 3),
        "steady_busy_pct": pct(busy, window),
        "steady_idle_pct": pct(window - busy, window),
        # the designed cause: GPU idle while the launching thread is blocked on the queue
        "thread_wait_idle_pct": pct(overlap_ns(idle, waits), window),
        "idle_between_requests_pct": pct(overlap_ns(idle, between), window),
        "main_thread_blocking_calls": {k: {"count": v[0], "ms": round(v[1] / 1e6, 3)}
                                       for k, v in sorted(by_name.items(),
                                                          key=lambda kv: -kv[1][1])[:6]},
    }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
