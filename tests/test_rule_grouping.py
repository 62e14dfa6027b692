"""The numpy helpers the rules fold findings with give pandas' answers: groups in order
of first appearance (groupby(sort=False)), rows missing a key in none, and the orders
of ties of the sorts the rules copied."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpugap.report.table import Table, as_labels
from gpugap.rules.evidence import group_ids, rows_by_group


def _frames(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, 60))
        yield pd.DataFrame({
            "device": rng.integers(0, 3, n),
            "phase": np.array(["steady", "tail", None], dtype=object)[rng.integers(0, 3, n)],
            "name": pd.Categorical(np.array(["a", "b", None], dtype=object)[rng.integers(0, 3, n)]),
        })


@pytest.mark.slow
def test_group_ids_number_groups_as_pandas_groupby_without_sorting():
    for frame in _frames(5, 300):
        keys = ["device", "phase", "name"]
        want = frame.groupby(keys, sort=False, observed=True).ngroup()
        table = Table.from_pandas(frame)
        got = group_ids([table[k] for k in keys])
        assert got.tolist() == want.fillna(-1).astype(int).tolist()


@pytest.mark.slow
def test_rows_by_group_are_pandas_groups_in_order():
    for frame in _frames(6, 300):
        keys = ["device", "phase", "name"]
        want = [g.index.tolist() for _, g in frame.groupby(keys, sort=False, observed=True)]
        table = Table.from_pandas(frame)
        assert [r.tolist() for r in rows_by_group(group_ids([table[k] for k in keys]))] == want


def test_as_labels_of_plain_strings_and_of_labels():
    plain = as_labels(np.array(["x", None, "y", "x"], dtype=object))
    assert plain.codes.tolist() == [0, -1, 1, 0] and plain.categories.tolist() == ["x", "y"]
    assert list(plain) == ["x", None, "y", "x"]
    labels = Table.from_pandas(pd.DataFrame({"n": pd.Categorical(["p", None])})).labels("n")
    assert as_labels(labels) is labels


def test_warmup_orders_items_by_cost_as_pandas():
    from gpugap.rules.warmup_latency import _by_cost

    rng = np.random.default_rng(7)
    for _ in range(500):
        cost = rng.integers(0, 5, int(rng.integers(1, 80))) * 1000
        want = pd.DataFrame({"cost": cost}).sort_values("cost", ascending=False).index
        assert _by_cost(cost).tolist() == want.tolist()


def test_warmup_evidence_keeps_the_fields_a_frame_of_the_items_had():
    from gpugap.rules.warmup_latency import _as_evidence

    items = [{"cause": "module-load", "start": 1, "cost": 5, "calls": 2},
             {"cause": "first-call", "start": 2, "cost": 7, "first_ns": 9, "calls": 3},
             {"cause": "first-iteration", "start": 3, "cost": 8, "first_ns": 10, "calls": 4,
              "module_load_ns": 0}]
    want = [{k: v for k, v in row.items() if pd.notna(v)}
            for row in pd.DataFrame(items).to_dict("records")]
    got = _as_evidence(items)
    assert got == want
    assert [list(r) for r in got] == [list(r) for r in want]
    assert [[type(v) for v in r.values()] for r in got] == \
        [[type(v) for v in r.values()] for r in want]
