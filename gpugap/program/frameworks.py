"""Which frameworks and libraries a program uses, from what they leave in the report.

Each is recognised by traces that only it leaves, counted as evidence:

| component | framework | evidence |
|---|---|---|
| PyTorch | yes | kernels of ATen (``at::native::`` in the demangled name) |
| JAX | yes | XLA's NVTX ranges (domain TSL: XlaModule, XlaCompile...), or its fusions |
| XLA | yes | its NVTX ranges (domain TSL), kernels XLA names ``*_fusion*`` |
| CuPy | yes | its kernels (``cupy_*``), or its way of calling CUDA (below) |
| Inductor | yes | torch.compile's generated kernels (``triton_poi_*``, ``triton_red_*``...) |
| Triton | yes | Inductor's kernels, or the driver launching a Python program's own beside torch |
| cuBLAS | library | GEMM kernels (``*xmma_gemm*``, ``nvjet_*``, cutlass...), ``cublas*Params`` |
| cuDNN | library | convolution (``*fprop*``, ``*dgrad*``, ``*wgrad*``, ``cudnn``), RNN kernels |
| NCCL | library | its kernels (``ncclDevKernel_*``) or its NVTX domain |
| CUDA C++ | framework | no framework above, GPU work launched from a process that is not Python |
| CUDA Python | framework | no framework above, GPU work launched from Python |

A Python program whose kernels are all its own RawKernels shows no ``cupy_*`` kernel;
CuPy still calls CUDA as no other Python library does: kernels through the driver
(``cuLaunchKernel``), never the runtime, memory through the runtime API (``cudaMalloc``,
``cudaMemcpy*``, ``cudaMemset*``).

A framework decides the language of a fix (gpugap.rules speak PyTorch, JAX, CuPy or
CUDA C++); libraries say where kernels come from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from gpugap.jsonout import Record
from gpugap.memory import isin
from gpugap.program.nvtx import ranges
from gpugap.program.ops import group_sums
from gpugap.report.trace import Trace

PYTORCH_KERNEL = re.compile(r"\bat::native::|\bat_cuda_detail::|\bc10::")
INDUCTOR_KERNEL = re.compile(r"^(?:void )?triton_(?:poi|per|red|tem|for|unk|mm|bmm)_")
XLA_KERNEL = re.compile(r"(?:^|_)fusion(?:_\d+)?$|^(?:input|loop|wrapped|gemm)_\w*fusion"
                        r"|^(?:void )?xla::|^wrapped_|^xla_|RedzoneAllocatorKernel")
CUPY_KERNEL = re.compile(r"^(?:void )?cupy_")
CUBLAS_KERNEL = re.compile(r"xmma_gemm|^(?:void )?(?:nvjet_|gemv|gemmk|gemmSN|sgemm|dgemm|"
                           r"hgemm|cublas|splitKreduce)|cutlass\w*gemm|gemm\w*cutlass|"
                           r"^(?:void )?cutlass::Kernel", re.IGNORECASE)
# cuBLAS's level-1/2 kernels (axpy_kernel_val, dot_kernel, reduce_1Block_kernel...) have
# plain names; their demangled signatures take cuBLAS's parameter types.
CUBLAS_DEMANGLED = re.compile(r"\bcublas[A-Z]\w*(?:Params\w*|Tensor\w*)\b")
# Convolutions and batch norm; and the RNN API's kernels (cudnnRNNForward/Backward*:
# per-timestep cells, the persistent kernels, their dropout masks).
CUDNN_KERNEL = re.compile(r"cudnn|fprop|dgrad|wgrad|implicit_convolve|"
                          r"conv2d_(?:c1_k1|grouped)|bn_fw_|bn_bw_|"
                          r"elemWiseRNNcell|^(?:void )?(?:LSTM|GRU|RNN|GENERIC)_elementWise_|"
                          r"RNN_blockPersist|^(?:void )?dropout_(?:apply|generate)_mask",
                          re.IGNORECASE)
NCCL_KERNEL = re.compile(r"^(?:void )?nccl", re.IGNORECASE)
XLA_DOMAINS = frozenset({"TSL", "XLA"})
NCCL_DOMAINS = frozenset({"NCCL"})
PYTHON_PROCESS = re.compile(r"(?:^|/)(?:python[\d.]*|pypy[\d.]*)$|\bpython\d?(?:\.\d+)?\b")

FRAMEWORKS = ("PyTorch", "JAX", "XLA", "CuPy", "Inductor", "Triton", "CUDA C++",
              "CUDA Python")
LIBRARIES = ("cuBLAS", "cuDNN", "NCCL")


@dataclass(frozen=True)
class Component(Record):
    """A framework or library the program uses: its ``name`` (one of FRAMEWORKS or
    LIBRARIES), whether it is a ``framework`` (it decides the language of fixes), and
    what showed it (``evidence``, one phrase)."""

    name: str
    framework: bool
    evidence: str

    def to_dict(self) -> dict:
        return {"name": self.name, "framework": self.framework, "evidence": self.evidence}


class _KernelNames:
    """The kernels' distinct names (of a name column) and how many kernels hold each:
    a pattern is tested once per distinct name and its kernels counted from those
    counts, the column's codes counted once for every pattern."""

    def __init__(self, trace: Trace, column: str) -> None:
        kernels = trace.table("kernels")
        self.counts: list[tuple[str, int]] = []
        if len(kernels) and column in kernels:
            labels = kernels.labels(column)
            # Shifted by one: the missing names (code -1) counted apart, in bin 0.
            per_code = np.bincount(labels.codes.astype(np.intp) + 1,
                                   minlength=labels.categories.size + 1)[1:]
            self.counts = [(name, n) for name, n in zip(labels.categories.tolist(),
                                                        per_code.tolist(), strict=True)
                           if n]

    def hits(self, pattern: re.Pattern[str]) -> int:
        """How many kernels match *pattern*."""
        return sum(n for name, n in self.counts if pattern.search(name))


