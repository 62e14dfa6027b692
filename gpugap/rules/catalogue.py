"""The catalogue of causes: the pitfalls the field's guides describe, as data.

A rule says what kind of time the GPU lost (launch gaps, synchronization, allocation...);
a pitfall says why, in the program's own terms, and what to change. Each entry is one
pitfall from the guides engineers use (PyTorch's performance tuning guide and CUDA
semantics notes, the CUDA C++ Best Practices and Programming Guides, JAX's profiling
docs and sharp bits, CuPy's performance notes, NCCL's troubleshooting, the Nsight Systems
expert rules, HTA), written as:

- ``refines``: the (rule, cause) findings it can name;
- ``signature``: how it shows in a report with the tracing gpugap asks for;
- ``match``: its signature as a test on the evidence (gpugap.rules.signals: what the
  device's steady iteration did, counted; and the finding's own evidence), returning the
  facts the fix quotes, or None; None as a match: whenever the cause fires (the general
  pitfall of a cause, after its specific ones);
- ``fixes``: the fix in each framework's words ('*': any), a template over those facts
  (None: the rule's own fix, which already reads that evidence or is the cause's whole
  advice);
- ``guide``: where the field documents it; ``capture``: a corpus capture that shows it
  (tests/test_catalogue.py checks each on its capture).

:func:`refine` gives each settled finding the first entry (in catalogue order) that
refines its cause and matches: its fix, read from the evidence, and its name. A finding
no entry matches keeps its rule's words. docs/causes.md is generated from this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpugap.report.trace import Trace
from gpugap.rules.base import Context, Finding
from gpugap.rules.launch_gap import BY_VALUE_PCT
from gpugap.rules.signals import Signals
from gpugap.units import fmt_bytes

Facts = dict[str, Any]
Match = Callable[[Signals, Finding], Facts | None]


@dataclass(frozen=True)
class Pitfall:
    id: str
    title: str
    refines: tuple[tuple[str, str], ...]
    signature: str
    guide: str
    # None: the rule's own fix for the cause (a general entry: its cause's whole pitfall).
    fixes: Mapping[str, str] | None
    match: Match | None = None
    capture: str | None = None
    # Frameworks it applies to (None: any).
    frameworks: tuple[str, ...] | None = None
    # The name a verdict gives the finding it matched, filled with its facts, where the
    # pitfall is the cause and the rule's label only its symptom (syncs that expose
    # launch gaps: the gaps are the symptom); None: the rule's title stays.
    headline: str | None = None

    def title_for(self, facts: Facts) -> str | None:
        return None if self.headline is None else self.headline.format(**facts)

    def fix(self, framework: str | None, facts: Facts) -> str:
        """The fix in *framework*'s words (or the language the facts name: a Triton
        kernel in a PyTorch program), its template filled with *facts*."""
        if self.fixes is None:
            return ""
        framework = facts.get("language") or framework
        text = self.fixes.get(framework or "", self.fixes.get("*"))
        if text is None:
            return ""
        return text.format(**facts)


def _n(x: float) -> str:
    """A count per iteration as people read it: '4096', '2.5'."""
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 or x >= 10 else f"{x:.1f}"


# --- signatures ----------------------------------------------------------------------

# One kernel launched many times an iteration, each launch too small to fill the GPU: a
# host loop over items (rows, samples, experts) launching one kernel per item.
PER_ITEM_MIN = 64


def _per_item(s: Signals, f: Finding) -> Facts | None:
    if not s.kernels:
        return None
    top = s.kernels[0]
    if top.per_iteration >= PER_ITEM_MIN and top.share >= 0.5 and top.blocks < s.sm_count:
        return {"kernel": top.name, "n": _n(top.per_iteration), "blocks": _n(top.blocks),
                "sms": s.sm_count,
                # A JIT's kernel (Triton's launcher calls the driver): the fix in its words.
                "language": "Triton" if top.api.startswith("cuLaunch")
                and "Triton" in s.frameworks else None}
    return None


def _optimizer(s: Signals, f: Finding) -> Facts | None:
    return {} if f.evidence.get("per_parameter_optimizer") else None


def _graphed(s: Signals, f: Finding) -> Facts | None:
    return {} if f.evidence.get("before_cuda_graph_work_pct", 0) >= 50 else None


def _compiled(s: Signals, f: Finding) -> Facts | None:
    # (Inductor's kernels among the cuBLAS ones it still calls: 40% of the gaps.)
    return {} if f.evidence.get("before_jit_kernels_pct", 0) >= 40 else None


def _no_graphs(s: Signals, f: Finding) -> Facts | None:
    return {"launches": _n(s.launches)} if s.graph_launches == 0 else None


# Host synchronizations an iteration past which they, not the launches, set the pace: the
# host cannot queue work ahead of the GPU.
MANY_SYNCS = 8
# At most this many launches per synchronization for the syncs to be what exposes them.
LAUNCHES_PER_SYNC = 32


def _syncs_hide_nothing(s: Signals, f: Finding) -> Facts | None:
    # Few launches between syncs: the syncs keep the queue empty. Many (a decode step's
    # 139 launches per token read): the launches are the cost, the read a small part.
    if s.syncs >= MANY_SYNCS and s.launches <= LAUNCHES_PER_SYNC * s.syncs:
        return {"syncs": _n(s.syncs), "reads": _n(s.small_reads),
                "launches": _n(s.launches)}
    return None


def _graph_then_sync(s: Signals, f: Finding) -> Facts | None:
    if s.graph_launches >= 1 and s.syncs >= 1:
        return {"graphs": _n(s.graph_launches), "syncs": _n(s.syncs),
                "sync": _top_call(s, r"Synchronize$"),
                "each": ("the graph replay of each iteration is" if s.graph_launches < 1.5
                         else f"each of the {_n(s.graph_launches)} graph replays per "
                         "iteration is")}
    return None


def _small_reads(s: Signals, f: Finding) -> Facts | None:
    if s.small_reads >= 1 and s.syncs >= 1:
        return {"reads": _n(s.small_reads), "syncs": _n(s.syncs)}
    return None


def _read_by_value(s: Signals, f: Finding) -> Facts | None:
    if f.evidence.get("between_reads_pct", 0) >= BY_VALUE_PCT:
        return {"reads": _n(f.evidence.get("reads_between", 0))}
    return None


def _call(pattern: str, least: float = 1.0) -> Match:
    """Calls whose name matches *pattern*, at least *least* per iteration: 'n' of them,
    'call' the commonest, 'calls' the names ('cudaHostAlloc and cudaFreeHost')."""
    rx = re.compile(pattern)

    def match(s: Signals, f: Finding) -> Facts | None:
        n = s.count(rx)
        names = _calls_named(s, rx)
        return ({"n": _n(n), "call": names[0], "calls": " and ".join(names[:2])}
                if n >= least and names else None)
    return match


def _calls_named(s: Signals, rx: re.Pattern[str]) -> list[str]:
    return [k for _, k in sorted(((-v, k) for k, v in s.calls.items() if rx.search(k)))]


def _top_call(s: Signals, pattern: str) -> str:
    found = _calls_named(s, re.compile(pattern))
    return found[0] if found else ""


def _copies(direction: str, memory: str) -> Match:
    def match(s: Signals, f: Finding) -> Facts | None:
        if f.evidence.get("direction", direction) != direction:
            return None                     # the finding's own copies go the other way
        n, nbytes = s.copies.get((direction, memory), (0.0, 0.0))
        if n <= 0:
            return None
        return {"n": _n(n), "bytes": fmt_bytes(int(nbytes))}
    return match


def _evidence(key: str, value: Any = True) -> Match:
    def match(s: Signals, f: Finding) -> Facts | None:
        return {} if f.evidence.get(key) == value else None
    return match


def _library_grid(s: Signals, f: Finding) -> Facts | None:
    lib = f.evidence.get("library")
    return {"library": lib} if lib else None


def _loader(s: Signals, f: Finding) -> Facts | None:
    program = s.dev_program
    return {"loader": program.data_loader} if program is not None and \
        program.data_loader else None


def _held_start_up(s: Signals, f: Finding) -> Facts | None:
    who = f.evidence.get("waiting_for_startup_of")
    return {"who": who} if who else None


def _waiting_between_iterations(s: Signals, f: Finding) -> Facts | None:
    return {} if f.evidence.get("between_iterations_pct", 0) >= 50 else None


# --- the catalogue -------------------------------------------------------------------

PT_TUNING = "PyTorch Performance Tuning Guide (pytorch.org/tutorials/recipes/recipes/tuning_guide)"
PT_CUDA = "PyTorch CUDA semantics (pytorch.org/docs/stable/notes/cuda.html)"
CUDA_BP = "CUDA C++ Best Practices Guide (docs.nvidia.com/cuda/cuda-c-best-practices-guide)"
CUDA_PG = "CUDA C++ Programming Guide (docs.nvidia.com/cuda/cuda-c-programming-guide)"
JAX_DOCS = "JAX: JIT compilation, profiling and the sharp bits (docs.jax.dev)"
CUPY_PERF = "CuPy performance best practices (docs.cupy.dev/en/stable/user_guide/performance.html)"
NSYS_RULES = ("Nsight Systems expert-system rules (nsys analyze: cuda_api_sync, "
              "cuda_memcpy_async, cuda_memcpy_sync, gpu_gaps, gpu_time_util)")
HTA = "Holistic Trace Analysis (temporal, idle-time and communication breakdowns)"
NCCL_DOCS = "NCCL and torch.distributed notes (DDP overlap, communication streams)"
TRITON = "Triton tutorials (triton-lang.org: vector add, fused softmax, autotuning)"
PT_COMPILE = "torch.compile troubleshooting: recompilation and dynamic shapes (pytorch.org/docs)"
PT_DCP = "torch.distributed.checkpoint (async_save)"

CATALOGUE: tuple[Pitfall, ...] = (
    Pitfall(
        "per-parameter-optimizer", "An optimizer step kernel by kernel, per parameter",
        (("launch-gap", "launch-bound"),),
        "the launch gaps sit in an optimizer step (an NVTX range named like one, or Adam's "
        "element-wise update kernels with no multi-tensor kernel): a for-loop over the "
        "parameters",
        PT_TUNING,
        None,
        _optimizer, capture="pt-adamw-loop", frameworks=("PyTorch",)),
    Pitfall(
        "one-launch-per-item", "One small launch per item, from a host loop",
        (("launch-gap", "launch-bound"), ("launch-gap", "host-launch-latency")),
        "one kernel is most of an iteration's launches (at least 64 of them), each with a "
        "grid smaller than the GPU: a Python or C++ loop launching it once per row, sample "
        "or item",
        TRITON + "; " + CUDA_BP,
        {"Triton": "'{kernel}' is launched {n} times per iteration, {blocks} block(s) each: "
                   "launch it once over all rows, with a grid of as many programs "
                   "(kernel[(n_rows,)](...) with tl.program_id(0) picking the row), not "
                   "once per row from Python; capturing the loop in a graph would only hide the "
                   "launches.",
         "PyTorch": "'{kernel}' is launched {n} times per iteration, {blocks} block(s) "
                    "each: do the per-item work as one batched operation (stack the items "
                    "on a leading dimension, vectorize the loop, torch.vmap) so that one "
                    "launch covers them all.",
         "JAX": "'{kernel}' runs {n} times per iteration: jax.vmap the per-item function "
                "and jit the batch, so that one launch covers all items.",
         "CuPy": "'{kernel}' is launched {n} times per iteration, {blocks} block(s) each: "
                 "launch it once with a grid over all items (blockIdx picks the item).",
         "*": "'{kernel}' is launched {n} times per iteration, {blocks} block(s) each: "
              "launch it once with a grid over all items (blockIdx picks the item) "
              "instead of a host loop of launches."},
        _per_item, capture="ext-b4-triton_rowloop"),
    Pitfall(
        "launch-bound-in-graph", "Launch gaps in work that already runs as a CUDA graph",
        (("launch-gap", "launch-bound"),),
        "most launch gaps come before CUDA graph work: the eager work around the graph "
        "replays is what waits",
        PT_CUDA + "; " + CUDA_PG,
        None,
        _graphed),
    Pitfall(
        "compiled-still-launch-bound", "Compiled kernels still arriving one at a time",
        (("launch-gap", "launch-bound"),),
        "most launch gaps come before JIT-compiled kernels (Inductor's triton_*)",
        PT_COMPILE,
        None,
        _compiled, capture="captures/small-compile", frameworks=("PyTorch",)),
    Pitfall(
        "syncs-expose-launch-gaps", "Host synchronizations keep the host from running ahead",
        (("launch-gap", "launch-bound"),),
        "launch gaps in iterations with many host synchronizations (8 or more): after each "
        "the queue is empty, so every following launch gap shows",
        PT_TUNING + "; " + NSYS_RULES,
        {"PyTorch": "The {syncs} host synchronizations per iteration ({reads} small "
                    "reads: .item(), .tolist(), nonzero(), boolean-mask indexing) keep the "
                    "host from queueing work ahead, so each of the {launches} launches "
                    "shows as a gap: remove the syncs first (torch.where or fixed-capacity "
                    "routing instead of nonzero(), read values once per step), then launch "
                    "fewer, larger kernels (grouped GEMMs, CUDA graphs).",
         "*": "The {syncs} host synchronizations per iteration keep the host from "
              "queueing work ahead, so each of the {launches} launches shows as a gap: "
              "remove the syncs first, then launch fewer, larger kernels."},
        _syncs_hide_nothing, capture="ext-b2-moe_mask",
        headline="Host synchronizations expose the launch gaps ({syncs} per iteration)"),
    Pitfall(
        "jax-eager-dispatch", "JAX operations dispatched one by one, without jit",
        (("launch-gap", "launch-bound"), ("launch-gap", "host-launch-latency")),
        "a JAX program launching kernels with no CUDA graph launches (XLA runs a jitted "
        "step as a graph): each jnp call dispatched on its own",
        JAX_DOCS,
        {"JAX": "Each jnp operation is dispatched on its own ({launches} launches per "
                "iteration): jax.jit the step (and loop inside it with jax.lax.fori_loop "
                "or scan), so XLA runs it as one compiled program."},
        _no_graphs, capture="jax-eager", frameworks=("JAX",)),
    Pitfall(
        "eager-small-kernels", "Many small kernels, launched eagerly",
        (("launch-gap", "launch-bound"),),
        "kernels that finish before the host launches the next, whatever their source",
        PT_CUDA + "; " + CUDA_PG + "; " + CUPY_PERF,
        None,
        None, capture="ext-b1-mlp_eager"),
    Pitfall(
        "sync-after-each-graph-replay", "A synchronization after every graph replay",
        (("launch-gap", "sync-wait"),),
        "CUDA graph launches each followed by a stream or device synchronization: the host "
        "waits for each replay before it launches the next",
        CUDA_PG,
        {"CUDA C++": "The host waits for every replay: {each} followed by {sync}. Launch "
                     "the replays back to back and synchronize once, when the result is "
                     "needed (or capture several iterations in one graph).",
         "*": "The host waits for every replay: {each} followed by {sync}. Launch the "
              "replays back to back and synchronize once, when the result is needed."},
        _graph_then_sync, capture="ext-b4-graph_sync"),
    Pitfall(
        "scalar-read-every-step", "A value read back to the host every step",
        (("launch-gap", "sync-wait"),),
        "small device-to-host copies (a few bytes) each followed by a synchronization, "
        "every iteration: .item(), .tolist(), bool(tensor), printing a loss",
        PT_TUNING + "; " + NSYS_RULES,
        {"PyTorch": "{reads} small read(s) back per iteration (.item(), .tolist(), "
                    "bool(tensor), print(loss)) each wait for the GPU: keep values on the "
                    "GPU, accumulate them as tensors and read them every N steps.",
         "JAX": "{reads} small read(s) back per iteration (float(x), x.item(), "
                "np.asarray(x), printing) each block on the device: keep values on the "
                "device and fetch them every N steps (jax.device_get).",
         "CuPy": "{reads} small read(s) back per iteration (.get(), .item(), float(x)) "
                 "each wait for the GPU: read every N iterations, or copy asynchronously "
                 "into pinned memory and wait on an event later.",
         "*": "{reads} small read(s) back per iteration each wait for the GPU: read them "
              "every N iterations, asynchronously into pinned memory."},
        _small_reads, capture="pt-item-sync"),
    Pitfall(
        "event-sync-per-iteration", "The host waits on an event every iteration",
        (("launch-gap", "sync-wait"),),
        "cudaEventSynchronize calls every iteration",
        CUDA_BP + "; " + NSYS_RULES,
        {"CUDA C++": "{call} ({n} per iteration) makes the host wait for the GPU: order "
                     "work between streams with cudaStreamWaitEvent (no host wait), and "
                     "synchronize the host only where it needs a result.",
         "*": "{call} ({n} per iteration) makes the host wait for the GPU: order work "
              "between streams on the GPU (stream waits on events) and wait on the host "
              "only where it needs a result."},
        _call(r"EventSynchronize$"), capture="cpp-event-sync"),
    Pitfall(
        "host-sync-per-iteration", "The host synchronizes with the GPU every iteration",
        (("launch-gap", "sync-wait"),),
        "stream or device synchronizations every iteration",
        CUDA_BP + "; " + NSYS_RULES,
        {"CUDA C++": "{call} ({n} per iteration) drains the GPU each time: synchronize "
                     "only where the host needs a result, order work between streams with "
                     "events, and double-buffer so the next iteration is queued before the "
                     "wait.",
         "PyTorch": "{call} ({n} per iteration: torch.cuda.synchronize(), or a blocking "
                    "copy) drains the GPU each time: keep it out of the loop, and read "
                    "values back only every N steps.",
         "*": "{call} ({n} per iteration) drains the GPU each time: synchronize only where "
              "the host needs a result, and queue the next iteration's work before "
              "waiting."},
        # (cpp-cublas-churn's per-batch cudaDeviceSynchronize is part of its library
        # churn now, claimed whole by that finding: no committed capture shows it alone.)
        _call(r"Synchronize$")),
    Pitfall(
        "pinned-host-alloc-churn", "Pinned host memory allocated and freed every iteration",
        (("launch-gap", "allocation"),),
        "cudaHostAlloc / cudaMallocHost / cudaFreeHost (or cuMemHostAlloc) every iteration",
        CUDA_BP,
        {"*": "{n} calls per iteration to {calls}: pinned host memory is slow to allocate "
              "and free (the driver pins and maps it). Allocate the pinned buffer once, "
              "before the loop, and reuse it; this is host memory, not the device's."},
        _call(r"HostAlloc|MallocHost|FreeHost|MemHostAlloc|HostRegister"),
        capture="ext-b4-hostalloc_churn"),
    Pitfall(
        "caching-allocator-off", "PyTorch's caching allocator turned off",
        (("launch-gap", "allocation"),),
        "a PyTorch program calling cudaMalloc and cudaFree every iteration (the caching "
        "allocator would reuse the blocks)",
        PT_CUDA,
        {"PyTorch": "{n} calls per iteration to {calls}: PyTorch's caching allocator is "
                    "off (or "
                    "being emptied): unset PYTORCH_NO_CUDA_MEMORY_CACHING, do not call "
                    "torch.cuda.empty_cache() in the loop, and let the allocator reuse "
                    "blocks."},
        _call(r"^cu(da)?(Malloc|Free|MemAlloc|MemFree)(_v\d+)?$", 4),
        capture="ext-b2-alloc_churn", frameworks=("PyTorch",)),
    Pitfall(
        "device-alloc-in-loop", "Device memory allocated and freed in the loop",
        (("launch-gap", "allocation"),),
        "cudaMalloc / cudaFree (or the driver's) every iteration",
        CUDA_BP + "; " + CUPY_PERF,
        {"CUDA C++": "{n} calls per iteration to {calls} (cudaFree waits for the whole "
                     "device): "
                     "allocate once and reuse, or use the stream-ordered allocator "
                     "(cudaMallocAsync / cudaFreeAsync with a pool that keeps memory).",
         "CuPy": "{n} calls per iteration to {calls}: keep CuPy's memory pool on (the "
                 "default "
                 "cupy.get_default_memory_pool(); do not free all blocks in the loop) and "
                 "preallocate buffers outside the loop.",
         "*": "{n} calls per iteration to {calls}: allocate once, outside the loop, and "
              "reuse."},
        _call(r"^cu(da)?(Malloc|Free|MemAlloc|MemFree)(_v\d+)?$"),
        capture="cpp-malloc-loop"),
    Pitfall(
        "pageable-upload", "Uploads from pageable host memory",
        (("blocking-memcpy", "pageable-async"),),
        "host-to-device copies from pageable memory: the call holds the thread while the "
        "driver stages the data",
        PT_TUNING + "; " + CUDA_BP + "; " + NSYS_RULES,
        {"PyTorch": "Uploads from pageable memory ({n} per iteration, {bytes}) hold the "
                    "thread: pin the source (DataLoader(pin_memory=True) or "
                    "tensor.pin_memory()) and copy with .to(device, non_blocking=True).",
         "*": "Uploads from pageable memory ({n} per iteration, {bytes}) hold the thread: "
              "put the host buffer in pinned memory and copy asynchronously on a "
              "non-default stream."},
        _copies("Host-to-Device", "Pageable"), capture="pt-pageable-h2d"),
    Pitfall(
        "results-to-pageable", "Results copied back into pageable memory",
        (("blocking-memcpy", "pageable-async"), ("blocking-memcpy", "synchronous")),
        "device-to-host copies of results into pageable memory (.cpu(), .numpy()), which "
        "wait for the GPU and stage through the driver",
        PT_TUNING + "; " + NSYS_RULES,
        {"PyTorch": "Results copied back to pageable memory ({n} per iteration, {bytes}): "
                    "keep the post-processing on the GPU (softmax, argmax, topk) and copy "
                    "back only what the host needs; if it needs all of it, copy into a "
                    "pinned buffer with non_blocking=True and overlap the next batch.",
         "*": "Results copied back to pageable memory ({n} per iteration, {bytes}): copy "
              "back only what the host needs, into pinned memory, asynchronously."},
        _copies("Device-to-Host", "Pageable"), capture="ext-b2-eval_cpu_copy"),
    Pitfall(
        "synchronous-copy", "Synchronous copies",
        (("blocking-memcpy", "synchronous"),),
        "cudaMemcpy (not Async): the call returns when the copy and everything before it "
        "is done",
        CUDA_BP + "; " + NSYS_RULES,
        None,
        None),
    Pitfall(
        "loader-workers-too-slow", "A data loader that does not keep up",
        (("launch-gap", "input"),),
        "the launching thread waits for the data loader (its pin-memory thread, its worker "
        "processes) before each batch upload",
        PT_TUNING,
        {"PyTorch": "The GPU waits for the DataLoader's next batch ({loader}): its workers "
                    "do not keep up. Raise num_workers (and prefetch_factor), keep "
                    "persistent_workers=True, make __getitem__ cheaper (decode once, "
                    "augment on the GPU, load pre-batched tensors).",
         "*": "The GPU waits for the data loader's next batch ({loader}): give it more "
              "workers, or make each item cheaper to prepare."},
        _loader, capture="pub-pt-mnist"),
    Pitfall(
        "data-loading-on-the-main-thread", "Batches prepared on the training thread",
        (("launch-gap", "input"),),
        "long host pauses before each batch's upload (the launching thread was preparing "
        "it)",
        PT_TUNING + "; " + HTA,
        None,
        None, capture="ext-b3-noranges_train"),
    Pitfall(
        "legacy-default-stream", "Streams serialized by the legacy default stream",
        (("serialized-streams", "legacy-default-stream"),),
        "work on blocking streams that never overlaps, interleaved with work (a memset, a "
        "copy, a kernel) on the legacy default stream, which waits for and blocks every "
        "blocking stream",
        CUDA_PG + " (implicit synchronization)",
        None,
        None, capture="ext-b3-threads_legacy"),
    Pitfall(
        "small-grid-library-kernel", "A library's kernel with a small grid",
        (("small-grid", "undersized-grid"),),
        "grids smaller than the GPU in kernels of a library (cuBLAS, cuDNN): the library "
        "picks them from the problem's shape",
        CUDA_BP + " (occupancy)",
        {"*": "These are {library}'s own kernels: it picks their grids from the problem's "
              "shape. Give it bigger problems (a larger batch, batched calls) or fuse the "
              "operation away; there is no launch configuration to change."},
        _library_grid, capture="pt-cudnn-bench"),
    Pitfall(
        "small-grid-own-kernel", "Too few blocks to fill the GPU",
        (("small-grid", "undersized-grid"),),
        "the program's own kernels launched with fewer blocks than the GPU has SMs",
        CUDA_BP + " (occupancy: launch enough blocks)",
        None,
        None, capture="ext-b3-small_grid_cupy"),
    Pitfall(
        "lazy-module-load", "Kernels loaded on first use",
        (("launch-gap", "module-load"), ("warmup-latency", "module-load")),
        "module or library loads (cuModuleLoad*, cuLibraryLoad*) before a kernel's first "
        "launch (CUDA's lazy loading)",
        CUDA_PG + " (lazy loading)",
        None,
        None, capture="captures/gemm"),
    Pitfall(
        "library-handle-churn", "Library handles created and destroyed in the loop",
        (("launch-gap", "library-churn"),),
        "module loads (and allocations, synchronizations) in most iterations: a library "
        "context (cuBLAS, cuFFT, a CuPy module) created and destroyed each time",
        CUDA_BP + "; cuBLAS documentation (cublasCreate: create the handle once)",
        None,
        None, capture="ext-b3-cublas_create"),
    Pitfall(
        "autotuning-new-shapes", "Autotuning each new input shape",
        (("first-use", "autotuning"),),
        "a few slow iterations with many more launches and synchronizations than the rest "
        "(an autotuner timing candidates for a shape first seen there)",
        PT_TUNING + " (cudnn.benchmark); " + TRITON + " (autotune)",
        None,
        None, capture="ext-b4-cudnn_varshape"),
    Pitfall(
        "recompile-new-shapes", "Recompiling for new input shapes",
        (("first-use", "compilation"),),
        "compilers running in a few iterations after the start-up, when a new shape "
        "arrives",
        PT_COMPILE + "; " + JAX_DOCS,
        None,
        None, capture="pt-dynamic-compile"),
    Pitfall(
        "compile-at-start-up", "Compilation before the loop",
        (("launch-gap", "compilation"),),
        "compilers (Inductor, Triton, XLA, ptxas) running before the first launches of "
        "the code they built",
        PT_COMPILE + "; " + JAX_DOCS,
        None,
        None, capture="ext-b1-compile"),
    Pitfall(
        "all-reduce-after-backward", "Gradients reduced after the backward pass",
        (("exposed-communication", "after-compute"),),
        "communication kernels that start once most of the iteration's compute is done, "
        "with nothing to run beside them",
        NCCL_DOCS + "; " + HTA,
        None,
        None, capture="ext-b1-ddp_serial"),
    Pitfall(
        "collectives-on-the-compute-stream", "Collectives on the compute stream",
        (("exposed-communication", "same-stream"),),
        "communication kernels on a stream that also runs the compute: they run between "
        "compute kernels, never beside them",
        NCCL_DOCS,
        None,
        None, capture="jax-sharded-2gpu"),
    Pitfall(
        "waiting-for-a-rank-starting-up", "Waiting for another rank's start-up",
        (("exposed-communication", "waiting-for-peer"),),
        "waits inside collectives before every rank of the job is warm",
        NCCL_DOCS,
        {"*": "Nothing to change in the steady state: {who} was still starting up. If the "
              "job's start-up matters, look at {who}'s own start-up costs; otherwise "
              "profile from the steady state on."},
        _held_start_up, capture="ext-b4-p2p_pipeline"),
    Pitfall(
        "waiting-for-a-late-rank", "Waiting inside collectives for a late rank",
        (("exposed-communication", "waiting-for-peer"),),
        "collectives that start on this device well before they start on a peer",
        NCCL_DOCS + "; " + HTA,
        None,
        None, capture="pt-ddp-uneven"),
    Pitfall(
        "checkpoint-in-the-loop", "Checkpoints that stall training",
        (("periodic-save", "checkpoint"),),
        "every N iterations, a burst of device-to-host copies and file writes while the "
        "GPU waits",
        PT_DCP,
        None,
        None, capture="ext-b3-checkpoint_train"),
    Pitfall(
        "gpu-shared-by-processes", "A GPU time-sliced between processes",
        (("shared-gpu", "time-sliced"),),
        "kernels of two or more processes running at the same time on one GPU, each "
        "slower than alone",
        CUDA_PG + " (multi-process sharing, MPS)",
        None,
        None, capture="ext-b4-share_gpu"),
    Pitfall(
        "server-waiting-for-requests", "A server waiting for requests",
        (("launch-gap", "thread-wait"),),
        "the launching thread blocked on a queue or semaphore between iterations, while "
        "no thread had GPU work: the GPU waits for requests, not for the program",
        HTA + " (host wait)",
        {"*": "Idle capacity, not a slowdown: the server waited for requests. Send it "
              "more (or batch the requests that wait) if the GPU should be busier; each "
              "request's own time is what to make faster."},
        _waiting_between_iterations, capture="ext-b3-infer_server"),
    Pitfall(
        "waiting-for-another-thread", "The launching thread waits for another thread",
        (("launch-gap", "thread-wait"),),
        "the launching thread blocked (condition variable, queue, lock, sleep) while no "
        "thread had GPU work",
        HTA,
        None,
        None, capture="ext-b1-mlp_graph"),
    Pitfall(
        "host-work-between-launches", "CPU work on the launching thread",
        (("launch-gap", "host-launch-latency"),),
        "long stretches where the launching thread was outside CUDA between launches",
        PT_TUNING + "; " + HTA,
        None,
        None, capture="cpp-host-work"),
    Pitfall(
        "results-read-by-value", "Results read back one value at a time",
        (("launch-gap", "results-work"),),
        "host work between device-to-host copies, most of it ending in the next read: a "
        "host loop over values read back one by one, the GPU idle throughout",
        PT_CUDA + "; " + JAX_DOCS + "; " + CUPY_PERF,
        {"PyTorch": "Read the tensor back once (values = t.tolist(), or t.cpu().numpy()), "
                    "then loop over it on the host: element by element (t[i].item(), "
                    "float(t[i]), iterating over a CUDA tensor) each of the {reads} values "
                    "is a copy and a synchronization, and the GPU idles while the host "
                    "works between them.",
         "JAX": "Read the array back once (np.asarray(x) or jax.device_get(x)), then loop "
                "over it on the host, and build host-side constants with numpy, not "
                "jax.numpy: iterating over a jax array in Python (list(x), float(x[i])) "
                "copies the {reads} values one at a time, and the GPU idles while the host "
                "works between the copies.",
         "CuPy": "Read the array back once (x.get() or cupy.asnumpy(x)), then loop over it "
                 "on the host: element by element (float(x[i]), x[i].item()) each of the "
                 "{reads} values is a copy and a synchronization, and the GPU idles while "
                 "the host works between them.",
         "*": "Copy the results back in one transfer (one cudaMemcpy, or cudaMemcpyAsync "
              "into pinned memory), then loop over them on the host, not {reads} copies "
              "of one value each with host work between them while the GPU idles."},
        _read_by_value, capture="pub-jax-dpsgd",
        headline="Results read back one value at a time ({reads} reads)"),
    Pitfall(
        "host-work-on-results", "Host post-processing of results",
        (("launch-gap", "results-work"),),
        "host work right after a device-to-host copy of results, before the next launch",
        PT_TUNING,
        None,
        None, capture="pt-eval-numpy"),
    Pitfall(
        "pipeline-stages-in-turn", "GPUs of a pipeline waiting for each other",
        (("launch-gap", "cross-device-wait"),),
        "a GPU's queued work waiting for another GPU's data (peer copies, event waits)",
        PT_TUNING + " (pipeline parallelism)",
        None,
        None, capture="ext-b3-model_parallel"),
    Pitfall(
        "copies-and-compute-on-one-stream", "Copies and compute taking turns on one stream",
        (("copy-compute-serialized", "same-stream"),),
        "copies and kernels on one stream: each waits for the other",
        CUDA_BP + " (overlapping transfers and compute)",
        None,
        None, capture="prefetch-pipeline-bad"),
)
BY_ID = {p.id: p for p in CATALOGUE}
assert len(BY_ID) == len(CATALOGUE), "catalogue ids must be unique"


def refine(trace: Trace, context: Context, findings: list[Finding]) -> None:
    """Each finding named by the first catalogue entry that refines its cause and whose
    signature matches the evidence (module doc): its fix read from the evidence, its
    pitfall and the facts behind it in its evidence."""
    signals: dict[int, Signals] = {}
    framework = context.framework
    for f in findings:
        if f.device is None or f.device not in context.accounting.devices:
            continue
        for p in CATALOGUE:
            if (f.rule, f.cause) not in p.refines:
                continue
            if p.frameworks is not None and framework not in p.frameworks:
                continue
            if p.match is None:
                facts: Facts | None = {}
            else:
                s = signals.get(f.device)
                if s is None:
                    s = signals[f.device] = Signals(
                        trace, context.accounting.devices[f.device],
                        context.accounting.program, context.scope.steady_span(f.device))
                facts = p.match(s, f)
            if facts is None:
                continue
            text = p.fix(framework, facts)          # "": the rule's own fix stays
            if text:
                f.fix = text
            f.evidence["pitfall"] = p.id
            if facts:
                f.evidence["pitfall_facts"] = {k: v for k, v in facts.items()}
            break


def pitfall_title(f: Finding) -> str | None:
    """The verdict's name for *f* from the pitfall that refined it (Pitfall.headline)."""
    p = BY_ID.get(f.evidence.get("pitfall", ""))
    return None if p is None else p.title_for(f.evidence.get("pitfall_facts") or {})


BY_ID = {p.id: p for p in CATALOGUE}

__all__ = ["BY_ID", "CATALOGUE", "Pitfall", "pitfall_title", "refine"]
