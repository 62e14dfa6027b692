"""gpugap.jsonout.dumps writes what json.dumps(indent=2, allow_nan=False) writes of the
document with its NaNs as null, numpy values through jsonout's default: byte for byte,
errors included."""

from __future__ import annotations

import enum
import json
import math
import random
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from gpugap import jsonout


def reference(document: Any) -> str:
    """The document's JSON as json.dumps writes it, NaN made null first (at any depth of
    dicts, lists and tuples; not in what the default returns)."""
    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value
    return json.dumps(clean(document), indent=2, default=jsonout._default, allow_nan=False)


def outcome(write: Any, document: Any) -> Any:
    try:
        return write(document)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


class Count(enum.IntEnum):
    THREE = 3


class Name(str, enum.Enum):
    X = "x"


SCALARS = [0, 1, -5, 10**20, 1.5, -0.0, 1e300, math.nan, math.inf, -math.inf, True, False,
           None, 'a\u00e9"\n\x00', np.int64(3), np.float64(2.25), np.float64("nan"),
           np.float32(1.5), np.float32("nan"), np.float64("inf"), np.bool_(True),
           np.array([1, 2.5]), np.array([np.nan]), np.array([]), Count.THREE, Name.X, (),
           [], {}, (1, 2), [1, 2, 3], 3j, MappingProxyType({"a": 1})]
KEYS = ["k", "\u00e9", 1, 2.5, True, False, None, math.nan, np.int64(2), (1,), Name.X]


def documents(seed: int, count: int) -> list[Any]:
    rng = random.Random(seed)

    def value(depth: int) -> Any:
        r = rng.random()
        if depth > 3 or r < 0.5:
            return rng.choice(SCALARS)
        if r < 0.75:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        if r < 0.85:
            return tuple(value(depth + 1) for _ in range(rng.randint(0, 3)))
        return {rng.choice(KEYS): value(depth + 1) for _ in range(rng.randint(0, 4))}
    return [value(0) for _ in range(count)]


@pytest.mark.parametrize("document", [
    *SCALARS, *({k: 1} for k in KEYS), OrderedDict(a=[1.5, math.nan]),
    {"durations_ns": list(range(0, 10**6, 7))}, [[1, 2], [3, [4, 5.5]], {"a": [True, 1]}]])
def test_dumps_writes_what_json_dumps_writes(document):
    assert outcome(jsonout.dumps, document) == outcome(reference, document)


def test_dumps_of_random_documents():
    for document in documents(seed=25, count=5000):
        assert outcome(jsonout.dumps, document) == outcome(reference, document), document
