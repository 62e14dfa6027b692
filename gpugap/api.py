"""gpugap as a library: the functions behind ``import gpugap``.

    import gpugap
    analysis = gpugap.analyze("tests/data/captures/train-workers0.sqlite")
    analysis.frames()["accounting"]       # where every nanosecond went, per phase

Errors are :class:`gpugap.errors.GpugapError` subclasses whose text names Python
arguments (``force=True``), never command-line flags; bad argument types raise TypeError.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpugap.analysis import Analysis
from gpugap.analysis import analyze as analyze_trace
from gpugap.analysis.grouping import Grouping
from gpugap.analysis.job import Job, Jobs, analyze_job, expand_reports, require_one_job
from gpugap.analysis.job import analyze_jobs as analyze_grouped
from gpugap.analysis.job import group_reports as group_paths
from gpugap.errors import UsageError
from gpugap.render.notebook import analysis_html, job_html, jobs_html
from gpugap.report import load as load_report
from gpugap.report.trace import Trace
from gpugap.rules import thresholds as rule_thresholds

if TYPE_CHECKING:
    from distributed import Client

PathLike = str | os.PathLike[str]
# Rule thresholds: {"RULE.NAME": VALUE}, as the command line's --set, or nested by rule.
Thresholds = Mapping[str, "Mapping[str, float] | float"]


def load(report: PathLike, *, nsys: str | None = None, cache: PathLike | None = None
         ) -> Trace:
    """Load an nsys report (``.nsys-rep``, exported once with nsys into a private cache,
    or its ``.sqlite`` export, read in place) into a :class:`~gpugap.report.trace.Trace`:
    kernels, memcpys, memsets, graphs, api (CUDA API calls), syncs, nvtx, streams,
    devices, threads as pandas DataFrames, and ``info`` (which nsys wrote it, what was
    missing or repaired). *nsys*: the nsys executable for a .nsys-rep (default:
    $GPUGAP_NSYS, PATH, the usual install directories); *cache*: where exports go
    (default: $GPUGAP_CACHE_DIR, else ~/.cache/gpugap/exports)."""
    _require_path(report, "report")
    return load_report(report, nsys=nsys, cache=None if cache is None else Path(cache))


def analyze(report: PathLike | Trace, *, iteration: str | None = None,
            range: str | None = None, rules: Iterable[str] | None = None,
            thresholds: Thresholds | None = None,
            all_domains: bool = False, nsys: str | None = None,
            require_gpu: bool = True, processes: int | None = None) -> Analysis:
    """Analyze a report (a path, or a Trace from :func:`load`): the verdict, each device's
    phases and time accounting, metrics, the range table and every finding.

    *iteration*: the NVTX range that marks one iteration ('step' matches 'step 12';
    'none': no iterations; default: found from the ranges or the repeating kernels).
    *range*: judge only this NVTX range ('name' or 'domain:name'). *rules*: rule ids to
    run (default: all; see gpugap.rules.registry()). *thresholds*: rule thresholds
    as the command line's --set names them, ``{"launch-gap.min_gap_us": 50}`` (or
    nested: ``{"launch-gap": {"min_gap_us": 50}}``), each checked against the rule's own.
    *all_domains*: list library NVTX ranges (CUB, NCCL...) in the range table.
    *require_gpu*: raise NoCudaActivity for a report without GPU work (else an Analysis
    whose ``status`` is 'no-cuda-activity'). *processes*: at most this many processes
    work on it (1: this one alone; default: every core for a report of 50,000 GPU
    operations or more, through forked processes where the system has ``fork``)."""
    limits = checked(thresholds)                 # a wrong name fails before the work
    trace = report if isinstance(report, Trace) else load(report, nsys=nsys)
    result = analyze_trace(trace, rules=_rules(rules), thresholds=limits,
                           range_name=range, iteration=iteration, all_domains=all_domains,
                           require_gpu=require_gpu, processes=processes)
    # In Jupyter it draws itself, timeline included: the view keeps the trace.
    result.html_view = partial(analysis_html, trace=trace)
    return result


def analyze_many(reports: PathLike | Iterable[PathLike], *, workers: int | None = None,
                 scheduler: str | Client | None = None, iteration: str | None = None,
                 rules: Iterable[str] | None = None,
                 thresholds: Thresholds | None = None,
                 nsys: str | None = None) -> Job:
    """The reports of one distributed job (one per rank; a directory or a glob pattern
    is expanded), each analyzed as :func:`analyze` does, in *workers* processes (default:
    one per CPU) or on a Dask cluster (*scheduler*: its address or a
    ``distributed.Client``), then lined up: ranks, the straggler, how long the others
    wait for it (``Job.frame()``: one row per rank). A report that cannot be analyzed is
    listed in ``Job.failed`` with its reason. Reports that are not one job by what they
    record raise UsageError: :func:`analyze_jobs` groups them."""
    items = [reports] if isinstance(reports, (str, os.PathLike)) else list(reports)
    for item in items:
        _require_path(item, "reports")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise UsageError(f"workers must be a positive integer, not {workers!r}")
    require_one_job(expand_reports(items), nsys=nsys)
    job = analyze_job(items, workers=workers, scheduler=scheduler, nsys=nsys,
                      rules=_rules(rules), thresholds=checked(thresholds),
                      iteration=iteration)
    job.html_view = job_html                 # in Jupyter it draws itself
    return job


def checked(thresholds: Thresholds | None) -> dict[str, dict[str, float]] | None:
    """*thresholds* with every value checked (a known rule and threshold, a number in
    range: gpugap.rules.thresholds.check), as plain floats, nested by rule. Each is
    spelled as the command line's ``--set`` spells it (``{"launch-gap.min_gap_us": 50}``)
    or nested (``{"launch-gap": {"min_gap_us": 50}}``); a wrong name or value raises
    UsageError (a ValueError) with the command line's one-line message."""
    if thresholds is None:
        return None
    return rule_thresholds.from_mapping(thresholds)


