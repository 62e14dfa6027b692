"""first-use: slow iterations that ran new work: the warm-up of that work, not a period.

An occasional cost is one of two things. On the same work as the other iterations (a
checkpoint, a log, a garbage collection) it recurs, and may recur every N iterations.
In an iteration that runs different GPU work from the others (kernels or CUDA graphs
first seen there, far more operations, the synchronizations of an autotuner, compilers
running), it is the first use of that work: a new input shape that cuDNN's benchmark
mode autotunes, that torch.compile or XLA compiles again, whose kernels lazy loading
loads. It happens once per new shape or path, whatever period it seems to have.

The accounting decides which iterations those are (gpugap.accounting.phases.first_uses)
and leaves them out of the steady state, as it does the warm-up iterations; this rule
says what they were and what to do. Cause, from their evidence: ``compilation``
(compilers ran for at least a third of their extra time), ``autotuning`` (more host
synchronizations than the other iterations, or several times their launches: cuDNN's,
XLA's or Triton's autotuner timing candidates), ``module-load`` (kernels loaded on first
use), else ``new-work``. Cost: the idle time of those iterations, every idle bucket,
settled before launch-gap (what the GPU waited for there is the first use); a one-time
cost (the finding's phase is warm-up), named in the verdict beside the steady state it
left out.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.buckets import IDLE_IDS
from gpugap.accounting.labels import ranges_of
from gpugap.report.trace import Trace
from gpugap.rules.base import Claim, Context, Finding, Rule
from gpugap.rules.model import Band, Cause, Severity
from gpugap.units import fmt_ns

FIX_AUTOTUNING = (
    "An autotuner times candidate kernels for each new input shape on its first use: warm "
    "each shape up before the loop that matters, pad or bucket inputs to a few sizes, or "
    "turn autotuning off where shapes keep changing.")
FIXES_AUTOTUNING = {
    "PyTorch": "cudnn.benchmark autotunes every new input shape on its first use: warm each "
               "shape up before the loop that matters, pad or bucket inputs to a few sizes, "
               "or set torch.backends.cudnn.benchmark = False when shapes keep changing.",
    "JAX": "XLA autotunes each new executable (a new input shape): pad or bucket inputs to a "
           "few fixed shapes, warm each up first, and keep the persistent compilation cache "
           "(jax_compilation_cache_dir) between runs.",
    "CUDA C++": "Choose the algorithm once per shape (cudnnFind* / cublasLt heuristics) and "
                "cache it; warm each shape up before the loop that matters.",
}
FIX_COMPILATION = (
    "The compiler ran again for new input shapes: pad or bucket inputs to a few sizes and "
    "warm each up before the loop that matters, or compile for dynamic shapes.")
FIXES_COMPILATION = {
    "PyTorch": "torch.compile recompiles for each new shape: mark the changing dimension "
               "dynamic (torch._dynamo.mark_dynamic(x, 0), or torch.compile(dynamic=True)), "
               "or pad or bucket inputs to a few sizes and warm each up before the loop.",
    "JAX": "jit compiles a new executable for each new input shape: pad or bucket inputs to "
           "a few fixed shapes and warm each up first; keep compiled executables in the "
           "persistent cache (jax_compilation_cache_dir).",
}
FIX_MODULE_LOAD = (
    "Lazy loading loads a kernel's module on its first launch: warm up every path (each "
    "shape, each branch) before the region that matters, or load modules eagerly "
    "(CUDA_MODULE_LOADING=EAGER).")
FIX_NEW_WORK = (
    "New kernels ran for the first time in these iterations (a new shape or code path): "
    "warm each path up before the region that matters, or keep shapes fixed.")
CAUSES = (
    Cause("autotuning", "an autotuner timing candidates for a new shape", FIX_AUTOTUNING,
          title="Autotuning on the first use of new shapes", fixes=FIXES_AUTOTUNING,
          call_category="synchronization", priority=-1, periodic=False),
    Cause("compilation", "compilers running again for new shapes or code", FIX_COMPILATION,
          title="Recompilation for new shapes", fixes=FIXES_COMPILATION, priority=-1,
          periodic=False),
    Cause("module-load", "modules loaded on the first use of kernels", FIX_MODULE_LOAD,
          title="Module loading on first use", call_category="module-load", priority=-1,
          periodic=False),
    Cause("new-work", "new kernels running for the first time", FIX_NEW_WORK,
          title="First use of new work", priority=-1, periodic=False),
)


def detect(trace: Trace, config: Mapping[str, float], context: Context) -> list[Finding]:
    findings: list[Finding] = []
    if context.scope.whole_range:
        # A range of one instance is one scope: a recompile inside it is its
        # compilation (launch-gap), as the range's breakdown counts it.
        return findings
    program = context.accounting.program
    for device, dev in context.accounting.devices.items():
        ph = dev.phases
        it, ev = ph.iterations, ph.first_use_evidence
        if it is None or ev is None or not ph.first_use.size:
            continue
        lo, hi = ph.iteration_windows(ph.first_use)
        windows = tl.union(lo, hi)
        extra = np.asarray(ev["extra_ns"])
        # Compilers the program model saw, or the accounting's compilation (a JIT's first
        # launches: Inductor compiling in the process, no compiler process to see).
        compiled = max(int(np.sum(ev["compile_ns"])), dev.totals_in(windows)["compilation"])
        cause = _cause(ev, compiled)
        labels = [it.labels[i] if it.labels else f"#{i}" for i in ph.first_use.tolist()]
        what = _what(cause, program, ev, compiled)
        steady = int(len(ph.steady_iterations) + ph.first_use.size)
        findings.append(Finding(
            rule=RULE.id, cause=cause, severity=Severity.INFO,
            start_ns=int(windows[0][0]), end_ns=int(windows[1][-1]),
            cost_ns=int(tl.total(windows)), at_ns=int(windows[0][0]),
            phase="warm-up",
            message=message(iterations=labels, steady=steady, what=what,
                            extra_ns=int(extra.sum()),
                            new_ops=int(np.sum(ev["new_launches"]))),
            fix=RULE.causes[cause].fix_for(context.framework), device=int(device),
            count=int(ph.first_use.size), ranges=ranges_of(trace, lo),
            marks=[Band(int(a), int(b), int(device), label="first use", cause=cause)
                   for a, b in zip(lo.tolist(), hi.tolist(), strict=True)],
            claim=Claim(int(device), windows, IDLE_IDS),
            evidence={"iterations": labels, "of_iterations": steady, "title_detail": what,
                      "window_ns": tl.total(windows),
                      "inside_loop": True, "compiled_ns": compiled,
                      "note": "first use in " + ", ".join(labels[:3])
                      + (", ..." if len(labels) > 3 else ""), **ev}))
    return findings


def _cause(ev: dict, compiled: int) -> str:
    """The cause of the first uses (module doc), *compiled*: the time compiling in them."""
    extra = np.asarray(ev["extra_ns"])
    syncs = np.asarray(ev["synchronizations"])
    launches = np.asarray(ev["launches"])
    if compiled >= extra.sum() / 3:
        return "compilation"
    if (syncs >= ev["median_synchronizations"] + 3).any() or \
            (launches >= 3 * max(ev["median_launches"], 1.0)).all():
        return "autotuning"
    if np.sum(ev["module_loads"]) > 0:
        return "module-load"
    return "new-work"


def _what(cause: str, program, ev: dict, compiled: int) -> str:
    """What the iterations show: 'cuDNN autotuning: 849 GPU launches instead of 77, 168
    synchronizations'."""
    libraries = program.libraries if program is not None else []
    frameworks = program.frameworks if program is not None else []
    launches = int(np.median(ev["launches"]))
    usual = int(ev["median_launches"])
    if cause == "autotuning":
        who = ("cuDNN" if "cuDNN" in libraries else "XLA" if "XLA" in frameworks
               else "Triton" if "Triton" in frameworks else "")
        return (f"{who + ' ' if who else ''}autotuning: {launches} GPU launches instead "
                f"of {usual}, {int(np.median(ev['synchronizations']))} synchronizations")
    if cause == "compilation":
        return f"compiling {fmt_ns(compiled)}"
    if cause == "module-load":
        return f"{int(np.sum(ev['module_loads']))} module loads"
    return f"{launches} GPU launches instead of {usual}"


def message(*, iterations: list[str], steady: int, what: str, extra_ns: int,
            new_ops: int) -> str:
    shown = ", ".join(iterations[:6]) + (", ..." if len(iterations) > 6 else "")
    return (f"{len(iterations)} of the {steady} iterations after the warm-up ({shown}) ran "
            f"work first seen there ({new_ops} launches of a kernel, a grid or a graph not "
            f"run before; {what}) and took {fmt_ns(extra_ns)} more than a median iteration "
            "in all: the first use of that work (a new shape or path), a one-time cost "
            "each time, not a recurring one; left out of the steady state.")


RULE = Rule(
    id="first-use",
    title="First use of new work inside the loop (new shapes, new code)",
    thresholds={},
    rationale=("A cost on the first use of new work happens once per new shape or path; "
               "called recurring, its fix (move work off the launching thread, save less "
               "often) does not apply, and the real one (warm each shape up, bucket shapes, "
               "dynamic shapes, no autotuning for changing shapes) is missed."),
    fix=FIX_NEW_WORK,
    causes=CAUSES,
    detect=detect,
    color="#558b2f",
    priority=-1,
)
