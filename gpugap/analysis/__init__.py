"""From a loaded report to everything gpugap says about it: the analysis of one report
(core: the accounting, the rules' findings settled in it, metrics and the range table),
the verdict (the one thing to say first), the analysis as DataFrames (frames), and the
reports of a distributed job lined up (job)."""

from gpugap.analysis.core import Analysis, Analyzer, RangeMetrics, analyze, no_cuda_reason

__all__ = ["Analysis", "Analyzer", "RangeMetrics", "analyze", "no_cuda_reason"]