def _rules(rules: Iterable[str] | None) -> list[str] | None:
    if rules is None:
        return None
    if isinstance(rules, str):
        return [rules]
    return list(rules)


def _require_path(value: object, name: str) -> None:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), not "
                        f"{type(value).__name__}")


def group_reports(reports: PathLike | Iterable[PathLike], *, nsys: str | None = None
                  ) -> Grouping:
    """Which of *reports* (files, directories, glob patterns) are ranks of one job, read
    from each report's metadata only (no analysis): ``Grouping.jobs`` (each with its
    ``name``, ``members``, ``ranks`` and ``how`` it was formed) and ``Grouping.alone``.
    See gpugap.analysis.grouping for the rule."""
    items = [reports] if isinstance(reports, (str, os.PathLike)) else list(reports)
    for item in items:
        _require_path(item, "reports")
    return group_paths(items, nsys=nsys)


def analyze_jobs(reports: PathLike | Iterable[PathLike], *, workers: int | None = None,
                 scheduler: str | Client | None = None, iteration: str | None = None,
                 rules: Iterable[str] | None = None,
                 thresholds: Mapping[str, Any] | None = None,
                 nsys: str | None = None) -> Jobs:
    """Several reports (a directory or a glob pattern is expanded), each analyzed as
    :func:`analyze` does (*workers*, *scheduler* as for :func:`analyze_many`), grouped
    into jobs by what each records (:func:`group_reports`), each job lined up as
    :func:`analyze_many` does. ``Jobs.verdicts()``: one row per report (its job, rank
    and verdict); ``Jobs.jobs``: (how the job was formed, the Job) pairs;
    ``Jobs.alone``: the reports that form no job with others."""
    items = [reports] if isinstance(reports, (str, os.PathLike)) else list(reports)
    for item in items:
        _require_path(item, "reports")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise UsageError(f"workers must be a positive integer, not {workers!r}")
    jobs = analyze_grouped(items, workers=workers, scheduler=scheduler, nsys=nsys,
                           rules=_rules(rules), thresholds=checked(thresholds),
                           iteration=iteration)
    # In Jupyter they draw themselves, and so does each job taken from them.
    jobs.html_view = jobs_html
    for group_, job in jobs.jobs:
        job.html_view = partial(job_html, group=group_)
    return jobs
