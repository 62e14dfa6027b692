#!/usr/bin/env python3
"""How does `gpugap analyze R1 R2 ...` scale with workers, and what does combining cost?

    python benchmarks/job.py                       # 8 reports, 20 tiles each
    python benchmarks/job.py --reports 16 --tiles 40 --workers 1,2,4
    python benchmarks/job.py --no-dask             # local processes only

The reports: the two rank captures of the late DDP job (tests/data/captures/ranks),
each tiled --tiles times in time by make_large.py (cached in benchmarks/data/), then
listed --reports times, alternating rank 0 and rank 1: as many reports as a job of that
many ranks (their ranks repeat, so the job numbers them in file order).

Each configuration runs in a fresh Python process (so that its memory is its own):
``gpugap.analysis.job.analyze_job`` with W local worker processes (W=1: in the process itself),
and on a dask.distributed LocalCluster of W single-threaded worker processes (started
before the clock starts: a real cluster is already up). It prints the wall time, the
speed-up against one worker measured in this run, the peak RSS of the combining process
(the one that calls analyze_job: for W=1 it analyzes every report itself, for W>1 it
only receives summaries), the size of the summaries it received, and checks that
every configuration gives the same `job` section, byte for byte. One JSON line at the
end has everything.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import make_large  # noqa: E402

RANKS = ROOT / "tests" / "data" / "captures" / "ranks"

# Run in a fresh process: one configuration, its time, peak RSS and job bytes as JSON.
CHILD = r"""
import json, pickle, resource, sys, time
import gpugap.analysis  # imports done before the clock starts (forked workers share them)
from gpugap.analysis.job import combine, summarize_all
from gpugap.jsonout import dumps
paths, workers, mode = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
scheduler, cluster = None, None
if mode == "dask":
    from distributed import LocalCluster
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    scheduler = cluster.scheduler_address
t0 = time.perf_counter()
summaries = summarize_all(paths, workers=workers, scheduler=scheduler)
t1 = time.perf_counter()
job = combine(summaries)
t2 = time.perf_counter()
if cluster is not None:
    cluster.close()
cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF,
          resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
print(json.dumps({"seconds": t2 - t0, "combine_seconds": t2 - t1, "cpu_seconds": cpu,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "summary_bytes": len(pickle.dumps(summaries)),
                  "failed": len(job.failed), "job": dumps(job.to_dict())}))
"""


def reports(count: int, tiles: int) -> list[str]:
    built = []
    for rank in (0, 1):
        source = RANKS / f"ddp-ranks-late.rank{rank}.sqlite"
        out = HERE / "data" / f"ddp-ranks-late.rank{rank}-x{tiles}.sqlite"
        if not out.exists():
            make_large.build(source, out, tiles, gap_ns=1_000_000, quiet=True)
        built.append(str(out))
    return [built[i % 2] for i in range(count)]


def run(paths: list[str], workers: int, mode: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                              ""))
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(paths), str(workers), mode],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} x{workers} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reports", type=int, default=8, help="reports in the job (default 8)")
    p.add_argument("--tiles", type=int, default=20,
                   help="copies of each rank capture in time (default 20)")
    p.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    p.add_argument("--no-dask", action="store_true", help="skip the LocalCluster runs")
    args = p.parse_args(argv)
    paths = reports(args.reports, args.tiles)
    counts = [int(w) for w in args.workers.split(",")]
    modes = ["processes"] + ([] if args.no_dask else ["dask"])
    print(f"{len(paths)} reports of {Path(paths[0]).stat().st_size / 2**20:.1f} MiB "
          f"({args.tiles} tiles of a rank capture each); {os.cpu_count()} CPUs")
    results, base, jobs = [], None, set()
    print(f"load average before: {os.getloadavg()[0]:.1f} (other work on the machine "
          "takes CPUs from the workers)")
    print(f"{'engine':<10} {'workers':>7} {'seconds':>8} {'speed-up':>8} {'CPU s':>7} "
          f"{'peak RSS MiB':>12} {'summaries KiB':>13} {'combine ms':>10}")
    for mode in modes:
        for w in counts:
            r = run(paths, w, mode)
            base = base or r["seconds"]
            r |= {"engine": mode, "workers": w, "speedup": base / r["seconds"]}
            jobs.add(r.pop("job"))
            results.append(r)
            print(f"{mode:<10} {w:>7} {r['seconds']:>8.2f} {r['speedup']:>7.2f}x "
                  f"{r['cpu_seconds']:>7.1f} {r['peak_rss_mb']:>12.0f} "
                  f"{r['summary_bytes'] / 1024:>13.1f} "
                  f"{1000 * r['combine_seconds']:>10.1f}")
    same = len(jobs) == 1
    print(f"job section identical in every configuration: {'yes' if same else 'NO'}")
    print(json.dumps({"reports": len(paths), "tiles": args.tiles, "cpus": os.cpu_count(),
                      "results": results, "identical_job": same}))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
