"""gpugap on the pre-registered corpus (tests/corpus): 37 real programs (PyTorch, JAX,
CuPy, Triton, cuda-python, C++; one and two GPUs), each with expectations written before
gpugap analyzed it (README.md there: the formats, the vocabulary; MANIFEST.md: the
programs and every change made after gpugap's output was seen), and a sealed split that
no test scores (README.md, rule 5).

Every expectation is scored met or missed (tests/corpus/score.py, which prints them all:
``python tests/corpus/score.py --all``); the dev and held-out splits are reported apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpugap.analysis.claims import contradictions
from tests.corpus import score

# The issues' bar: >= 90% of the expectations met (issue 21 on the program line,
# iterations, phases and ranking; issue 22 on all of them).
TARGET = 0.90


# Per program: (device, phase, the findings' costs, the phase's wall time).
SCOPES: dict[str, list[tuple[int, str, int, int]]] = {}
# Per program: what gpugap.analysis.claims found said against itself (issue 38).
CONTRADICTIONS: dict[str, list[str]] = {}


def _costs(name: str, analysis) -> None:
    rows = []
    for device, dev in analysis.accounting.devices.items():
        spans = dev.phases.spans
        walls = {"start-up": spans["warm-up"][1] - spans["start-up"][0],
                 "steady": spans["steady"][1] - spans["steady"][0],
                 "tail": spans["tail"][1] - spans["tail"][0]}
        for phase, wall in walls.items():
            cost = sum(f.cost_ns for f in analysis.findings
                       if f.device == device and f.phase == phase)
            rows.append((device, phase, int(cost), int(wall)))
    SCOPES[name] = rows
    CONTRADICTIONS[name] = contradictions(analysis)


@cache
def outcomes() -> tuple[score.Outcome, ...]:
    cache_dir = Path(tempfile.gettempdir()) / "gpugap-corpus"
    cache_dir.mkdir(exist_ok=True)
    return tuple(score.run(score.programs(None), cache_dir, inspect=_costs))


def _report(group: list[score.Outcome]) -> str:
    return "\n".join(f"{o.program}: {c.key} want {c.want!r} got {c.got!r}"
                     for o in group for c in o.checks if not c.met)


@pytest.mark.slow
def test_every_program_is_captured_and_analyzed():
    done = outcomes()
    # 43 written here (dev, held-out), 35 from shared/external (external), the public
    # programs (public; their held-out third is not opened here).
    assert len(done) == len(score.programs(None)) >= 78
    assert {"dev", "held-out", "external"} <= {o.split for o in done}
    assert [o.program for o in done if o.error] == []


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "held-out", "external"])
def test_expectations_met(split, capsys):
    group = [o for o in outcomes() if o.split == split]
    met, total = score.totals(group)
    sights = [x for x in map(score.first_sight, group) if x is not None]
    with capsys.disabled():
        print(f"\ncorpus {split}: {met}/{total} expectations met "
              f"({100 * met / total:.1f}%) over {len(group)} programs; the verdict right "
              f"at first sight on {sum(sights)} of {len(sights)}")
    assert total > 100
    assert met / total >= TARGET, _report(group)


# Healthy controls (expected.toml: silent.no_warnings), and the two that gpugap warns
# about, for reasons it shows: their expectation stays as registered (MANIFEST.md).
CONTROLS = ["cpp-graph-replay", "cpp-mallocasync", "cpp-pinned", "cpp-threads-streams",
            "cupy-streams-overlap", "jax-jit-train", "jax-sharded-2gpu", "pt-cudnn-bench",
            "pt-eval-overlap",
            # shared/external's healthy programs (their READMEs: nothing to fix)
            "ext-b1-ddp_overlap", "ext-b1-mlp_graph", "ext-b2-healthy_gemm",
            "ext-b2-stream_pipeline", "ext-b3-jax_train", "ext-b4-mallocasync_train",
            "ext-ddp-balanced_rank0", "ext-ddp-balanced_rank1", "ext-ddp-straggler_rank1",
            # the public split's (a program nobody here wrote)
            "pub-cuda-matrixmul",
            # captured again with the host's evidence (issue 44)
            "host-healthy-gemm", "host-mallocasync-train"]
# Healthy controls gpugap once warned about (issue 39 made them context: a library
# kernel's grid, a few percent of skew between ranks); none is left.
WARNED: dict[str, str] = {}


@pytest.mark.slow          # outcomes(): the whole corpus analyzed
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=WARNED[n]))
    if n in WARNED else n for n in CONTROLS])
def test_healthy_control_gets_no_warning(name):
    (outcome,) = [o for o in outcomes() if o.program == name]
    (check,) = [c for c in outcome.checks if c.key == "silent.no_warnings"]
    assert check.met, check.got


@pytest.mark.slow          # outcomes(): the whole corpus analyzed
def test_the_sealed_split_is_complete_and_never_scored():
    """The sealed split (README.md, rule 5): every program captured and pre-registered
    (its capture, manifest, expectation, truth script and figures committed), and no
    scoring here looks at gpugap's output on it."""
    sealed = score.programs(score.SEALED)
    assert len(sealed) >= 6
    for name in sealed:
        folder = score.PROGRAMS / name
        assert all((folder / f).is_file() for f in ("program.toml", "expected.toml",
                                                   "truth.py", "truth.json")), name
        assert (score.CAPTURES / f"{name}.sqlite.xz").is_file(), name
        assert (score.CAPTURES / f"{name}.manifest.json").is_file(), name
    assert not set(sealed) & {o.program for o in outcomes()}
    assert not set(sealed) & set(score.programs(None))


