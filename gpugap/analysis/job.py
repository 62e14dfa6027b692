"""A distributed job as one: one report per rank, analyzed as ``gpugap analyze`` does,
reduced to a compact summary each, then combined into the job's verdict.

::

    from gpugap.analysis.job import analyze_job

    job = analyze_job(["rank0.sqlite", "rank1.sqlite"])          # local worker processes
    job = analyze_job(paths, scheduler="tcp://scheduler:8786")   # a Dask cluster
    job.headline      # 'Rank 1 is the straggler: rank 0 waits 30.1 ms per iteration ...'
    job.to_dict()     # the `job` section of `gpugap analyze R1 R2 --json`

The data path stays one way. Each report: loaded, accounted, judged (its own verdict),
then :func:`summarize` keeps what the job needs (:class:`RankSummary`: iteration times,
busy share, communication per iteration, the top cause, and the start/end of each steady
communication kernel, a few arrays of int64): workers ship these, never frames, so the
combining process stays small. :func:`combine` then lines the ranks up.

Jobs
    Several reports are not one job because they were passed together:
    :func:`analyze_jobs` (what ``gpugap analyze R1 R2 ...`` runs) groups them by what
    each records (gpugap.analysis.grouping: rank, world size, launch id, program,
    overlapping sessions) and combines each job; :func:`analyze_job` and
    :func:`combine` take what they are given as one job.

Ranks
    Those the grouping read; given to :func:`combine` alone, from the launcher variables
    nsys recorded with the report (RANK under torchrun, SLURM_PROCID under srun,
    OMPI_COMM_WORLD_RANK, PMI_RANK, ...) when every report has one and they differ;
    else the order of the files (stated in ``rank_source``).

Clocks
    A report's timestamps count from its session's start; adding the session start
    (UTC ns, TARGET_INFO_SESSION_START_TIME) puts every report on one clock. Reports of
    one host share that clock exactly. Hosts' clocks differ (NTP keeps them within
    about a millisecond, too coarse for collectives of a few ms), so when the reports
    come from several hosts, each rank is shifted by the median difference between its
    collectives' end times and the first rank's: an all-reduce (most collectives of a
    training step) ends on every rank together, once the last one has brought its data;
    the median ignores those that do not (a broadcast's root may leave early)
    (``clock``, ``offsets_ns``).

Waiting for a peer
    Collectives are matched across ranks by their iteration (its NVTX label, or number)
    and their order inside it: the k-th communication kernel of iteration "step 12" on
    every rank is one collective. For each, every rank waits from its own start until
    the last rank's start; a rank's wait per iteration is the median over the steady
    iterations all ranks share of its summed waits. A wait longer than the rank's own
    iteration means the clocks (or the collectives matched) do not line up: the job
    then says so in ``clock`` and tells no wait. The straggler is the rank that
    waits least when the others wait at least ``straggler_pct`` of an iteration for it;
    without collectives to match, the rank with the slowest iterations when the spread
    reaches that share (the skew: the slowest minus the fastest median iteration, as a
    share of the slowest: never above 100%).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from gpugap import forkjoin
from gpugap import intervals as tl
from gpugap.accounting import metrics
from gpugap.accounting.buckets import BUSY_IDS, CODE
from gpugap.analysis import Analysis, analyze
from gpugap.analysis.grouping import (
    RANK_VARIABLES,
    Grouping,
    JobGroup,
    ReportIdentity,
    group,
    read_identity,
)
from gpugap.analysis.scheduler import DEFAULT_TIMEOUT_S, check_address, check_comm, probe
from gpugap.errors import GpugapError, UsageError, option
from gpugap.files import expand_reports, natural_order
from gpugap.jsonout import Record, Shown
from gpugap.report import Trace, load
from gpugap.text import one_line
from gpugap.units import fmt_ns

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

# The others must wait at least this share of an iteration for a rank to name it the
# straggler (the verdict's own 5%: gpugap.rules.base.WARN_PCT).
STRAGGLER_PCT = 5.0


# ---------------------------------------------------------------------------------------
# One report


@dataclass
class RankSummary(Record):
    """What the job needs of one report: small, plain, picklable (worker -> combiner).

    Times are ns; ``*_per_iteration`` are medians over the steady iterations of the
    report's device (the one that ran communication, else the first active one).
    ``collective_start``/``collective_end``: the steady state's communication kernels in
    start order, on the report's clock (add ``session_start_utc_ns`` for UTC);
    ``collective_iteration``: the iteration of each (index into ``iteration_labels``);
    :attr:`collective_keys` names them 'ITERATION#k' (the k-th in that iteration).
    """

    report: str
    index: int                             # position in the list given
    status: str = "ok"                     # ok | no-cuda-activity | error
    error: str | None = None
    launcher_env: dict[str, str] = field(default_factory=dict)
    host: str | None = None
    nsys_version: str | None = None
    gpu: str | None = None
    device: int | None = None
    session_start_utc_ns: int | None = None
    iterations: int = 0
    iteration_median_ns: int | None = None
    iteration_p90_ns: int | None = None
    busy_pct: float | None = None
    comm_ns_per_iteration: int | None = None
    exposed_comm_ns_per_iteration: int | None = None
    comm_overlap_pct: float | None = None
    verdict: dict[str, Any] | None = None   # kind, rule, cause, headline, share_pct
    iteration_labels: list[str] = field(default_factory=list)
    collective_iteration: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    collective_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    collective_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # Where its steady state starts on its report's clock (GPU time), and what held it
    # back (gpugap.accounting.phases.align), for the job's phases (settle_start).
    warm_ns: int | None = None
    held_by: dict[str, Any] | None = None
    # The GPU it ran on (its UUID) and the end of its steady state: two ranks on one GPU
    # at the same time share it (:func:`combine`).
    gpu_uuid: str | None = None
    steady_end_ns: int | None = None
    analysis: dict[str, Any] | None = field(default=None, repr=False)  # to_dict, if asked
    # What the report records of its job (gpugap.analysis.grouping), for grouping.
    identity: ReportIdentity | None = field(default=None, repr=False)
    # The error was the options' (a UsageError: --iteration naming no range of the
    # report), not the report's: its message, options spelled by whoever shows it.
    usage_error: str | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def collective_keys(self) -> list[str]:
        """'step 12#3': the 4th communication kernel of iteration 'step 12'."""
        it = self.collective_iteration
        if not it.size:
            return []
        first = np.r_[0, np.flatnonzero(np.diff(it)) + 1]
        ordinal = np.arange(it.size) - np.repeat(first, np.diff(np.r_[first, it.size]))
        labels = self.iteration_labels
        return [f"{labels[i]}#{k}" for i, k in zip(it.tolist(), ordinal.tolist(),
                                                   strict=True)]

    def to_dict(self) -> dict[str, Any]:
        """The summary's public fields, arrays as lists."""
        return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in self.items()}

    def launcher_rank(self) -> tuple[int, str] | None:
        for name in RANK_VARIABLES:
            if name in self.launcher_env:
                return int(self.launcher_env[name]), name
        return None


