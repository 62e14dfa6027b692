"""Every cause's fix in the words of each framework gpugap names (gpugap.rules.model.
Cause.fix_for): none tells a program of one framework to use another's API, so a C++
program is never told about torch streams, nor a JAX one about DataLoader."""

from __future__ import annotations

import re

import pytest

from gpugap.program.model import FIX_LANGUAGES
from gpugap.rules import select
from tests.conftest import analyze_report

# What only one framework's user can act on.
API_OF = {"PyTorch": re.compile(r"\btorch\b|DataLoader|pin_memory", re.IGNORECASE),
          "JAX": re.compile(r"\bjax\b|\bXLA\b", re.IGNORECASE),
          "CuPy": re.compile(r"\bcupy\b|\bcp\.cuda\b", re.IGNORECASE)}
# What only a compiled CUDA C++ program can act on.
CPP_ONLY = re.compile(r"\bnvcc\b|--default-stream")
PYTHON = ("JAX", "PyTorch", "CuPy", "CUDA Python")
CAUSES = [(rule.id, cause) for rule in select(None) for cause in rule.causes.values()]


@pytest.mark.parametrize("framework", FIX_LANGUAGES)
def test_no_fix_speaks_another_framework_s_api(framework):
    wrong = [(rule, cause.id, other) for rule, cause in CAUSES
             for other, api in API_OF.items()
             if other != framework and api.search(cause.fix_for(framework))]
    if framework in PYTHON:
        wrong += [(rule, cause.id, "CUDA C++") for rule, cause in CAUSES
                  if CPP_ONLY.search(cause.fix_for(framework))]
    assert wrong == []


# Real captures of each language: every finding's fix, start-up and tail included,
# speaks the program's own (the rules pick it with Cause.fix_for).
PROGRAMS = [("corpus:cpp-default-stream", "CUDA C++"), ("corpus:cupy-streams-overlap", "CuPy"),
            ("corpus:jax-host-input", "JAX"), ("corpus:cudapy-smallgrid", "CUDA Python"),
            ("default-stream-bad", "CUDA Python"), ("corpus:cpp-cublas-churn", "CUDA C++")]


@pytest.mark.parametrize(("name", "framework"), PROGRAMS)
def test_findings_speak_the_program_s_framework(name, framework):
    analysis = analyze_report(name)
    assert analysis.program.framework == framework
    assert analysis.findings
    wrong = [(f.id, other) for f in analysis.findings for other, api in API_OF.items()
             if other != framework and api.search(f.fix)]
    assert wrong == []


def test_a_python_program_is_not_told_to_recompile_with_nvcc():
    """The default-stream puzzle is a cuda-python program: its streams' serialisation
    is fixed with non-blocking streams or cuda-python's per-thread default stream, not
    an nvcc flag."""
    (legacy,) = analyze_report("default-stream-bad", "measured").findings_of(
        "serialized-streams", "legacy-default-stream")
    assert "CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1" in legacy.fix
    assert "nvcc" not in legacy.fix
