"""The buckets of GPU time: every nanosecond of a device's timeline lands in exactly one.

Busy buckets say what the GPU ran. Where several kinds of work overlap, the nanosecond
goes to the first in this order: compute, CUDA graph, communication, copies, memset.
So ``communication`` is the communication *not hidden* under compute, and a copy bucket
holds copy time that nothing else overlapped: exposed time, the part that costs.

Idle buckets say why the GPU ran nothing, from what the thread that launched the next
piece of work was doing meanwhile (see gpugap.accounting.policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Programs without a framework of their own speak the CUDA API; CUDA Python's calls are
# the same as C++'s (cuda.core / cuda.bindings wrap them).
_FALLBACK = {"CUDA Python": "CUDA C++"}


def fix_for(general: str, fixes: Mapping[str, str], framework: str | None) -> str:
    """*fixes*[framework] (or its fallback's), else *general*."""
    if framework is None:
        return general
    return fixes.get(framework) or fixes.get(_FALLBACK.get(framework, ""), general)


@dataclass(frozen=True)
class IdleCause:
    """What an idle bucket is called as a cause of lost time (the launch-gap rule's
    findings, the verdict): its cause id (as users' gates name it), its title in a
    verdict's headline, what a finding says the launching thread was doing (``why``,
    with ``{min_gap}`` and ``{other}`` filled in), and how it settles and is drawn
    (gpugap.rules.model.Cause: color, priority, occasional_title, waits_for_device)."""

    id: str
    title: str
    why: str
    color: str | None = None
    priority: int | None = None
    occasional_title: str | None = None
    waits_for_device: str | None = None


@dataclass(frozen=True)
class Bucket:
    id: str
    busy: bool
    title: str           # short, for tables: "launch-bound"
    meaning: str         # one sentence
    fix: str = ""        # for idle buckets and exposed copies; empty for compute
    # The category of CUDA calls that show it (gpugap.accounting.host.CATEGORIES).
    call_category: str | None = None
    # The fix in the words of a framework, where it differs (fix_for).
    fixes: Mapping[str, str] = field(default_factory=dict)
    # An idle bucket as a cause (None: a busy bucket). Its meaning, fix, fixes and call
    # category are the cause's too: one description of each idle cause.
    idle: IdleCause | None = None

    def fix_for(self, framework: str | None) -> str:
        return fix_for(self.fix, self.fixes, framework)


# Idle time before an operation that has no launching call in the report.
UNKNOWN = "unknown"

FIX_HOST_WORK = (
    "The host spends long stretches outside CUDA between launches: move that CPU work "
    "(Python logic, preprocessing, I/O) off the launching thread or out of the loop, or "
    "queue more GPU work before it so the GPU has something to do meanwhile.")
# The fixes in the words of each framework (gpugap.program.Program.framework); PyTorch's
# are the causes' own texts where none is given.
FIXES_LAUNCH_BOUND = {
    "JAX": "Jit-compile the step: wrap the loop body in jax.jit (XLA fuses the element-wise "
           "work and runs the step as one executable), move Python loops into "
           "jax.lax.scan / jax.lax.fori_loop, batch small operations (jax.vmap) or raise "
           "the batch size.",
    "CuPy": "Launch fewer, larger kernels: fuse element-wise work (cupy.fuse, an "
            "ElementwiseKernel or a RawKernel doing several steps per launch), capture the "
            "loop in a CUDA graph (stream.begin_capture() / end_capture(), then "
            "graph.launch()), or batch small arrays into one.",
    "CUDA C++": "Launch fewer, larger kernels: capture the loop's kernels in a CUDA graph "
                "(cudaStreamBeginCapture / cudaStreamEndCapture, then one cudaGraphLaunch "
                "per iteration), fuse kernels that run back to back, or give each launch "
                "more work (a grid-stride loop over a bigger batch).",
}
FIXES_SYNC = {
    "JAX": "Keep results on the device and read them rarely: float(), np.asarray(), "
           ".item() and block_until_ready() inside the loop stop JAX's asynchronous "
           "dispatch; accumulate metrics as jax.Arrays and jax.device_get them every N "
           "steps.",
    "CuPy": "Read results back rarely: .get(), cupy.asnumpy() and implicit conversions to "
            "NumPy synchronise the device; keep values in CuPy arrays and fetch them every "
            "N iterations, or copy asynchronously into pinned memory "
            "(ndarray.get(stream=..., out=pinned)) and wait on an event later.",
    "CUDA C++": "Synchronise less often: replace the per-iteration "
                "cudaEventSynchronize / cudaStreamSynchronize / cudaDeviceSynchronize with "
                "cudaStreamWaitEvent between streams, check results every N iterations, or "
                "double-buffer (launch iteration i+1 before reading iteration i's result, "
                "copied with cudaMemcpyAsync into pinned memory).",
}
FIXES_ALLOCATION = {
    "JAX": "Let XLA's allocator keep its pool (do not run with "
           "XLA_PYTHON_CLIENT_ALLOCATOR=platform) and reuse buffers (donate_argnums) "
           "instead of allocating new arrays every step.",
    "CuPy": "Keep CuPy's memory pool on (do not cupy.cuda.set_allocator(None)) and reuse "
            "arrays: out= arguments and buffers allocated once outside the loop.",
    "CUDA C++": "Allocate once and reuse: hoist cudaMalloc / cudaFree out of the loop "
                "(cudaFree synchronises the device), or use the stream-ordered allocator "
                "(cudaMallocAsync / cudaFreeAsync, with a pool whose release threshold "
                "keeps memory cached: cudaMemPoolAttrReleaseThreshold).",
}
FIXES_BLOCKED = {
    "JAX": "Upload from pinned memory ahead of use: jax.device_put the next batch while the "
           "current step runs (a prefetching input pipeline).",
    "CuPy": "Copy from pinned host memory asynchronously: cupyx.empty_pinned buffers and "
            "ndarray.set(..., stream=...) on a non-default stream.",
    "CUDA C++": "Copy from pinned host memory (cudaMallocHost / cudaHostAlloc, or "
                "cudaHostRegister an existing buffer) with cudaMemcpyAsync on a non-default "
                "stream, so the call returns at once and the copy overlaps kernels.",
}
FIXES_MODULE_LOAD = {
    "JAX": "Warm up before the region that matters: call each jitted function once with "
           "the real shapes (or compile ahead of time: jax.jit(f).lower(...).compile()).",
    "CUDA C++": "Warm up before the region that matters (one call of each kernel and "
                "library routine), or load modules eagerly with CUDA_MODULE_LOADING=EAGER.",
}
FIXES_COMPILATION = {
    "JAX": "Compile once: keep input shapes and dtypes stable (pad or bucket them), compile "
           "ahead of time (jax.jit(f).lower(...).compile()) and keep XLA's persistent "
           "compilation cache (jax.config.update('jax_compilation_cache_dir', ...)).",
    "CuPy": "Compile kernels once: create each RawKernel/RawModule once (CuPy caches "
            "compiled code by source and options) and keep CUPY_CACHE_DIR on persistent "
            "storage.",
    "CUDA Python": "Compile once: build each program (cuda.core Program.compile, NVRTC) "
                   "outside the loop and reuse its kernels, keep the compiled cubins "
                   "between runs, or ship cubins built for the GPUs you run on (no PTX "
                   "left for the driver to JIT).",
    "CUDA C++": "Compile ahead of time for the GPUs you run on (nvcc -arch=sm_XX: no PTX "
                "left for the driver to JIT), and cache NVRTC's output between runs.",
}
FIXES_INPUT = {
    "JAX": "Load data off the critical path: a background input pipeline (grain, tf.data or "
           "a thread) that prefetches batches, and jax.device_put the next batch while the "
           "current step runs.",
    "CuPy": "Prepare the next batch on another thread while the GPU works on this one, in "
            "pinned buffers (cupyx.empty_pinned), uploaded on a copy stream.",
    "CUDA C++": "Prepare the next batch on another thread while the GPU works on this one, "
                "in pinned buffers, uploaded with cudaMemcpyAsync on a copy stream (double "
                "buffering).",
}
FIXES_HOST_WORK = {
    "JAX": "Move the host work out of the step: jit more of it, or do it on another thread; "
           "JAX dispatches asynchronously, so the GPU runs ahead only while Python does not "
           "wait or work between steps.",
    "CUDA C++": "Move the CPU work off the launching thread (a worker thread), or launch the "
                "next GPU work before doing it, so the GPU has work queued meanwhile.",
}

BUCKETS: tuple[Bucket, ...] = (
    Bucket("compute", True, "compute", "kernels ran (other than communication)"),
    Bucket("graph", True, "CUDA graph",
           "a CUDA graph ran (graph-level tracing: its nodes are not listed)"),
    Bucket("communication", True, "communication",
           "communication kernels (NCCL, NVSHMEM) ran with no compute beside them",
           "Overlap communication with compute: let DDP/FSDP issue collectives while "
           "backward still runs (bucketed all-reduce), and keep collectives on their own "
           "stream."),
    Bucket("copy-h2d-pageable", True, "copy H2D pageable",
           "host-to-device copies from pageable memory, with nothing else running",
           "Copy from pinned memory, asynchronously on a side stream, so the copy overlaps "
           "compute: DataLoader(pin_memory=True) and .to(device, non_blocking=True)."),
    Bucket("copy-h2d-pinned", True, "copy H2D pinned",
           "host-to-device copies from pinned memory, with nothing else running",
           "Issue the copies on a side stream ahead of the compute that needs them "
           "(prefetch the next batch), ordered with events."),
    Bucket("copy-d2h-pageable", True, "copy D2H pageable",
           "device-to-host copies into pageable memory, with nothing else running",
           "Copy into preallocated pinned buffers with non_blocking=True on a side stream "
           "and synchronise once, after the loop, instead of .cpu() per batch."),
    Bucket("copy-d2h-pinned", True, "copy D2H pinned",
           "device-to-host copies into pinned memory, with nothing else running",
           "Issue the copies on a side stream so they overlap the next batch's compute."),
    Bucket("copy-d2d", True, "copy D2D", "device-to-device copies, with nothing else running",
           "Avoid the copies (views, in-place ops, preallocated outputs) or overlap them."),
    Bucket("copy-peer", True, "copy peer", "copies between GPUs, with nothing else running",
           "Overlap peer copies with compute on a side stream."),
    Bucket("copy-other", True, "copy other", "other copies, with nothing else running",
           "Overlap the copies with compute on a side stream."),
    Bucket("memset", True, "memset", "memsets, with nothing else running",
           "Avoid clearing memory that is overwritten anyway (torch.empty instead of zeros, "
           "zero_grad(set_to_none=True))."),
    # The idle buckets, each the one description of its cause: the accounting's bucket
    # and the launch-gap rule's cause of that name (gpugap.rules.launch_gap).
    Bucket("launch-bound", False, "launch-bound",
           "kernels finish before the host launches the next",
           "Launch fewer, larger kernels: capture the step in a CUDA graph (torch.cuda.graphs, "
           "torch.compile(mode='reduce-overhead')), fuse element-wise work (torch.compile), "
           "batch small operations together, or raise the batch size.",
           call_category="launch", fixes=FIXES_LAUNCH_BOUND,
           idle=IdleCause("launch-bound", "Launch-bound",
                          "the host launched work back to back, but each piece finished "
                          "before the next arrived (gaps under {min_gap})")),
    Bucket("synchronization", False, "synchronization",
           "the host waited for the GPU and the queue drained",
           "Keep values on the GPU and read them rarely: accumulate losses and metrics as "
           "tensors and call .item() every N steps; use torch.where or masks instead of "
           "boolean indexing and nonzero(); order dependent work with events "
           "(cudaStreamWaitEvent, torch.cuda.Event) instead of synchronising the host.",
           call_category="synchronization", fixes=FIXES_SYNC,
           idle=IdleCause("sync-wait", "Host synchronization",
                          "the launching thread waited for the GPU (synchronize, or a "
                          "synchronous device-to-host copy), so nothing was queued when the "
                          "GPU caught up", color="#d62728")),
    Bucket("allocation", False, "allocation",
           "cudaMalloc/cudaFree or host allocation",
           "Allocate once and reuse: keep PyTorch's caching allocator on (unset "
           "PYTORCH_NO_CUDA_MEMORY_CACHING), preallocate buffers outside the loop, or use the "
           "stream-ordered allocator (cudaMallocAsync/cudaFreeAsync) instead of "
           "cudaMalloc/cudaFree, which waits for the whole device.",
           call_category="allocation", fixes=FIXES_ALLOCATION,
           idle=IdleCause("allocation", "Memory allocation",
                          "the launching thread was allocating or freeing memory (cudaFree "
                          "waits for the whole device)")),
    Bucket("blocking-copy", False, "blocking copy",
           "blocked in a copy call",
           "Take the blocking call out of the hot path: pinned memory and asynchronous copies "
           "(pin_memory(), non_blocking=True, cudaMemcpyAsync from cudaMallocHost buffers).",
           call_category="blocking-copy", fixes=FIXES_BLOCKED,
           idle=IdleCause("host-blocked", "Blocking copies",
                          "the launching thread was blocked in a copy call", color="#c2185b")),
    Bucket("module-load", False, "module loading",
           "library/module loading (lazy loading, library init)",
           "Warm up before the region that matters: run each operation once (first "
           "cuBLAS/cuDNN call, first launch of each kernel) outside it, or load modules "
           "eagerly with CUDA_MODULE_LOADING=EAGER (longer start-up, no stalls later).",
           call_category="module-load", fixes=FIXES_MODULE_LOAD,
           idle=IdleCause("module-load", "Module loading",
                          "the launching thread was loading modules (lazy loading, library "
                          "initialisation on first use)", color="#b5651d", priority=0)),
    Bucket("compilation", False, "compilation",
           "JIT compilation (torch.compile, Triton)",
           "Compile before the region that matters (one warm-up call), keep the compile "
           "caches between runs (TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR on persistent "
           "storage, torch.compiler cache artifacts), and avoid recompiles (stable shapes, "
           "dynamic=True or torch._dynamo.mark_dynamic for sizes that change).",
           fixes=FIXES_COMPILATION,
           idle=IdleCause("compilation", "Compilation",
                          "the host was compiling (JIT) before the first launch of the "
                          "compiled code", priority=0,
                          occasional_title="Recompilation inside the steady state")),
    Bucket("input", False, "input",
           "data loading before the next batch's upload",
           "Load data in background workers (DataLoader(num_workers=N, "
           "persistent_workers=True, prefetch_factor=2+)), pin memory (pin_memory=True) and "
           "copy with non_blocking=True, so the next batch is ready before the GPU needs it.",
           fixes=FIXES_INPUT,
           idle=IdleCause("input", "Input-bound (data loading)",
                          "the launching thread was outside CUDA before uploading the next "
                          "batch: data loading")),
    Bucket("host-work", False, "host work",
           "host work between launches (Python, CPU, I/O)",
           FIX_HOST_WORK, fixes=FIXES_HOST_WORK,
           idle=IdleCause("host-launch-latency", "Host work between launches",
                          "the launching thread was outside CUDA for long stretches (Python, "
                          "CPU work, I/O): the next launch came late", color="#e8890c")),
    Bucket("queued-wait", False, "queued wait",
           "queued in time, held in its stream by non-GPU work",
           "Keep non-GPU work out of the stream: a host function (cudaLaunchHostFunc, "
           "cudaStreamAddCallback) stalls every later operation of its stream until the host "
           "returns: do that work on a host thread, signalled by an event query. For a wait "
           "on another device or process, start the producer's work earlier (pipeline it).",
           idle=IdleCause("queued-wait", "Queued work held by non-GPU dependencies",
                          "the next operation was already queued, yet waited in its stream: "
                          "work there that is not GPU work held it", color="#6a3d9a")),
    Bucket("results", False, "results work",
           "host work on results just read back from the GPU",
           "Overlap the work on results with the GPU's next batch: launch batch i+1 before "
           "processing batch i's results (copied asynchronously into pinned memory and "
           "processed on another thread), or do the post-processing on the GPU.",
           fixes={
               "PyTorch": "Overlap the post-processing with the next batch: copy the outputs "
                          "into a preallocated pinned buffer (out.copy_(y, non_blocking=True) "
                          "on a side stream), record an event, launch the next batch, and "
                          "process the previous batch's results after event.synchronize(); or "
                          "keep the post-processing on the GPU (torch.softmax, torch.topk).",
               "JAX": "Overlap the post-processing with the next step: dispatch step i+1 "
                      "before reading step i's results (JAX runs asynchronously until "
                      "jax.device_get), process them on another thread, or do the "
                      "post-processing inside the jitted function (jax.nn.softmax, "
                      "jax.lax.top_k).",
               "CuPy": "Overlap the post-processing with the next batch: launch it before "
                       "reading this one's results (ndarray.get(stream=..., out=pinned) "
                       "and an event), or keep the post-processing in CuPy on the GPU.",
               "CUDA C++": "Double-buffer: launch iteration i+1 before working on iteration "
                           "i's results (cudaMemcpyAsync into pinned memory, an event, and "
                           "the host work after cudaEventSynchronize of the previous one), or "
                           "move the post-processing onto the GPU."},
           idle=IdleCause("results-work", "Host work on results",
                          "the launching thread worked outside CUDA on results it had just "
                          "read back from the GPU (a device-to-host copy of the batch's "
                          "output) before launching more work", color="#8c564b")),
    Bucket("thread-wait", False, "thread wait",
           "waiting on another thread while no thread had GPU work",
           "The GPU had nothing to do: the thread that feeds it was waiting for work (a "
           "request, an input) from another thread. That is spare capacity, not a GPU "
           "bottleneck: batch requests together (dynamic batching) or serve more clients "
           "per GPU; if a producer thread feeds this one, let it produce ahead (a deeper "
           "queue, more producers).",
           idle=IdleCause("thread-wait",
                          "Waiting for work from another thread (the GPU had nothing to do)",
                          "the launching thread was blocked waiting on another thread (a "
                          "queue, lock, condition variable, semaphore, poll or sleep) while "
                          "no launching thread had work: the GPU had nothing to do",
                          color="#9e9e9e")),
    Bucket("cross-device-wait", False, "cross-device wait",
           "queued work waiting for another GPU",
           "Pipeline the devices: split each batch into micro-batches so that one GPU works "
           "on micro-batch k+1 while the other finishes k (GPipe / 1F1B schedules), and "
           "balance the stages so that neither waits.",
           fixes={
               "PyTorch": "Pipeline the devices: split each batch into micro-batches so one "
                          "GPU works on micro-batch k+1 while the other finishes k "
                          "(torch.distributed.pipelining, GPipe / 1F1B schedules), and "
                          "balance the stages so that neither waits.",
               "CUDA C++": "Pipeline micro-batches across the devices: issue stage 1 of "
                           "micro-batch k+1 on one GPU while the other runs stage 2 of "
                           "micro-batch k (a cudaStreamWaitEvent per micro-batch, not per "
                           "batch), and balance the stages."},
           idle=IdleCause("cross-device-wait", "Waiting for another GPU",
                          "the next operation was already queued but waited for {other}'s "
                          "work (the program moves data between the GPUs)", color="#5e35b1",
                          waits_for_device="data")),
    Bucket(UNKNOWN, False, "unknown",
           "no API call matches the next operation",
           "Profile with CUDA API tracing on (nsys -t cuda) so the launch of the next "
           "operation can be seen.",
           idle=IdleCause("unknown", "Idle for unknown reasons",
                          "no CUDA API call matches the next operation", color="#7f7f7f")),
)

BY_ID = {b.id: b for b in BUCKETS}
IDS = tuple(b.id for b in BUCKETS)
BUSY_IDS = tuple(b.id for b in BUCKETS if b.busy)
IDLE_IDS = tuple(b.id for b in BUCKETS if not b.busy)
CODE = {b: i for i, b in enumerate(IDS)}
COPY_IDS = tuple(b for b in BUSY_IDS if b.startswith("copy-"))
# Busy time that is not a problem in itself: the GPU doing its job.
WORK_IDS = ("compute", "graph")
# Idle time whose cause is on the host (the CPU was doing something else than feeding
# the GPU): a verdict of one of these names what the CPU ran from the report's own
# evidence (gpugap.analysis.host_evidence).
HOST_SIDE_IDS = ("launch-bound", "compilation", "input", "host-work", "results",
                 "thread-wait")