def _median(values: np.ndarray) -> int | None:
    return int(np.median(values)) if values.size else None


def summarize(analysis: Analysis, trace: Trace, *, index: int = 0,
              details: bool = False) -> RankSummary:
    """The :class:`RankSummary` of an analysed report (gpugap.analysis.Analysis)."""
    info = trace.info
    out = RankSummary(report=analysis.report, index=index, status=analysis.status,
                      error=analysis.error, launcher_env=dict(info.launcher_env),
                      host=info.host, nsys_version=analysis.nsys_version,
                      gpu=analysis.gpu.get("name"),
                      session_start_utc_ns=info.session_start_utc_ns,
                      analysis=analysis.to_dict() if details else None)
    accounting = analysis.accounting
    if accounting is None or not accounting.devices:
        return out
    comm = CODE["communication"]
    with_comm = [d for d, dev in accounting.devices.items() if dev.work.positions(comm).size]
    device = with_comm[0] if with_comm else next(iter(accounting.devices))
    dev = accounting.devices[device]
    out.device = int(device)
    out.warm_ns, out.steady_end_ns = analysis.scope.steady_span(device)
    out.held_by = dev.phases.held_by
    row = trace.device_row(int(device))
    out.gpu_uuid = None if row is None or not row.get("uuid") else str(row["uuid"])
    verdict = next((d["verdict"] for d in analysis.devices if d["device"] == device), None)
    if verdict is not None:
        out.verdict = {k: verdict.get(k) for k in ("kind", "rule", "cause", "headline",
                                                   "share_pct")}
    windows = analysis.judged(device)
    wall = tl.total(windows)
    if wall <= 0:
        return out
    totals = dev.totals_in(windows)
    out.busy_pct = round(100.0 * sum(totals[b] for b in BUSY_IDS) / wall, 3)
    steady = dev.phases.steady_iterations
    lo, hi = dev.phases.iteration_windows(steady)
    n = max(lo.size, 1)
    m = metrics.compute(trace, windows, devices=[int(device)])
    if lo.size:
        out.iterations = int(lo.size)
        out.iteration_median_ns = _median(hi - lo)
        out.iteration_p90_ns = int(np.percentile(hi - lo, 90))
    out.comm_ns_per_iteration = int(m.comm_time_ns / n)
    out.exposed_comm_ns_per_iteration = int(totals.get("communication", 0) / n)
    out.comm_overlap_pct = m.comm_compute_overlap_pct
    # The steady communication kernels, keyed by iteration and order within it.
    start, end = dev.work.take(dev.work.positions(comm))[:2]
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    iterations = dev.phases.iterations
    if lo.size and iterations is not None:         # (there are windows: iterations found)
        k = np.searchsorted(lo, start, side="right") - 1
        inside = (k >= 0) & (start < hi[np.maximum(k, 0)])
        start, end, k = start[inside], end[inside], k[inside]
        labels = iterations.labels
        out.iteration_labels = [labels[i] if labels else f"#{i}" for i in steady]
        out.collective_iteration = k.astype(np.int32)
    else:
        span = analysis.scope.steady_span(device)
        inside = (start >= span[0]) & (start < span[1])
        start, end = start[inside], end[inside]
        out.iteration_labels = [""]
        out.collective_iteration = np.zeros(start.size, dtype=np.int32)
    out.collective_start = start.astype(np.int64)
    out.collective_end = end.astype(np.int64)
    return out