@pytest.mark.slow          # outcomes(): the whole corpus analyzed
def test_the_controls_are_the_registered_ones():
    registered = sorted(o.program for o in outcomes() for c in o.checks
                        if c.key == "silent.no_warnings")
    assert registered == sorted(CONTROLS)


@pytest.mark.slow          # outcomes(): the whole corpus analyzed
def test_finding_costs_never_exceed_their_scope():
    """In every program, on every device: the findings of each phase (start-up with its
    warm-up, steady state, tail) cost at most the phase's wall time (one accounting, no
    time claimed twice)."""
    outcomes()
    assert len(SCOPES) == len(score.programs(None))
    over = [(name, *row) for name, rows in SCOPES.items() for row in rows
            if row[2] > row[3]]
    assert over == []
    assert all(np.isfinite([row[2] for rows in SCOPES.values() for row in rows]))


@pytest.mark.slow          # outcomes(): the whole corpus analyzed
def test_no_claim_contradicts_another():
    """The claim checker (gpugap.analysis.claims) finds nothing on any corpus capture."""
    outcomes()
    assert {name: found for name, found in CONTRADICTIONS.items() if found} == {}


@pytest.mark.slow
def test_truth_scripts_still_print_their_committed_figures(tmp_path):
    """Each truth script (plain sqlite3/numpy, no gpugap) run on its capture prints
    exactly the truth.json committed with the expectation: the figures the expectations
    were written from stay reproducible through any change to the shared helpers."""
    cache_dir = Path(tempfile.gettempdir()) / "gpugap-corpus"
    cache_dir.mkdir(exist_ok=True)
    # The sealed split's too: a truth script reads the capture alone, never gpugap's
    # output, so checking it leaves the split sealed.
    names = score.programs(None) + [n for s in score.UNOPENED for n in score.programs(s)]
    for name in names:
        # The scripts read the capture's manifest beside it.
        (tmp_path / f"{name}.sqlite").symlink_to(score.capture_path(name, cache_dir))
        (tmp_path / f"{name}.manifest.json").symlink_to(
            score.CAPTURES / f"{name}.manifest.json")

    def run(name: str) -> tuple[str, str, str]:
        done = subprocess.run(
            [sys.executable, str(score.PROGRAMS / name / "truth.py"),
             str(tmp_path / f"{name}.sqlite")], capture_output=True, text=True, check=False)
        return name, done.stdout, done.stderr

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        printed = list(pool.map(run, names))
    assert len(printed) == len(names)
    differ = [(name, err[-300:]) for name, out, err in printed
              if out != (score.PROGRAMS / name / "truth.json").read_text()]
    assert differ == []
