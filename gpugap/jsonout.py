"""JSON output: one document on stdout, numbers as plain JSON numbers."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def _default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _clean(value: Any) -> Any:
    """NaN is not JSON: turn it into null, recursively."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(document: Any) -> str:
    return json.dumps(_clean(document), indent=2, default=_default, allow_nan=False)
