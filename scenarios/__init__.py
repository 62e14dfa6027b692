"""The canned scenario suite: one module per classic GPU-timeline puzzle.

The folder is scenarios/ at the top of the repository; it installs as gpugap.scenarios
(pyproject.toml's package-dir), so run one with ``python -m gpugap.scenarios.<module>``
or, from a checkout with gpugap installed, ``python scenarios/<module>.py``.

Importing this package (and listing or checking scenarios) needs neither a GPU nor torch
nor cuda-python; only running one does.
"""

from __future__ import annotations

import importlib

from gpugap.scenarios._base import MEASURED_RANGE, NVTX_DOMAIN, Bound, Expect, Scenario, Variant

MODULES = (
    "h2d_copy",
    "default_stream",
    "grid_sweep",
    "cublas_warmup",
    "moe_experts",
    "prefetch_pipeline",
)


def all_scenarios() -> list[Scenario]:
    return [importlib.import_module(f"{__name__}.{m}").SCENARIO for m in MODULES]


def get(name: str) -> Scenario:
    """A scenario by name (``h2d-copy``) or module (``h2d_copy``)."""
    for sc in all_scenarios():
        if name in (sc.name, sc.module):
            return sc
    raise KeyError(name)


__all__ = ["MEASURED_RANGE", "NVTX_DOMAIN", "Bound", "Expect", "Scenario", "Variant",
           "MODULES", "all_scenarios", "get"]
