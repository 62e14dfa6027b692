"""gpugap.scan, the batched scan the rules work through: whatever a batch holds, the
answers are those of one pass over every row; and no rule module batches on its own."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from gpugap import scan

RULES = Path(__file__).resolve().parent.parent / "gpugap" / "rules"
SIZES = (1, 3, 7, 1 << 18)


@pytest.mark.parametrize("rows", SIZES)
def test_batches_cover_the_rows_in_order(rows, monkeypatch):
    monkeypatch.setattr(scan, "ROWS", rows)
    for n in (0, 1, 2, 10, 17):
        parts = scan.batches(n)
        assert [i for p in parts for i in range(p.start, p.stop)] == list(range(n))
        assert all(p.stop - p.start <= rows for p in parts)
        assert scan.each(n, lambda p: (p.start, p.stop)) == [(p.start, p.stop)
                                                             for p in parts]


@pytest.mark.parametrize("rows", SIZES)
def test_fill_fold_and_reduceat_equal_one_pass(rows, monkeypatch):
    monkeypatch.setattr(scan, "ROWS", rows)
    rng = np.random.default_rng(41)
    for _ in range(40):
        n = int(rng.integers(1, 60))
        values = rng.integers(-1000, 1000, n)
        assert np.array_equal(scan.fill(n, lambda p, v=values: v[p] * 2, np.int64),
                              values * 2)
        # A sweep: the running maximum, the batch before's last carried in.
        out = np.empty(n, dtype=np.int64)

        def running(p, before, v=values, out=out):
            out[p] = np.maximum(np.maximum.accumulate(v[p]), before)
            return int(out[p.stop - 1])

        last = scan.fold(n, running, np.iinfo(np.int64).min)
        assert np.array_equal(out, np.maximum.accumulate(values))
        assert last == values.max()
        starts = np.r_[0, np.sort(rng.choice(np.arange(1, n), min(n - 1, 5),
                                             replace=False))] if n > 1 else np.r_[0]
        for ufunc in (np.add, np.minimum, np.maximum):
            got = scan.reduceat(ufunc, lambda p, v=values: v[p], n, starts)
            assert np.array_equal(got, ufunc.reduceat(values, starts))


def test_by_weight_cuts_consecutive_items_of_bounded_weight():
    rng = np.random.default_rng(8)
    for _ in range(50):
        weights = rng.integers(1, 20, int(rng.integers(0, 40)))
        limit = int(rng.integers(1, 50))
        parts = scan.by_weight(weights, limit)
        assert [i for p in parts for i in range(p.start, p.stop)] == list(range(weights.size))
        for p in parts:
            # At most the limit, or a single item heavier than it.
            assert weights[p].sum() <= limit or p.stop - p.start == 1
    assert scan.each(scan.by_weight(np.zeros(0, np.int64)), len) == []


@pytest.mark.parametrize("processes", [1, 2, None])
def test_spread_covers_the_items_in_order(processes):
    runs = scan.spread(range(3, 40), lambda run: list(run), processes=processes)
    assert [i for run in runs for i in run] == list(range(3, 40))
    assert scan.spread(range(5, 5), lambda run: list(run), processes=processes) == []


def _stepped_ranges(tree: ast.AST) -> list[int]:
    """Lines of ``range(a, b, step)``: a loop over batches of rows."""
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id == "range" and len(n.args) == 3]


def _batch_constants(tree: ast.Module) -> list[str]:
    """Module-level names of a batch size (CHUNK, BATCH, PART, ROWS in the name)."""
    names = []
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        names += [t.id for t in targets if isinstance(t, ast.Name)
                  and any(w in t.id.upper() for w in ("CHUNK", "BATCH", "_PART", "ROWS"))]
    return names


def _memory_and_forks(tree: ast.AST) -> list[str]:
    """What a module imports of gpugap.memory's give_back or of gpugap.forkjoin."""
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module == "gpugap.memory":
            found += [a.name for a in n.names if a.name == "give_back"]
        elif isinstance(n, ast.ImportFrom) and n.module == "gpugap":
            found += [a.name for a in n.names if a.name in ("forkjoin", "memory")]
        elif isinstance(n, ast.Import):
            found += [a.name for a in n.names if a.name in ("gpugap.forkjoin",
                                                             "gpugap.memory")]
    return found


def test_no_rule_module_batches_on_its_own():
    """Chunk sizes, batch loops, the memory given back between batches and forked
    pieces belong to gpugap.scan: a rule module says what it computes from some rows.
    (rules/__init__.py runs the rules and gives their memory back after each.)"""
    offenders = {}
    for path in sorted(RULES.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = [f"range(a, b, step) at line {line}" for line in _stepped_ranges(tree)]
        found += [f"batch constant {name}" for name in _batch_constants(tree)]
        if path.name != "__init__.py":
            found += [f"imports {name}" for name in _memory_and_forks(tree)]
        if found:
            offenders[path.name] = found
    assert not offenders, offenders


def test_the_check_sees_a_hand_rolled_batch_loop():
    """The check above is not blind: a rule written the old way is caught."""
    old = ast.parse("from gpugap.memory import give_back\n_CHUNK = 1 << 18\n"
                    "def detect(n):\n    for i0 in range(0, n, _CHUNK):\n"
                    "        give_back()\n")
    assert _stepped_ranges(old) == [4]
    assert _batch_constants(old) == ["_CHUNK"]
    assert _memory_and_forks(old) == ["give_back"]
