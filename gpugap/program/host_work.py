"""What the host's work is, read from its stacks: a CPU sample's native frames (function
and module) or a Python sample's frames (function, file, line), classified into the
kinds of work a fix can name (numpy's ufuncs, an image decoder, PyTorch's CPU
operators, the interpreter running Python, Triton's launcher, a framework's per-step
hooks...).

Pure: strings in, labels out. The frames come from gpugap.report.host; the analysis
(gpugap.analysis.host_evidence) weighs them by the GPU's idle time and picks the fix.
The patterns are matched once per distinct frame (a capture has thousands of samples
but a few hundred distinct frames).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WorkKind:
    """A kind of host work: *id*, what it is in words, and what to do when it holds the
    launching thread's process while the GPU idles (*fix*)."""

    id: str
    what: str
    fix: str


KINDS = {k.id: k for k in (
    WorkKind("numpy", "numpy array work (ufuncs, copies)",
             "move the numpy work off the launching process: into DataLoader workers "
             "(num_workers > 0) or onto the GPU as tensor ops"),
    WorkKind("image", "image decoding and transforms (PIL, libjpeg, OpenCV)",
             "decode and augment in DataLoader workers (num_workers > 0), or on the GPU "
             "(torchvision.io.decode_jpeg(device='cuda'), DALI)"),
    WorkKind("torch-cpu", "PyTorch CPU operators (libtorch_cpu)",
             "run those tensor ops on the GPU, or in DataLoader workers"),
    WorkKind("blas", "BLAS on the CPU (OpenBLAS, MKL)",
             "do the matrix work on the GPU, or in DataLoader workers"),
    WorkKind("triton-launcher", "Triton's Python launcher (triton/runtime/jit.py)",
             "launch the kernel once over all rows (a grid over the rows) instead of "
             "once per row from Python"),
    WorkKind("framework-step", "a framework's per-step Python (FSDP / DDP hooks, "
             "optimizer bookkeeping)",
             "give each step more work (a larger batch or micro-batch, fewer, larger "
             "FSDP units), or capture the step in a CUDA graph"),
    WorkKind("compiler", "a compiler (Inductor, Triton, NVRTC, LLVM, ptxas)",
             "compile once, before the measured loop, and keep shapes static"),
    WorkKind("cuda-driver", "the CUDA driver (launching and queueing work)",
             "launch fewer, larger kernels (fuse, or capture a CUDA graph)"),
    WorkKind("python", "Python code (the interpreter's eval loop)",
             "move that Python off the launching thread (DataLoader workers, a "
             "background thread for I/O), or out of the loop"),
    WorkKind("memory", "memory copies and allocation (memcpy, malloc)",
             "reuse buffers, and copy once (pinned, preallocated)"),
    WorkKind("wait", "waiting on another thread (queue, lock, condition variable)",
             "this is spare capacity, not a GPU bottleneck: look at the producer that "
             "feeds the waiting thread"),
    WorkKind("io", "file and network I/O", "read ahead in background workers, or cache"),
    WorkKind("other", "native code", "move that work off the launching thread"),
)}

# Native frames: (kind, module pattern, symbol pattern), the first match wins. A
# stack's kind is its innermost frame's that matches (after generic frames).
_NATIVE = (
    ("triton-launcher", r"__triton_launcher|triton.*cuda_utils", r""),
    ("compiler", r"libnvrtc|libnvJitLink|libLLVM|libtriton|ptxas|/cc1|libnvptxcompiler", r""),
    ("image", r"_imaging|libjpeg|libturbojpeg|libpng|libwebp|libavif|libtiff|cv2|"
              r"libopencv|image\.so|libavcodec|libnvjpeg", r""),
    ("blas", r"openblas|libmkl|libblis|libgomp", r""),
    ("numpy", r"_multiarray_umath|_umath|numpy[/.]", r""),
    ("torch-cpu", r"libtorch_cpu|libc10\.so|libtorch_python", r""),
    ("cuda-driver", r"libcuda\.so|libcudart", r""),
    ("python", r"(^|/)(lib)?python3(\.\d+)?[^/]*$", r""),
    ("wait", r"", r"futex|pthread_cond_(timed)?wait|sem_(clock|timed)?wait|epoll_wait|"
                  r"^poll$|^select$|nanosleep|pthread_mutex_lock"),
    ("io", r"", r"^(read|write|pread64|pwrite64|recv|recvfrom|send|sendto|openat|fstat)$"),
    ("memory", r"", r"memcpy|memmove|memset|malloc|calloc|realloc|^free$|mmap|munmap"),
)
# Frames that say nothing of the work: the C library's plumbing, the loader, unknown
# frames, nsys's own injection (a sample's outer frames are often these).
_GENERIC = re.compile(r"^$|\[Unknown\]|\[Broken backtraces\]|\[kernel|\[vdso\]|"
                      r"ld-linux|libc\.so|libpthread|libstdc\+\+|libgcc_s|libm\.so|"
                      r"libdl\.so")
