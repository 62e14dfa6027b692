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

    def fix_for(self, framework: str | None) -> str:
        return fix_for(self.fix, self.fixes, framework)


# Idle time before an operation that has no launching call in the report.
UNKNOWN = "unknown"

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
    Bucket("launch-bound", False, "launch-bound",
           "the host launched work back to back, but each piece finished before the next "
           "arrived: kernels too small for the launch overhead",
           "Launch fewer, larger kernels: capture the step in a CUDA graph "
           "(torch.cuda.graphs / torch.compile(mode='reduce-overhead')), fuse element-wise "
           "work (torch.compile), batch small operations, or use a bigger batch.",
           call_category="launch"),
    Bucket("synchronization", False, "synchronization",
           "the host waited for the GPU (stream/device/event synchronize, or a synchronous "
           "device-to-host copy such as .item(), .cpu(), nonzero() or boolean-mask "
           "indexing), so nothing was queued when the GPU caught up",
           "Keep values on the GPU and read them rarely: accumulate losses/metrics as "
           "tensors and call .item() every N steps; use torch.where or masks instead of "
           "boolean indexing and nonzero(); order work with events, not host syncs.",
           call_category="synchronization"),
    Bucket("allocation", False, "allocation",
           "the host was in cudaMalloc/cudaFree or a host allocation (cudaFree waits for the "
           "whole device)",
           "Allocate once and reuse: keep PyTorch's caching allocator on (unset "
           "PYTORCH_NO_CUDA_MEMORY_CACHING), preallocate buffers outside the loop, or use "
           "the stream-ordered allocator (cudaMallocAsync).",
           call_category="allocation"),
    Bucket("blocking-copy", False, "blocking copy",
           "the host was blocked in a copy call (pageable host memory, or a synchronous copy)",
           "Use pinned host memory and asynchronous copies (pin_memory(), "
           "non_blocking=True, cudaMemcpyAsync from cudaMallocHost buffers).",
           call_category="blocking-copy"),
    Bucket("module-load", False, "module loading",
           "the host was loading kernels or libraries (CUDA lazy loading, library "
           "initialisation) or JIT-linking code",
           "Warm up before the region that matters (run each operation once), or set "
           "CUDA_MODULE_LOADING=EAGER to load everything at start-up.",
           call_category="module-load"),
    Bucket("compilation", False, "compilation",
           "the host was compiling (torch.compile/Inductor/Triton or another JIT) before "
           "the first launch of the compiled code",
           "Compile outside the measured region (warm up once), keep compile caches "
           "between runs (TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR on persistent storage), "
           "and avoid recompiles (stable shapes, dynamic=True, mark_dynamic)."),
    Bucket("input", False, "input",
           "the host was outside CUDA before uploading the next batch: data loading",
           "Load data in background workers (DataLoader num_workers > 0, "
           "persistent_workers=True, prefetch_factor), pin memory, and copy with "
           "non_blocking=True so the next batch is ready before it is needed."),
    Bucket("host-work", False, "host work",
           "the host was outside CUDA for long stretches between launches (Python, CPU "
           "compute, I/O)",
           "Move CPU work off the launching thread or out of the loop, or queue more GPU "
           "work ahead of it so the GPU has something to do meanwhile."),
    Bucket("queued-wait", False, "queued wait",
           "the next operation was already queued, but a dependency that is not GPU work "
           "held it (a host function, an event of another device or process)",
           "Keep host functions out of streams (do that work on a host thread) and start "
           "producers on other devices earlier."),
    Bucket("results", False, "results work",
           "the host worked on results it had just read back from the GPU (after a "
           "device-to-host copy of a batch's output, before the next launch)",
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
                           "move the post-processing onto the GPU."}),
    Bucket("thread-wait", False, "thread wait",
           "the launching thread waited on another thread (a queue, lock, condition "
           "variable, semaphore, poll or sleep) while no launching thread had work for the "
           "GPU: nothing to do, not a GPU bottleneck",
           "The GPU had nothing to do: the thread that feeds it was waiting for work (a "
           "request, an input) from another thread. That is spare capacity, not a GPU "
           "bottleneck: batch requests together (dynamic batching) or serve more clients "
           "per GPU; if a producer thread feeds this one, let it produce ahead (a deeper "
           "queue, more producers)."),
    Bucket("cross-device-wait", False, "cross-device wait",
           "the next operation was queued but waited for another GPU's work (its peer "
           "copy or an event of that device)",
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
                           "batch), and balance the stages."}),
    Bucket(UNKNOWN, False, "unknown",
           "the next operation has no launching call in the report",
           "Profile with CUDA API tracing (nsys -t cuda) so launches can be matched."),
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