def summarize_report(path: str | os.PathLike[str], index: int = 0, *,
                     nsys: str | None = None, rules: list[str] | None = None,
                     thresholds: dict | None = None, iteration: str | None = None,
                     details: bool = False, processes: int | None = 1,
                     not_before: tuple[int, str] | None = None) -> RankSummary:
    """Load and analyse one report (as ``gpugap analyze`` does) into its summary. Never
    raises for a bad report: its summary has status 'error' and the one-line reason.
    Runs in the worker (a process of the pool, or a Dask worker that reads the file),
    in that process alone (*processes*: the reports of a job share the cores; see
    gpugap.analysis.core.analyze). *not_before*: no steady state before that time of
    the report's clock, another rank still warming up then (:func:`settle_start`)."""
    try:
        trace = load(path, nsys=nsys)
        analysis = analyze(trace, rules=rules, thresholds=thresholds, iteration=iteration,
                           require_gpu=False, processes=processes, not_before=not_before)
        out = summarize(analysis, trace, index=index, details=details)
        out.identity = read_identity(trace.info.sqlite_path, shown=str(path))
        return out
    except (GpugapError, OSError) as exc:
        message = str(exc)
        usage = exc.args[0] if isinstance(exc, UsageError) and exc.args else None
    except Exception as exc:           # a bug: still one line, the job goes on
        message = f"internal error ({type(exc).__name__}): {exc}"
        usage = None
    first = message.splitlines()[0] if message else "unreadable"
    # Its metadata may still say which job it belongs to (the job then lists it as a
    # report that could not be analyzed).
    return RankSummary(report=str(path), index=index, status="error", error=first,
                       identity=read_identity(path, nsys=nsys), usage_error=usage)


# ---------------------------------------------------------------------------------------
# Fan-out


Progress = Callable[[RankSummary], None]


def summarize_all(paths: Sequence[str | os.PathLike[str]], *, workers: int | None = None,
                  scheduler: str | Client | None = None, progress: Progress | None = None,
                  scheduler_timeout: float = DEFAULT_TIMEOUT_S,
                  **options: Any) -> list[RankSummary]:
    """:func:`summarize_report` of every path, in file order: in this process
    (``workers=1``), in a pool of worker processes (default: one per CPU, at most one per
    report), or on a Dask cluster (*scheduler*: its address, or a
    ``distributed.Client``; each worker reads its own report, so the paths must be
    readable there; an address must answer as a Dask scheduler within
    *scheduler_timeout* seconds, gpugap.analysis.scheduler). *progress* is called with
    each summary as it arrives."""
    files = [str(p) for p in paths]
    done: list[RankSummary] = []

    def arrived(summary: RankSummary) -> None:
        done.append(summary)
        if progress is not None:
            progress(summary)

    if scheduler is not None:
        _on_dask(files, scheduler, arrived, options, scheduler_timeout)
    else:
        n = min(workers or os.cpu_count() or 1, len(files))
        if n <= 1:              # the reports one after another, each on every core
            for i, p in enumerate(files):
                arrived(summarize_report(p, i, **{"processes": None, **options}))
        else:
            from concurrent.futures import as_completed

            with forkjoin.worker_pool(n, preload=[__name__]) as pool:
                futures = [pool.submit(summarize_report, p, i, **options)
                           for i, p in enumerate(files)]
                for future in as_completed(futures):
                    arrived(future.result())
    return sorted(done, key=lambda s: s.index)