_PROFILER = re.compile(r"libToolsInjection|libnvperf|libcupti|nsys")
_ADDRESS = re.compile(r"^(0x[0-9a-fA-F]+|\[.*\])$")

# Python frames: (kind, file pattern, function pattern): a library's frame names the
# work of the user's frame that called it.
_PYTHON = (
    ("triton-launcher", r"triton/runtime/(jit|autotuner)\.py|triton/backends/.*driver\.py",
     r""),
    ("framework-step", r"torch/distributed/(fsdp|_composable|algorithms)|"
                       r"torch/nn/parallel/distributed\.py|torch/optim/", r""),
    ("compiler", r"torch/_inductor|torch/_dynamo|triton/compiler|jax/_src/interpreters",
     r""),
    ("image", r"PIL/|torchvision/transforms|cv2/|imageio/", r""),
    ("numpy", r"numpy/", r""),
    ("wait", r"(^|/)(queue|threading|selectors|multiprocessing/(connection|queues))\.py$",
     r"^(get|wait|_wait_for_tstate_lock|join|select|recv|poll|acquire)$"),
)
# A Python frame of a library or of Python itself, not the user's code.
_LIBRARY_FILE = re.compile(r"site-packages/|dist-packages/|/lib/python3(\.\d+)?/|"
                           r"^<frozen |^<string>|^<built-in")

# The native callers of an OS wait that say what was waited for.
WAIT_CALLERS = {
    "PyThread_acquire_lock_timed": "a Python lock or queue (queue.get, Condition.wait)",
    "PyThread_acquire_lock": "a Python lock",
    "take_gil": "the GIL",
    "PyEval_RestoreThread": "the GIL",
}

MODULE_SHORT = re.compile(r"[^/]+$")


def short_module(module: str) -> str:
    """'/usr/lib/x86_64-linux-gnu/libc.so.6' -> 'libc.so.6'."""
    m = MODULE_SHORT.search(module)
    return m.group(0) if m else module


def short_symbol(symbol: str, width: int = 60) -> str:
    """A C++ symbol cut to its name where long: template arguments, then the
    parameters and a leading return type dropped."""
    s = symbol
    if len(s) > width:
        depth, out = 0, []
        for ch in s:
            if ch == "<":
                depth += 1
            elif ch == ">" and depth:
                depth -= 1
            elif depth == 0:
                out.append(ch)
        s = "".join(out)
        s = re.sub(r"\([^()]*\)( const)?$", "", s)
        s = re.sub(r"^(void|int|bool|long|auto|unsigned|char|float|double) ", "", s)
    return s if len(s) <= width else s[:width - 3] + "..."


_NATIVE_COMPILED = tuple((kind, re.compile(mod) if mod else None,
                          re.compile(sym) if sym else None) for kind, mod, sym in _NATIVE)
# A frame's module is read before its symbol (native_frames): _NATIVE lists every module
# pattern before any symbol pattern, and no entry has both (tests/test_host_evidence.py).


def _module_kind(module: str) -> str | None:
    """The kind of _NATIVE a frame of *module* has whatever its symbol, if any."""
    for kind, mod, sym in _NATIVE_COMPILED:
        if mod is not None and sym is None and mod.search(module):
            return kind
    return None


def _symbol_kind(symbol: str) -> str | None:
    """The kind of _NATIVE a frame has by its symbol alone, if any."""
    for kind, mod, sym in _NATIVE_COMPILED:
        if mod is None and sym is not None and sym.search(symbol):
            return kind
    return None


@dataclass
class NativeFrames:
    """Per distinct (symbol, module) of some stacks: ``kind`` (a KINDS id or ''),
    ``generic`` (says nothing of the work), ``profiler`` (nsys's own) and ``label``
    ('module: symbol')."""

    kind: np.ndarray
    generic: np.ndarray
    profiler: np.ndarray
    label: np.ndarray


def native_frames(symbols: list[str], modules: list[str]) -> NativeFrames:
    """Classify distinct frames (parallel lists). What a module says (nsys's own, C
    library plumbing, a kind named by the module) is read once per module: a few dozen
    modules hold thousands of distinct frames."""
    kind, generic, profiler, label = [], [], [], []
    of_module: dict[str, tuple[bool, bool, str | None, str]] = {}
    for sym, mod in zip(symbols, modules, strict=True):
        sym, mod = sym or "", mod or ""
        facts = of_module.get(mod)
        if facts is None:
            facts = of_module[mod] = (bool(_PROFILER.search(mod)), bool(_GENERIC.search(mod)),
                                      _module_kind(mod), short_module(mod))
        prof, gen, k, short = facts
        address = bool(_ADDRESS.match(sym))
        gen = gen or (address and not mod)
        k = k or _symbol_kind(sym) or ""
        # A C library frame that waits or copies is telling; its other frames are not.
        if gen and k in ("wait", "memory", "io"):
            gen = False
        kind.append(k)
        generic.append(gen or prof)
        profiler.append(prof)
        # The interpreter's own functions are one thing to a user: Python running.
        # (A frame without a symbol is its module's: 'libcuda.so.1', not 'libcuda.so.1: ?'.)
        label.append(f"{short}: Python code" if k == "python"
                     else (short or "?") if address or not sym
                     else f"{short}: {short_symbol(sym)}")
    return NativeFrames(np.asarray(kind, dtype=object), np.asarray(generic, dtype=bool),
                        np.asarray(profiler, dtype=bool), np.asarray(label, dtype=object))


