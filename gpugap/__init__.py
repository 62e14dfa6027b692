"""gpugap: find the holes in a GPU timeline, say why they are there, and how to fix them.

The front door (docs/api.md)::

    import gpugap
    trace = gpugap.load("report.nsys-rep")        # the report's events as DataFrames
    analysis = gpugap.analyze(trace)              # verdict, accounting, findings
    analysis.frames().findings                    # ... as tidy DataFrames
    job = gpugap.analyze_many("ranks/")           # the reports of one distributed job
    jobs = gpugap.analyze_jobs("captures/")       # reports grouped into jobs

Names are imported on first use, so that ``import gpugap`` (and the command line's
start) does not pay for pandas until it is needed.
"""

from typing import Any

__version__ = "0.1.0"

# name -> the module that defines it (PEP 562 lazy attributes)
_EXPORTS = {
    "load": "gpugap.api", "analyze": "gpugap.api", "analyze_many": "gpugap.api",
    "analyze_jobs": "gpugap.api", "group_reports": "gpugap.api",
    "Jobs": "gpugap.analysis.job", "Grouping": "gpugap.analysis.grouping",
    "Trace": "gpugap.report.trace", "ReportInfo": "gpugap.report.trace",
    "Analysis": "gpugap.analysis", "Frames": "gpugap.analysis.frames",
    "Finding": "gpugap.rules.base",
    "Verdict": "gpugap.analysis.verdict", "Job": "gpugap.analysis.job",
    "GpugapError": "gpugap.errors", "ReportError": "gpugap.errors",
    "UsageError": "gpugap.errors", "NsysError": "gpugap.errors",
    "NoCudaActivity": "gpugap.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:     # Any: the names are functions and classes
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpugap' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value            # once: later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
