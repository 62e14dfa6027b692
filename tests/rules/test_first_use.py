"""first-use: slow iterations that ran new work, named as the first use of that work.
Fires on cuDNN's benchmark mode autotuning each new input size (shared/external batch4
cudnn_varshape: steps 8, 16 and 24), on torch.compile recompiling for a new batch size
(the corpus's pt-dynamic-compile) and on XLA compiling a new executable per shape
(jax-recompile); silent where an occasional cost runs the same work as the other
iterations (a checkpoint every 10 steps: pt-checkpoint) and on a loop without one."""

from __future__ import annotations

from tests.conftest import analyze_report
from tests.rules.kit import (
    Fires,
    Silent,
    rule_tests,
)

RULE = "first-use"

FIRES = [
    Fires("corpus:ext-b4-cudnn_varshape", "autotuning",
          share=(4.7, 8.4), fix="cudnn.benchmark autotunes every"),
    Fires("corpus:pt-dynamic-compile", "compilation",
          share=(18.2, 31), fix="torch.compile recompiles for"),
    Fires("corpus:jax-recompile", "compilation", share=(32, 53.9), fix="jit compiles a"),
]

SILENT = [
    Silent("corpus:pt-checkpoint"),
    Silent("corpus:ext-b3-checkpoint_train"),
    Silent("captures/train-workers0"),
]


test_fires, test_stays_silent, test_messages_match_the_snapshot, \
    test_findings_are_marked = rule_tests(RULE, FIRES, SILENT)


def test_the_autotuned_sizes_leave_the_steady_state():
    """The README's truth: steps 8, 16 and 24 (first use of sizes 192, 224, 256) take
    517-702 ms on the host, with ~270 GPU operations instead of ~34 and dozens of
    synchronizations; the other steps are at least 96.9% busy. They are one-time costs
    (warm-up), out of the steady state the verdict judges, and the verdict names them."""
    a = analyze_report("corpus:ext-b4-cudnn_varshape")
    [f] = a.findings_of(RULE)
    assert f.phase == "warm-up" and f.evidence["iterations"] == ["step 8", "step 16",
                                                                   "step 24"]
    assert all(s >= 30 for s in f.evidence["synchronizations"])
    assert min(f.evidence["launches"]) > 5 * f.evidence["median_launches"]
    dev = a.accounting.devices[0]
    assert {8, 16, 24} == set(dev.phases.first_use.tolist())
    assert not {8, 16, 24} & set(dev.phases.steady_iterations.tolist())
    assert a.verdict.busy_pct >= 96.9
    assert any("step 8, step 16, step 24" in x["headline"] for x in a.verdict.also)
    assert "every" not in " ".join(x["headline"] for x in a.verdict.also)