def _domain_ranges(trace: Trace, domains: frozenset[str]) -> int:
    nv = ranges(trace)
    if not len(nv):
        return 0
    return int(nv.labels("domain").isin(domains).sum())


def gpu_pids(trace: Trace) -> list[int]:
    """The processes that launched GPU work (kernels, copies, memsets, graphs)."""
    pids: set[int] = set()
    for kind in ("kernels", "memcpys", "memsets", "graphs"):
        (launched,), _ = group_sums([trace.table(kind)["pid"]])     # (in runs: no sort)
        pids.update(launched.tolist())
    return sorted(pids)


def process_names(trace: Trace) -> dict[int, str]:
    procs = trace.table("processes")
    if not len(procs):
        return {}
    # str(): a missing name reads 'None', as the frame's strings did.
    return dict(zip(procs["pid"].astype(np.int64).tolist(),
                    map(str, procs.labels("name").strings().tolist()), strict=True))


DRIVER_LAUNCH = re.compile(r"^cuLaunch")
LIBRARY_KERNEL = re.compile("|".join(p.pattern for p in (CUBLAS_KERNEL, CUDNN_KERNEL,
                                                          NCCL_KERNEL)), re.IGNORECASE)


def _driver_launches(trace: Trace, pids: list[int]) -> int:
    """Kernels of the program's own (no library's, no ATen's) launched through the
    driver API (cuLaunchKernel*) by *pids*: what JIT compilers' launchers do (Triton,
    CuPy, cuda-python); libraries such as cuBLAS launch some of theirs so too."""
    k = trace.table("kernels")
    if not len(k) or "api_name" not in k:
        return 0
    driver = (k.labels("api_name").matching(DRIVER_LAUNCH)
              & isin(k["pid"], pids))
    if not driver.any():
        return 0
    names = k.labels("demangled" if "demangled" in k else "name")
    # Told per distinct name; a kernel without a name (code -1, the last entry) is not
    # counted as the program's own.
    own = np.array([not (LIBRARY_KERNEL.search(c) or PYTORCH_KERNEL.search(c))
                    for c in names.categories.tolist()] + [False], dtype=bool)
    return int(own[names.codes[driver]].sum())


# CuPy's launch (cuda.core and recent Triton launch with cuLaunchKernelEx).
CUPY_LAUNCH = re.compile(r"^cuLaunchKernel(?!Ex)")
RUNTIME_LAUNCH = re.compile(r"^cudaLaunch|^cudaGraphLaunch")
RUNTIME_MEMORY = re.compile(r"^cuda(?:Malloc|Free|Memcpy|Memset)")
# Memory through the driver: XLA's runtime, cuda.core, Numba, PyCUDA (never CuPy's pool).
DRIVER_MEMORY = re.compile(r"^cu(?:MemAlloc|MemFree|Memcpy|Memset|StreamIsCapturing)")


