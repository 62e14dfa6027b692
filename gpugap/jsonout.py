"""JSON output: one document on stdout, numbers as plain JSON numbers; and
:class:`Record`, the way every result object reads as a mapping and writes itself as
that JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np


def json_value(value: Any) -> Any:
    """What json.dumps writes for a value it has no form of (its ``default``): numpy
    numbers and arrays as Python's, NaN and pandas' NA as null, anything else as its
    text. Every JSON gpugap writes uses it."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if type(value).__name__ == "NAType":      # pandas' missing value (pd.NA)
        return None
    return str(value)


def _clean(value: Any) -> Any:
    """NaN is not JSON: turn it into null, recursively."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        # Long lists are of integers (iterations' durations): nothing in them to clean.
        if all(type(v) is int for v in value):
            return value
        return [_clean(v) for v in value]
    return value


def dumps(document: Any) -> str:
    return json.dumps(_clean(document), indent=2, default=json_value, allow_nan=False)


class Shown:
    """A result that shows itself by its summary: ``repr()`` and IPython's plain-text
    view are ``summary()`` (a few 80-column lines, not every field), and Jupyter's view
    is the HTML its ``html_view`` draws (set by the front door, gpugap.api, from
    gpugap.render.notebook: the layers below draw nothing), else the summary. A
    dataclass using it says ``repr=False``, so that its own repr is not generated."""

    html_view: Callable[[Any], str] | None

    def summary(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"{type(self).__name__}(...)" if cycle else self.summary())

    def _repr_html_(self) -> str | None:
        return None if self.html_view is None else self.html_view(self)


class Record:
    """A result read both ways, as pandas users reach for it: as attributes
    (``finding.rule``) and as a read-only mapping (``finding['rule']``, ``keys()``,
    ``items()``, ``dict(finding)``), and written as JSON with :meth:`to_json` (the same
    text as the command line's ``--json`` for the same object).

    The keys are a dataclass's public fields (those in its repr; internals such as a
    finding's claim are left out), then the names in ``_extra_keys`` (properties worth
    reading as keys). Subclasses define ``to_dict()``: the JSON document."""

    _extra_keys: ClassVar[tuple[str, ...]] = ()

    def keys(self) -> list[str]:
        fields = dataclasses.fields(self) if dataclasses.is_dataclass(self) else ()
        return [f.name for f in fields if f.repr] + list(self._extra_keys)

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str) or key not in self.keys():
            raise KeyError(f"{key!r}: {type(self).__name__} has "
                           f"{', '.join(self.keys())}")
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self.keys() else default

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self.keys()]

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError      # pragma: no cover (every Record defines it)

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON (NaN as null, numpy numbers as JSON numbers)."""
        return dumps(self.to_dict())
