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


def _default(value: Any) -> Any:
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


def dumps(document: Any) -> str:
    """*document* as ``json.dumps(document, indent=2, allow_nan=False)`` writes it, with
    NaN as null (NaN is not JSON) and numpy values as JSON values (``_default``)."""
    out: list[str] = []
    _write(document, "\n", True, out)
    return "".join(out)


# The JSON of values of these exact types, written in the loops below without a call of
# _write: most of a document.
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: json.encoder.encode_basestring_ascii, int: int.__repr__,
    bool: lambda b: "true" if b else "false", type(None): lambda _: "null"}


def _write(value: Any, newline: str, clean: bool, out: list[str]) -> None:
    """Append *value*'s JSON to *out* as json.dumps(indent=2) writes it: *newline* starts
    a line at its depth. *clean*: a NaN is null; not in what ``_default`` returns, which
    json.dumps refuses, as it does infinities. Type for type in json.dumps's order."""
    if isinstance(value, str):
        out.append(json.encoder.encode_basestring_ascii(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value, clean))
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        if all(type(item) is int for item in value):     # durations, counts: at once
            out.append("[" + inner + ("," + inner).join(map(int.__repr__, value))
                       + newline + "]")
            return
        out.append("[")
        separator = inner
        for item in value:
            scalar = _SCALARS.get(type(item))
            if scalar is not None:
                out.append(separator + scalar(item))
            else:
                out.append(separator)
                _write(item, inner, clean, out)
            separator = "," + inner
        out.append(newline + "]")
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        out.append("{")
        separator = inner
        for key, item in value.items():
            out.append(separator + json.encoder.encode_basestring_ascii(_key(key)) + ": ")
            scalar = _SCALARS.get(type(item))
            if scalar is not None:
                out.append(scalar(item))
            else:
                _write(item, inner, clean, out)
            separator = "," + inner
        out.append(newline + "}")
    else:
        _write(_default(value), newline, False, out)


def _float(value: float, clean: bool) -> str:
    if value != value and clean:
        return "null"
    if value != value or value in (math.inf, -math.inf):
        raise ValueError("Out of range float values are not JSON compliant: " + repr(value))
    return float.__repr__(value)


def _key(key: Any) -> str:
    """A key of a JSON object as json.dumps writes it."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float(key, False)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


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