def _cupy_calls(trace: Trace, pids: list[int]) -> int:
    """Of *pids* (Python processes), the runtime API memory calls when they called CUDA
    the way CuPy does and no other Python library does: its RawKernels and compiled
    kernels launched through the driver (cuLaunchKernel), never through the runtime (as
    PyTorch's kernels are), while its memory pool allocates, copies and fills through the
    runtime API, none through the driver (XLA's runtime, cuda-python's cuda.core, Numba
    and PyCUDA use the driver for memory). 0 when they did not. Not told apart: Triton
    kernels launched with cuLaunchKernel (older Triton releases) beside PyTorch's allocator
    in a program that runs no ATen kernel at all."""
    api = trace.table("api")
    if not len(api) or not pids:
        return 0
    names = api.labels("name")
    per_name = dict(zip(map(str, names.categories.tolist()),
                        np.bincount(names.codes[isin(api["pid"], pids)],
                                    minlength=names.categories.size).tolist(),
                        strict=True))

    def calls(pattern: re.Pattern[str]) -> int:
        return sum(n for name, n in per_name.items() if pattern.search(name))

    if calls(RUNTIME_LAUNCH) or calls(DRIVER_MEMORY) or not calls(CUPY_LAUNCH):
        return 0
    return calls(RUNTIME_MEMORY)


def detect(trace: Trace) -> list[Component]:
    """The frameworks and libraries the report shows, frameworks first."""
    out: list[Component] = []
    kernels, demangled = _KernelNames(trace, "name"), _KernelNames(trace, "demangled")
    torch = demangled.hits(PYTORCH_KERNEL)
    if torch:
        out.append(Component("PyTorch", True, f"{torch} ATen kernels (at::native::)"))
    xla_ranges = _domain_ranges(trace, XLA_DOMAINS)
    xla_kernels = kernels.hits(XLA_KERNEL)
    if xla_ranges or (xla_kernels and not torch):
        evidence = (f"{xla_ranges} XLA NVTX ranges (domain TSL)" if xla_ranges
                    else f"{xla_kernels} XLA fusion kernels")
        out.append(Component("JAX", True, evidence))
        out.append(Component("XLA", True, evidence))
    cupy = kernels.hits(CUPY_KERNEL)
    if cupy:
        out.append(Component("CuPy", True, f"{cupy} CuPy kernels (cupy_*)"))
    inductor = kernels.hits(INDUCTOR_KERNEL)
    if inductor:
        out.append(Component("Inductor", True,
                             f"{inductor} kernels torch.compile generated (triton_*)"))
    pids = gpu_pids(trace)
    names = process_names(trace)
    python = [p for p in pids if PYTHON_PROCESS.search(names.get(p, ""))]
    driver = _driver_launches(trace, python)
    if inductor or (torch and driver):
        out.append(Component("Triton", True, f"{inductor} Inductor kernels" if inductor
                             else f"{driver} kernels launched through the driver beside "
                                  "PyTorch"))
    cupy_calls = 0 if any(c.framework for c in out) else _cupy_calls(trace, python)
    if cupy_calls:
        out.append(Component("CuPy", True, f"kernels launched through the driver, "
                                           f"{cupy_calls} memory calls through the "
                                           "runtime API (CuPy's way)"))
    if not any(c.framework for c in out) and pids:
        if python and len(python) == len(pids):
            out.append(Component("CUDA Python", True,
                                 f"GPU work launched from Python ({names[python[0]]})"))
        else:
            shown = names.get(pids[0], f"pid {pids[0]}")
            out.append(Component("CUDA C++", True, f"GPU work launched by {shown}"))
    cublas = max(kernels.hits(CUBLAS_KERNEL), demangled.hits(CUBLAS_DEMANGLED))
    if cublas:
        out.append(Component("cuBLAS", False, f"{cublas} cuBLAS kernels"))
    cudnn = kernels.hits(CUDNN_KERNEL)
    if cudnn:
        out.append(Component("cuDNN", False, f"{cudnn} cuDNN kernels"))
    nccl = kernels.hits(NCCL_KERNEL) or _domain_ranges(trace, NCCL_DOMAINS)
    if nccl:
        out.append(Component("NCCL", False, f"{nccl} NCCL kernels or ranges"))
    return out
