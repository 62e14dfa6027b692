"""numpy imported on first use, for the few modules that run before it is needed.

The read-ahead (gpugap.report.prefetch) plans its reads and starts SQLite on them before
numpy is imported: the threads step through the first rows in C while the main thread
imports numpy (about 85 ms of one core at start-up, in which the other core was idle).
The modules it uses (report.database, report.reader, report.validate) name numpy ``np``
as usual, bound to a stand-in that imports numpy on the first attribute asked of it and
then puts the module itself in its place.
"""

from __future__ import annotations

from typing import Any


class LazyNumpy:
    """numpy, imported when first used; then the module's global *name* is numpy."""

    def __init__(self, namespace: dict[str, Any], name: str = "np") -> None:
        self._namespace = namespace
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        import numpy

        self._namespace[self._name] = numpy
        return getattr(numpy, attribute)
