"""The seams, type-checked: mypy over the modules pyproject.toml's [tool.mypy] names (the
library's public functions, the command line's calls into it), run here so that CI runs
it (CI runs pytest)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.test_architecture import ROOT


@pytest.mark.slow
def test_mypy_finds_no_type_error_in_the_seams():
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert "No module named mypy" not in done.stderr, \
        "mypy is missing: pip install -e '.[test]'"
    assert done.returncode == 0, f"mypy (exit {done.returncode}):\n{done.stdout}{done.stderr}"
    assert done.stdout.startswith("Success: no issues found in "), done.stdout


def test_lazy_names_are_the_names_type_checkers_see():
    """gpugap.report exports its names lazily (__getattr__, which type checkers do not
    run) and again under TYPE_CHECKING (which only they read): the two lists agree, so a
    name added to one is typed, not Any."""
    tree = ast.parse((ROOT / "gpugap" / "report" / "__init__.py").read_text(encoding="utf-8"))
    lazy = next(ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and node.targets[0].id == "_EXPORTS")
    typed = {}
    for block in tree.body:
        if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING":
            for node in block.body:
                assert isinstance(node, ast.ImportFrom), ast.dump(node)
                typed.update({alias.asname or alias.name: node.module for alias in node.names})
    assert typed == lazy
