"""NVTX ranges as the program model reads them: whose they are (the program's or a
library's) and how instances of one loop are named ('step 12' is an instance of 'step').
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from gpugap.report.table import Table
from gpugap.report.trace import Derived, Trace

if TYPE_CHECKING:
    pass

# Instances of one loop: a name ending in a number ("step 12", "iter_3").
_NUMBERED = re.compile(r"^(.*?\S)([\s_:#=/-]*)\d+$")


def base_name(name: str) -> str:
    """'step 12' -> 'step'; 'iter_3' -> 'iter'; 'ProfilerStep#5' -> 'ProfilerStep'.
    A value after '=' is a parameter, not an instance number: 'grid=1024' stays."""
    if not (name[-1:].isdecimal() or name[-2:-1].isdecimal()):   # cheap test first: a
        return name                     # number ends the name (or precedes a final newline)
    m = _NUMBERED.match(name)
    return m.group(1) if m and "=" not in m.group(2) and not m.group(1).endswith("=") \
        else name


def shown_name(base: str, numbered: bool) -> str:
    return f"{base} N" if numbered else base


# NVTX domains that libraries register for their own ranges (CUB/Thrust/libcu++ as
# "CCCL", NCCL, NVSHMEM, ...) or that nsys makes for the libraries it traces (cuBLAS,
# cuDNN...): their ranges describe the library's work, not the program's. Matched without
# regard to case.
LIBRARY_DOMAINS = frozenset({"CCCL", "CUB", "Thrust", "libcudacxx", "NCCL", "NVSHMEM",
                             "cuBLAS", "cuBLASLt", "cuDNN", "cuSPARSE", "cuFFT", "cuSOLVER",
                             "cuTENSOR", "cuRAND", "NPP", "nvJPEG", "TensorRT", "CUDA",
                             "cuda-python", "CuPy", "Triton", "TransformerEngine", "NVTE",
                             # XLA (JAX, TensorFlow) writes its own ranges (XlaModule,
                             # XlaCompile, XlaPass...) in the domain of its TSL library
                             "TSL", "XLA"})
_LIBRARY_FOLDED = frozenset(d.casefold() for d in LIBRARY_DOMAINS)

def library_mask(nv: Table) -> np.ndarray:
    """Per NVTX row: made by a library rather than the program: a range nsys made for a
    traced library (``library``), or one in a library's registered domain
    (LIBRARY_DOMAINS). The name does not matter: ``cub::DeviceReduce::Sum`` in the CCCL
    domain is CUB's, but a C++-qualified name in the program's own domain (its
    ``MyModel::forward``, torch's ``aten::mm`` under emit_nvtx) is the program's.
    Decided once per distinct domain."""
    if nv.empty:
        return np.zeros(0, dtype=bool)
    domains = nv.labels("domain")
    is_lib = np.array([str(d).casefold() in _LIBRARY_FOLDED
                       for d in domains.categories.tolist() + [None]], dtype=bool)
    return nv["library"].astype(bool) | is_lib[domains.codes]


def program_ranges(trace: Trace, all_domains: bool = False) -> Table:
    """NVTX ranges of the program (of ``ranges``): not the ones nsys makes for traced
    libraries, nor those libraries emit themselves (see library_mask); every range with
    *all_domains*."""
    nv = ranges(trace)
    return nv if nv.empty or all_domains else nv.rows(~NvtxIndex.of(trace).library_mask)


def ranges(trace: Trace) -> Table:
    """Every NVTX range of *trace*, names and domains as Labels."""
    return NvtxIndex.of(trace).ranges


class NvtxIndex(Derived):
    """The program model's derived state of a trace's NVTX ranges
    (gpugap.report.trace.Derived): computed on first use, kept with the trace."""

    @cached_property
    def ranges(self) -> Table:
        """The trace's NVTX table, names and domains as Labels (the table holds them as
        plain strings), so that they are told apart once."""
        nv = self.trace.table("nvtx")
        return nv.with_columns(name=nv.labels("name"), domain=nv.labels("domain"))

    @cached_property
    def library_mask(self) -> np.ndarray:
        """library_mask of the trace's NVTX ranges."""
        return library_mask(self.ranges)


def library_domains(trace: Trace) -> list[str]:
    """The NVTX domains of the report that are libraries' (see library_mask), sorted."""
    nv = ranges(trace)
    if nv.empty:
        return []
    domains = nv.labels("domain")
    seen = np.unique(domains.codes[NvtxIndex.of(trace).library_mask])
    # str(): a missing domain reads 'None', as the frame's strings did.
    return sorted(d for d in map(str, np.append(domains.categories, None)[seen].tolist())
                  if d)


__all__ = ["LIBRARY_DOMAINS", "NvtxIndex", "base_name", "library_domains", "library_mask",
           "program_ranges", "ranges", "shown_name"]