def _on_dask(paths: list[str], scheduler: str | Client, arrived: Progress,
             options: dict[str, Any], timeout: float) -> None:
    if isinstance(scheduler, str):
        check_address(scheduler)
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise UsageError(f"{option('scheduler')} needs dask.distributed: pip install "
                         "'gpugap[dist]'") from None
    own = not isinstance(scheduler, Client)
    if isinstance(scheduler, str):          # own: an address, not a client given
        probe(scheduler, timeout)
        check_comm(scheduler)
    try:
        client = (scheduler if isinstance(scheduler, Client)
                  else Client(scheduler, timeout=f"{timeout}s"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot reach the Dask scheduler at {scheduler}: {one_line(exc)}"
                         ) from None
    try:
        futures = [client.submit(summarize_report, p, i, pure=False, **options)
                   for i, p in enumerate(paths)]
        for future in as_completed(futures):
            arrived(future.result())
    finally:
        if own:
            client.close()


# ---------------------------------------------------------------------------------------
# The job


@dataclass(repr=False)
class Job(Shown, Record):
    """Every rank's summary lined up: ranks, clocks, waits, the straggler, the verdict."""

    ranks: list[RankSummary]               # analyzed reports, by rank
    failed: list[RankSummary]              # reports that could not be analyzed
    rank_source: str
    clock: str
    offsets_ns: dict[int, int]
    headline: str
    kind: str                              # straggler | balanced | single | no-ranks
    straggler: int | None
    wait_ns_per_iteration: dict[int, int | None]
    collectives_matched: int
    iterations_matched: int
    metrics: dict[str, float | int | None]

    rank_numbers: dict[int, int] = field(default_factory=dict)   # index -> rank
    # rank -> who it waited for at start-up: its steady state began once that rank was
    # warm (the job's phases), its waits before then counted as start-up.
    held: dict[int, str] = field(default_factory=dict)
    # GPU UUID -> the ranks whose steady states ran on it at the same time (a shared GPU).
    shared_gpus: dict[str, list[int]] = field(default_factory=dict)
    # rank -> its summed waits in each matched iteration (ns, in ``iterations`` order)
    waits_by_iteration: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    iterations: list[str] = field(default_factory=list, repr=False)
    # What Jupyter shows (gpugap.render.notebook.job_html), set by gpugap.analyze_many
    # and analyze_jobs: the analysis layer draws nothing itself.
    html_view: Callable[[Job], str] | None = field(default=None, repr=False,
                                                   compare=False)

    def summary(self, ranks_shown: int = 8) -> str:
        """A few lines: the job's verdict, then one per rank (its median iteration,
        busy share and waits), the reports that could not be analyzed counted."""
        lines = [f"Job of {len(self.ranks)} rank{'s' if len(self.ranks) != 1 else ''} "
                 f"({self.kind}): {one_line(self.headline, None)}"]
        for row in self.table()[:ranks_shown]:
            mark = " (straggler)" if row["rank"] == self.straggler else ""
            wait = row["wait_ms_per_iteration"]
            lines.append(
                f"  rank {row['rank']}{mark}: {one_line(os.path.basename(row['report']))}"
                f", {_fmt_ms(row['iteration_median_ms'])} per iteration, busy "
                + ("-" if row["gpu_busy_pct"] is None else f"{row['gpu_busy_pct']:.1f}%")
                + (f", waits {wait:.2f} ms per iteration" if wait is not None else ""))
        if len(self.ranks) > ranks_shown:
            lines.append(f"  ... and {len(self.ranks) - ranks_shown} more ranks "
                         "(Job.frame() lists all)")
        if self.failed:
            lines.append(f"  {len(self.failed)} report(s) not analyzed (Job.failed)")
        return "\n".join(textwrap.fill(line, 80, subsequent_indent="    ")
                         for line in lines)


    @property
    def straggler_summary(self) -> RankSummary | None:
        return next((s for s in self.ranks if self.rank_numbers[s.index] == self.straggler),
                    None)

    def table(self) -> list[dict[str, Any]]:
        """One row per analyzed rank (what the terminal shows, JSON-ready)."""
        rows = []
        for s in self.ranks:
            rank = self.rank_numbers[s.index]
            rows.append({
                "rank": rank, "report": s.report, "host": s.host, "gpu": s.gpu,
                "device": s.device, "nsys_version": s.nsys_version, "status": s.status,
                "iterations": s.iterations,
                "iteration_median_ms": _ms(s.iteration_median_ns),
                "iteration_p90_ms": _ms(s.iteration_p90_ns),
                "gpu_busy_pct": _round(s.busy_pct),
                "comm_ms_per_iteration": _ms(s.comm_ns_per_iteration),
                "exposed_comm_ms_per_iteration": _ms(s.exposed_comm_ns_per_iteration),
                "comm_compute_overlap_pct": _round(s.comm_overlap_pct),
                "wait_ms_per_iteration": _ms(self.wait_ns_per_iteration.get(rank)),
                "clock_offset_ns": self.offsets_ns.get(rank),
                "collectives": int(s.collective_start.size),
                "top_cause": None if s.verdict is None else {
                    "kind": s.verdict["kind"], "rule": s.verdict["rule"],
                    "cause": s.verdict["cause"], "headline": s.verdict["headline"]}})
        return rows

    def frame(self) -> pd.DataFrame:
        """:meth:`table` as a DataFrame: one row per analyzed rank, its top cause in
        ``top_kind``, ``top_rule``, ``top_cause`` and ``top_headline``."""
        rows = []
        for row in self.table():
            top = row.pop("top_cause") or {}
            rows.append(row | {f"top_{k}": top.get(k)
                               for k in ("kind", "rule", "cause", "headline")})
        import pandas as pd  # the users' DataFrame: an analysis never imports it

        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """The `job` section: deterministic (ranks in order, floats rounded), so it is the
        same bytes whichever way the reports were analyzed."""
        return {"verdict": {"kind": self.kind, "headline": self.headline,
                            "straggler": self.straggler},
                "rank_source": self.rank_source, "clock": self.clock,
                "collectives_matched": self.collectives_matched,
                "iterations_matched": self.iterations_matched,
                "metrics": self.metrics, "ranks": self.table(),
                "held_at_start_up": {str(r): who for r, who in sorted(self.held.items())},
                "shared_gpus": self.shared_gpus,
                "failed": [{"report": s.report, "index": s.index, "error": s.error}
                           for s in self.failed]}


def _fmt_ms(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.2f} ms"


@overload
def _ms(ns: int) -> float: ...
@overload
def _ms(ns: None) -> None: ...
def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


@overload
def _round(value: float) -> float: ...
@overload
def _round(value: None) -> None: ...
def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def _ranks(ok: list[RankSummary]) -> tuple[dict[int, int], str]:
    found = [s.launcher_rank() for s in ok]
    known = [f for f in found if f is not None]
    if ok and len(known) == len(found):
        numbers = [f[0] for f in known]
        names = sorted({f[1] for f in known})
        if len(set(numbers)) == len(numbers):
            return ({s.index: f[0] for s, f in zip(ok, known, strict=True)},
                    f"{'/'.join(names)} recorded in each report's environment")
    return {s.index: i for i, s in enumerate(ok)}, "file order (the reports record no rank)"


def _clock(ok: list[RankSummary], align: str) -> tuple[dict[int, int], str]:
    """Per rank, what to add to its report's times to put it on the job's clock."""
    base = {s.index: s.session_start_utc_ns or 0 for s in ok}
    hosts = {s.host for s in ok}
    if any(s.session_start_utc_ns is None for s in ok):
        how = "each report's own clock (a report records no session start)"
    else:
        how = "session start times" + (" of one host" if len(hosts) == 1 else "")
    if align == "none" or (align == "auto" and len(hosts) <= 1):
        return base, how
    keys = {s.index: s.collective_keys for s in ok}
    common = sorted(set.intersection(*(set(k) for k in keys.values())) if ok else [])
    if not common:
        return base, how + "; not aligned (no collective common to every rank)"
    ends = {}
    for s in ok:
        where = {k: i for i, k in enumerate(keys[s.index])}
        ends[s.index] = s.collective_end[[where[k] for k in common]] + base[s.index]
    reference = ends[ok[0].index]
    shifted = {i: base[i] + int(np.median(reference - e)) for i, e in ends.items()}
    return shifted, (f"aligned on the ends of {len(common)} collectives ({len(hosts)} "
                     "hosts: median difference of their end times)")


def _sharing(ok: list[RankSummary], rank: dict[int, int], offsets: dict[int, int]
             ) -> dict[str, list[int]]:
    """GPUs (by UUID, on one host) that two or more ranks used at the same time: their
    steady states overlap on the job's clock."""
    by_gpu: dict[tuple[str | None, str], list[tuple[int, int, int]]] = {}
    for s in ok:
        if s.gpu_uuid and s.warm_ns is not None and s.steady_end_ns is not None:
            by_gpu.setdefault((s.host, s.gpu_uuid), []).append(
                (rank[s.index], s.warm_ns + offsets[s.index],
                 s.steady_end_ns + offsets[s.index]))
    return {uuid: sorted(r for r, _, _ in spans) for (_, uuid), spans in by_gpu.items()
            if len(spans) > 1 and max(lo for _, lo, _ in spans) < min(hi for _, _, hi in spans)}


def combine(summaries: Sequence[RankSummary], *, align: str = "auto",
            straggler_pct: float = STRAGGLER_PCT, ranks: dict[int, int] | None = None,
            rank_source: str | None = None) -> Job:
    """The job from its reports' summaries (any order), taken as one job as given.
    *align*: 'auto' (line hosts' clocks up on the first collective when the reports come
    from several hosts), 'collective' (always), 'none' (session start times only).
    *ranks*: each summary's rank by its ``index`` (with *rank_source*, what says so:
    gpugap.analysis.grouping); default: the launcher's variables, else file order."""
    if align not in ("auto", "collective", "none"):
        raise UsageError(f"bad clock alignment '{align}'; use auto, collective or none")
    ok = [s for s in summaries if s.status == "ok" and s.device is not None]
    failed = sorted((s for s in summaries if s not in ok), key=lambda s: s.index)
    if ranks is not None:
        rank, source = {s.index: ranks[s.index] for s in ok}, rank_source or "given"
    else:
        rank, source = _ranks(sorted(ok, key=lambda s: s.index))
    ok.sort(key=lambda s: rank[s.index])
    offsets, clock = _clock(ok, align)
    # Collectives common to every rank, on the job's clock.
    keys = {s.index: s.collective_keys for s in ok}
    common = sorted(set.intersection(*(set(k) for k in keys.values())),
                    key=natural_order) if len(ok) > 1 else []
    starts = np.zeros((len(ok), len(common)), dtype=np.int64)
    for r, s in enumerate(ok):
        where = {k: i for i, k in enumerate(keys[s.index])}
        idx = np.array([where[k] for k in common], dtype=np.int64)
        starts[r] = s.collective_start[idx] + offsets[s.index] if idx.size else starts[r]
    waits = starts.max(axis=0, keepdims=True) - starts if common else starts
    iteration_of = np.array([k.rpartition("#")[0] for k in common], dtype=object)
    iterations = list(dict.fromkeys(iteration_of.tolist()))
    wait_per_it: dict[int, int | None] = {}
    by_iteration: dict[int, np.ndarray] = {}
    codes = {it: i for i, it in enumerate(iterations)}
    group = np.array([codes[it] for it in iteration_of.tolist()], dtype=np.int64)
    for r, s in enumerate(ok):
        if not common:
            wait_per_it[rank[s.index]] = None
            continue
        sums = np.bincount(group, weights=waits[r], minlength=len(iterations)).astype(np.int64)
        by_iteration[rank[s.index]] = sums
        wait_per_it[rank[s.index]] = int(np.median(sums))
    medians = {rank[s.index]: s.iteration_median_ns for s in ok
               if s.iteration_median_ns is not None}
    iteration_ns = max(medians.values()) if medians else None
    # A rank waits inside its own iterations: more than a whole one per iteration means
    # the clocks (or the collectives matched) do not line up, and no wait is told.
    own_iteration = {r: medians.get(r, iteration_ns) for r in wait_per_it}
    too_long = {r: w for r, w in wait_per_it.items()
                if w is not None and (it := own_iteration[r]) is not None and w > it}
    if too_long:
        r, w = max(too_long.items(), key=lambda item: (item[1], -item[0]))
        clock += (f"; the reports' clocks cannot be aligned (rank {r} would wait "
                  f"{fmt_ns(w)} per {fmt_ns(own_iteration[r] or 0)} iteration): waits "
                  "not used")
        wait_per_it = dict.fromkeys(wait_per_it)
        by_iteration = {}
        common = []
        iterations = []
    # The ranks' waits: every rank's when collectives matched (common), else none.
    matched = {r: w for r, w in wait_per_it.items() if w is not None}
    # Skew: the share of the slowest rank's iteration the fastest rank does without
    # (0-100%: a share of the slowest iteration, never more than all of it).
    skew = (round(100.0 * (max(medians.values()) - min(medians.values()))
                  / max(max(medians.values()), 1), 3) if len(medians) > 1 else None)
    worst_wait = max((w for w in wait_per_it.values() if w is not None), default=None)
    metrics = {
        "job.ranks": len(ok), "job.failed_reports": len(failed),
        "job.iteration_ms": _ms(iteration_ns), "job.skew_pct": skew,
        "job.wait_ms_per_iteration": _ms(worst_wait),
        "job.wait_pct": (round(min(100.0, 100.0 * worst_wait / iteration_ns), 3)
                         if worst_wait is not None and iteration_ns else None),
        "job.worst_comm_compute_overlap_pct": min(
            (_round(s.comm_overlap_pct) for s in ok if s.comm_overlap_pct is not None),
            default=None),
        "job.worst_exposed_comm_ms": max(
            (_ms(s.exposed_comm_ns_per_iteration) for s in ok
             if s.exposed_comm_ns_per_iteration is not None), default=None),
        "job.worst_gpu_busy_pct": min((_round(s.busy_pct) for s in ok
                                       if s.busy_pct is not None), default=None),
    }
    # The straggler: the rank the others wait for, or the slowest when nothing matched.
    straggler = None
    share = lambda ns: min(100.0, 100.0 * ns / iteration_ns) if iteration_ns else 0.0  # noqa: E731
    if len(ok) > 1 and common:
        least = min(matched, key=lambda r: (matched[r], r))
        others = [w for r, w in matched.items() if r != least]
        # A wait is judged as a share of an iteration: without iteration times, none is.
        if iteration_ns is not None and share(float(np.median(others))) >= straggler_pct:
            straggler = least
    elif len(medians) > 1 and skew is not None and skew >= straggler_pct:
        straggler = max(medians, key=lambda r: (medians[r], -r))
    by_rank = {rank[s.index]: s for s in ok}

    def own(r: int) -> str:
        v = by_rank[r].verdict
        return "no verdict" if v is None else v["headline"]

    if not ok:
        kind, head = "no-ranks", "No report of the job could be analyzed"
    elif len(ok) == 1:
        r = rank[ok[0].index]
        kind, head = "single", f"One rank analyzed (rank {r}): {own(r)}"
    elif straggler is not None and common and iteration_ns is not None:
        waiting = {r: w for r, w in matched.items() if r != straggler}
        if len(waiting) == 1:
            (r, w), = waiting.items()
            who = f"rank {r} waits {fmt_ns(w)}"
        else:
            worst = max(waiting, key=lambda r: (waiting[r], -r))
            who = (f"the other {len(waiting)} ranks wait a median of "
                   f"{fmt_ns(int(np.median(list(waiting.values()))))} (rank {worst} the "
                   f"most, {fmt_ns(waiting[worst])})")
        kind = "straggler"
        head = (f"Rank {straggler} is the straggler: {who} per iteration inside collectives "
                f"for it ({share(max(waiting.values())):.1f}% of a {fmt_ns(iteration_ns)} "
                f"iteration); rank {straggler}'s own verdict: {own(straggler)}")
    elif straggler is not None:
        kind = "straggler"
        fastest = min(medians.values())
        head = (f"Rank {straggler} is the slowest: its iterations take "
                f"{fmt_ns(medians[straggler])}, the fastest rank's {fmt_ns(fastest)} "
                f"(a skew of {skew:.1f}% of its iteration; no collectives to match across "
                f"ranks); its own verdict: {own(straggler)}")
    else:
        worst = max(by_rank, key=lambda r: ((by_rank[r].verdict or {}).get("share_pct")
                                            or 0, -r))
        waited = (f"no rank waits more than {fmt_ns(worst_wait)} per iteration inside "
                  f"collectives ({share(worst_wait):.1f}%)" if worst_wait is not None
                  else "no collectives to match across ranks")
        spread = f"; iteration times within {skew:.1f}%" if skew is not None else ""
        kind = "balanced"
        head = (f"No straggler across {len(ok)} ranks: {waited}{spread}; the worst rank's "
                f"verdict (rank {worst}): {own(worst)}")
    # Ranks whose steady state waited for another's start-up (settle_start, or the
    # ranks of one report: gpugap.accounting.phases.align).
    held = {rank[s.index]: s.held_by["who"] or f"GPU {s.held_by['device']}"
            for s in ok if s.held_by}
    shared = _sharing(ok, rank, offsets)
    if shared:
        head = ("; ".join(f"Ranks {', '.join(map(str, ranks))} share one GPU ({uuid}): "
                          "their steady states ran at the same time on it, time-sliced"
                          for uuid, ranks in shared.items()) + ". " + head)
    return Job(ranks=ok, failed=failed, rank_source=source, clock=clock, held=held,
               shared_gpus=shared,
               offsets_ns={rank[i]: int(o - min(offsets.values()))
                           for i, o in offsets.items()},
               headline=head, kind=kind, straggler=straggler,
               wait_ns_per_iteration=wait_per_it, collectives_matched=len(common),
               iterations_matched=len(iterations), metrics=metrics, rank_numbers=rank,
               waits_by_iteration=by_iteration, iterations=iterations)


@dataclass(repr=False)
class Jobs(Shown):
    """Reports grouped into jobs by what each records (gpugap.analysis.grouping), every
    job combined, the others analyzed on their own: what ``gpugap analyze`` shows for
    several reports."""

    summaries: list[RankSummary]           # every report, in the order given
    grouping: Grouping
    jobs: list[tuple[JobGroup, Job]]
    # What Jupyter shows (gpugap.render.notebook.jobs_html), set by gpugap.analyze_jobs.
    html_view: Callable[[Jobs], str] | None = field(default=None, repr=False,
                                                    compare=False)

    def summary(self) -> str:
        """A few lines: how many reports and jobs, each job's verdict, the reports of
        no job and those that could not be analyzed counted."""
        names = ", ".join(group_.name for group_, _ in self.jobs)
        lines = [f"{len(self.summaries)} reports: {len(self.jobs)} "
                 f"job{'s' if len(self.jobs) != 1 else ''}"
                 + (f" ({names})" if names else "")
                 + (f", {len(self.grouping.alone)} of no job" if self.grouping.alone
                    else "")
                 + (f", {len(self.grouping.duplicates)} duplicate"
                    f"{'s' if len(self.grouping.duplicates) != 1 else ''}"
                    if self.grouping.duplicates else "")]
        for group_, job in self.jobs:
            lines.append(f"  job {group_.name} ({len(job.ranks)} ranks, {job.kind}): "
                         f"{one_line(job.headline, None)}")
        if self.failed:
            lines.append(f"  {len(self.failed)} report(s) not analyzed (Jobs.failed)")
        return "\n".join(textwrap.fill(line, 80, subsequent_indent="    ")
                         for line in lines)


    @property
    def alone(self) -> list[RankSummary]:
        """The reports that form no job with others (each analyzed on its own)."""
        return [self.summaries[i] for i in self.grouping.alone]

    @property
    def failed(self) -> list[RankSummary]:
        """The reports that could not be analyzed (unreadable, no CUDA activity)."""
        return [s for s in self.summaries if not s.ok]

    def job(self, name: str) -> Job:
        """The job named *name* ('A', 'B', ...)."""
        for group_, job in self.jobs:
            if group_.name == name:
                return job
        raise KeyError(name)

    def verdicts(self) -> list[dict[str, Any]]:
        """One row per report, in the order given: its job and rank (None when it forms
        no job with others), its status, its own verdict's headline, and the report it
        is a copy of (``duplicate_of``: the same capture given twice), if any."""
        rows = []
        for i, s in enumerate(self.summaries):
            group_ = self.grouping.job_of(i)
            headline = (f"not analyzed: {s.error or s.status}" if not s.ok
                        else (s.verdict or {}).get("headline") or "no verdict")
            first = self.grouping.duplicates.get(i)
            rows.append({"report": s.report, "job": None if group_ is None else group_.name,
                         "rank": None if group_ is None else group_.ranks[i],
                         "status": s.status, "kind": (s.verdict or {}).get("kind"),
                         "headline": headline,
                         "duplicate_of": None if first is None
                         else self.summaries[first].report})
        return rows

    def frame(self) -> pd.DataFrame:
        """:meth:`verdicts` as a DataFrame: one row per report, in the order given."""
        import pandas as pd  # the users' DataFrame: an analysis never imports it

        return pd.DataFrame(self.verdicts(), columns=["report", "job", "rank", "status",
                                                      "kind", "headline", "duplicate_of"])

    def to_dict(self) -> dict[str, Any]:
        """The ``verdicts`` (one row per report) and ``jobs`` (each: its name, how it was
        formed, its reports and ranks, then :meth:`Job.to_dict`) of ``gpugap analyze
        --json`` for several reports."""
        return {"verdicts": self.verdicts(),
                "jobs": [group_.to_dict(self.grouping.identities) | job.to_dict()
                         for group_, job in self.jobs],
                "alone": [self.summaries[i].report for i in self.grouping.alone],
                "duplicates": [{"report": self.summaries[d].report,
                                "of": self.summaries[o].report}
                               for d, o in self.grouping.duplicates.items()]}


def settle_start(summaries: Sequence[RankSummary], members: Sequence[Sequence[int]],
                 ranks: Sequence[dict[int, int] | None], *,
                 workers: int | None = None, scheduler: str | Client | None = None,
                 **options: Any) -> list[RankSummary]:
    """The job's phases across its reports: a rank is not steady before every other
    rank of its job is warm (gpugap.accounting.phases.align, which does the same for
    the ranks of one report). *members*: the indexes of each job's summaries; *ranks*:
    each job's rank of each index (None: file order). The reports of a rank that was
    steady before another was warm are analyzed again with that rank's warm time on
    their clock (session start times: one host; several hosts' clocks line up only on
    their collectives, later, in :func:`combine`, so they are left as they are)."""
    out = list(summaries)
    by_index = {s.index: s for s in out}
    again: dict[int, tuple[int, str]] = {}
    for job, numbers in zip(members, ranks, strict=True):
        # Each rank's report start and warm time on the job's clock (ns since the epoch).
        clock = {i: (s.session_start_utc_ns, s.warm_ns) for i in job
                 if (s := by_index.get(i)) is not None and s.status == "ok"
                 and s.session_start_utc_ns is not None and s.warm_ns is not None}
        if len(clock) < 2 or len({by_index[i].host for i in clock}) > 1:
            continue
        warm = {i: start + w for i, (start, w) in clock.items()}
        for i, (start, _) in clock.items():
            last = max((j for j in warm if j != i), key=lambda j: warm[j])
            if warm[last] > warm[i]:
                rank = (numbers or {}).get(last, sorted(warm).index(last))
                again[i] = (warm[last] - start, f"rank {rank}")
    for index, not_before in again.items():
        s = by_index[index]
        redone = summarize_all([s.report], workers=1 if scheduler is None else workers,
                               scheduler=scheduler, not_before=not_before, **options)[0]
        redone.index = index
        if redone.ok:
            out[out.index(s)] = redone
    return out


def group_summaries(summaries: Sequence[RankSummary], *, align: str = "auto",
                    straggler_pct: float = STRAGGLER_PCT) -> Jobs:
    """*summaries* (in the order given: ``index`` = position) grouped into jobs by what
    their reports record, each job combined (:func:`combine`)."""
    summaries = sorted(summaries, key=lambda s: s.index)
    identities = [s.identity or ReportIdentity(report=s.report, error=s.error or "unknown")
                  for s in summaries]
    grouping = group(identities)
    jobs = []
    for group_ in grouping.jobs:
        members = [summaries[i] for i in group_.members]
        jobs.append((group_, combine(members, align=align, straggler_pct=straggler_pct,
                                     ranks=group_.ranks, rank_source=group_.rank_source)))
    return Jobs(summaries=list(summaries), grouping=grouping, jobs=jobs)


def analyze_jobs(paths: Iterable[str | os.PathLike[str]], *, workers: int | None = None,
                 scheduler: str | Client | None = None, progress: Progress | None = None,
                 align: str = "auto", straggler_pct: float = STRAGGLER_PCT,
                 **options: Any) -> Jobs:
    """Every report analyzed (as :func:`analyze_job` does), then grouped into jobs by
    what each records (:func:`group_summaries`): reports of different programs, runs or
    times are never one job."""
    summaries = summarize_all(expand_reports(paths), workers=workers, scheduler=scheduler,
                              progress=progress, **options)
    return group_settled(summaries, workers=workers, scheduler=scheduler, align=align,
                         straggler_pct=straggler_pct, **options)


def group_settled(summaries: Sequence[RankSummary], *, workers: int | None = None,
                  scheduler: str | Client | None = None, align: str = "auto",
                  straggler_pct: float = STRAGGLER_PCT, **options: Any) -> Jobs:
    """:func:`group_summaries` once each job's phases are settled across its reports
    (:func:`settle_start`: *workers*, *scheduler* and *options* analyze again the reports
    that need it, as :func:`summarize_all` did)."""
    identities = [s.identity or ReportIdentity(report=s.report, error=s.error or "unknown")
                  for s in sorted(summaries, key=lambda s: s.index)]
    jobs = group(identities).jobs
    summaries = settle_start(summaries, [j.members for j in jobs], [j.ranks for j in jobs],
                             workers=workers, scheduler=scheduler, **options)
    return group_summaries(summaries, align=align, straggler_pct=straggler_pct)


def group_reports(reports: Iterable[str | os.PathLike[str]], *,
                  nsys: str | None = None) -> Grouping:
    """The jobs among *reports* (files, directories, glob patterns: see
    :func:`expand_reports`), from each report's metadata only (no analysis)."""
    return group([read_identity(p, nsys=nsys) for p in expand_reports(reports)])


def require_one_job(paths: Sequence[str | os.PathLike[str]], *,
                    nsys: str | None = None,
                    fix: str = "group them with gpugap.analyze_jobs, or pass the ranks "
                               "of one job") -> None:
    """Raise UsageError (ending with *fix*) unless the readable reports among *paths*
    are one job by what they record (gpugap.analysis.grouping; metadata only):
    analyzing unrelated reports as the ranks of one job gives meaningless waits and
    skews. Unreadable reports are left to the analysis, which lists them as failed."""
    identities = [read_identity(p, nsys=nsys) for p in paths]
    grouping = group(identities)
    readable = [i for i, identity in enumerate(identities) if identity.error is None]
    if len(readable) < 2:
        return
    if len(grouping.jobs) == 1 and set(grouping.jobs[0].members) == set(readable):
        return
    parts = [f"{len(grouping.jobs)} jobs" if len(grouping.jobs) != 1 else "1 job"]
    alone = [i for i in grouping.alone if identities[i].error is None]
    if alone:
        parts.append(f"{len(alone)} reports of no job")
    if grouping.duplicates:
        d, o = next(iter(grouping.duplicates.items()))
        parts.append(f"{len(grouping.duplicates)} duplicate"
                     f"{'s' if len(grouping.duplicates) != 1 else ''}: {paths[d]} is the "
                     f"same capture as {paths[o]}")
    raise UsageError(f"these {len(readable)} reports are not the ranks of one job (by what "
                     f"they record: {' and '.join(parts)}); {fix}")


def analyze_job(paths: Iterable[str | os.PathLike[str]], *, workers: int | None = None,
                scheduler: str | Client | None = None, progress: Progress | None = None,
                align: str = "auto", straggler_pct: float = STRAGGLER_PCT,
                **options: Any) -> Job:
    """Every report of a job analyzed (see :func:`summarize_all` for *workers*,
    *scheduler*, *progress*; *options* go to :func:`summarize_report`: nsys, rules,
    thresholds, iteration, details) and combined (:func:`combine`) as one job, whatever
    they record: :func:`analyze_jobs` groups them first."""
    summaries = summarize_all(expand_reports(paths), workers=workers, scheduler=scheduler,
                              progress=progress, **options)
    ok = sorted((s for s in summaries if s.ok), key=lambda s: s.index)
    summaries = settle_start(summaries, [[s.index for s in ok]], [_ranks(ok)[0]],
                             workers=workers, scheduler=scheduler, **options)
    return combine(summaries, align=align, straggler_pct=straggler_pct)


def summary_dict(summary: RankSummary) -> dict[str, Any]:
    """A summary as JSON-ready data (arrays as lists)."""
    out = asdict(summary)
    out["collective_iteration"] = summary.collective_iteration.tolist()
    out["collective_start"] = summary.collective_start.tolist()
    out["collective_end"] = summary.collective_end.tolist()
    return out