@dataclass
class StackKinds:
    """Per stack (a sample's id): its ``label`` (the innermost frame that says what the
    work is), its ``kind`` (a KINDS id) and whether nsys's own code ran it
    (``profiler``)."""

    ids: np.ndarray
    label: np.ndarray
    kind: np.ndarray
    profiler: np.ndarray


# Kinds that name a stack wherever they appear in it (a launcher that calls the driver
# is the launcher's work; a compiler calling memcpy is compiling).
_ANYWHERE = ("triton-launcher", "compiler")


def classify_stacks(ids: np.ndarray, frame: np.ndarray, frames: NativeFrames
                    ) -> StackKinds:
    """Each stack's work, from its frames: *ids* (the stack of each frame row, sorted,
    frames of a stack innermost first) and *frame* (the row's distinct frame, an index
    into *frames*). The innermost frame that is not generic names it; the interpreter
    running Python when that is all there is; kinds of _ANYWHERE win wherever they are."""
    if not ids.size:
        z = np.zeros(0, dtype=object)
        return StackKinds(np.zeros(0, np.int64), z, z, np.zeros(0, bool))
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    stack = np.cumsum(np.r_[False, ids[1:] != ids[:-1]])
    n = starts.size
    telling = ~frames.generic[frame]
    # First telling row of each stack (n: none).
    rows = np.arange(ids.size)
    first = np.full(n, ids.size, dtype=np.int64)
    np.minimum.at(first, stack[telling], rows[telling])
    has = first < ids.size
    label = np.full(n, "?", dtype=object)
    kind = np.full(n, "other", dtype=object)
    label[has] = frames.label[frame[first[has]]]
    k = frames.kind[frame[first[has]]]
    kind[has] = np.where(k == "", "other", k)
    # Stacks of generic frames only: the innermost frame names them.
    label[~has] = frames.label[frame[starts[~has]]]
    rk = frames.kind[frame]
    for special in _ANYWHERE:
        hit = np.zeros(n, dtype=bool)
        hit[stack[rk == special]] = True
        kind[hit] = special
    profiler = np.zeros(n, dtype=bool)
    profiler[stack[frames.profiler[frame]]] = True
    return StackKinds(ids[starts], label, kind, profiler)


def python_kind(file: str, function: str) -> str | None:
    """The kind of work a Python frame of a library names (None: none known)."""
    for kind, f, fn in _PYTHON:
        if re.search(f, file) and (not fn or re.search(fn, function)):
            return kind
    return None


def is_user_file(file: str) -> bool:
    """A Python frame of the user's code (not a library's, not Python's own)."""
    return bool(file) and not _LIBRARY_FILE.search(file)


def python_stack(files: list[str], functions: list[str], lines: list[int]
                 ) -> tuple[str, str]:
    """One Python stack (innermost first) -> (its label: the user's innermost
    'file:function:line', else the innermost frame's; its kind: the innermost library
    frame's that is known, else 'python')."""
    kind = None
    for f, fn in zip(files, functions, strict=True):
        kind = python_kind(f, fn)
        if kind:
            break
    label = None
    for f, fn, ln in zip(files, functions, lines, strict=True):
        if is_user_file(f):
            label = f"{short_path(f)}:{fn}:{ln}"
            break
    if label is None and files:
        label = f"{short_path(files[0])}:{functions[0]}:{lines[0]}"
    return label or "?", kind or "python"


def short_path(file: str) -> str:
    """A Python file as people name it: from its package ('torch/nn/modules/linear.py')
    when it is in site-packages, else its last two parts."""
    m = re.search(r"(?:site|dist)-packages/(.+)$", file)
    if m:
        return m.group(1)
    parts = file.rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) > 2 else file


def wait_caller(symbols: list[str], modules: list[str]) -> str | None:
    """What an OS wait's stack (innermost first) waited for: a known caller
    (WAIT_CALLERS), else its first frame beyond the wait and the C library."""
    for sym, _ in zip(symbols, modules, strict=True):
        if sym in WAIT_CALLERS:
            return WAIT_CALLERS[sym]
    for sym, mod in zip(symbols, modules, strict=True):
        if _GENERIC.search(mod or "") or _ADDRESS.match(sym or "") or \
                _PROFILER.search(mod or ""):
            continue
        return f"{short_module(mod)}: {short_symbol(sym)}"
    return None
