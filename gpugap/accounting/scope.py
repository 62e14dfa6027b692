"""What an analysis judges: one value, made once per analysis and handed to the rules,
settling, the verdict and the renderers.

The scope is either the user's ``--range`` or, without one, each device's steady state
(its steady iterations, first uses left out: ``Phases.steady_windows``). Under a
``--range`` the phases stay inside the range: on each device the range's windows
(its instances', clipped to that device's window) keep their one-time parts (start-up,
warm-up, tail: listed apart), and what is judged is their part in the steady state. A
range of one instance is the window the user measures, judged whole, its warm-up
included (``whole_range``); so is a range with no time in the steady state on a device.
The scope also keeps each device's steady span, the first to the last nanosecond of the
steady state as the phases cut it, which the timeline's fold and a job's ranks read
whatever the scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.attribution import DeviceAccount


@dataclass(frozen=True)
class Scope:
    """Per device, the windows an analysis judges (a --range's steady part, else the
    steady state), the --range's windows there, their label ('range step', 'steady
    state', 'whole timeline') and the steady span."""

    range_name: str | None = None
    # Per device: the windows judged (the --range's steady part there, or all its windows
    # where the range is judged whole; else its steady state).
    windows: Mapping[int, tl.Intervals] = field(default_factory=dict, repr=False)
    # Per device: what a verdict calls the windows judged.
    labels: Mapping[int, str] = field(default_factory=dict, repr=False)
    # Per device: (first, last) nanosecond of the steady state as the phases cut it.
    steady_spans: Mapping[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    # The --range's windows on the report's clock, every device alike (the metrics');
    # None without a --range.
    range_windows: tl.Intervals | None = field(default=None, repr=False)
    # Per device under a --range: its windows there, one-time parts included.
    ranged: Mapping[int, tl.Intervals] = field(default_factory=dict, repr=False)
    # Per device under a --range: judged whole (one instance, or none of its time in
    # the steady state there)?
    whole: Mapping[int, bool] = field(default_factory=dict, repr=False)
    # A --range of one instance: judged whole on every device.
    whole_range: bool = False

    @classmethod
    def of(cls, devices: Mapping[int, DeviceAccount], range_name: str | None = None,
           range_windows: tl.Intervals | None = None, whole_range: bool = False
           ) -> Scope:
        """The scope of an analysis of the accounting's *devices*: the --range
        *range_name* whose instances cover *range_windows* (*whole_range*: it is one
        instance, judged whole), else (None) each device's steady state."""
        windows: dict[int, tl.Intervals] = {}
        ranged: dict[int, tl.Intervals] = {}
        whole: dict[int, bool] = {}
        labels: dict[int, str] = {}
        spans: dict[int, tuple[int, int]] = {}
        for device, dev in devices.items():
            ph = dev.phases
            lo, hi = ph.spans["steady"]
            spans[device] = (int(lo), int(hi))
            if range_windows is not None:
                mine = ranged[device] = tl.intersect(range_windows, (
                    np.array([dev.window[0]]), np.array([dev.window[1]])))
                steady = mine if whole_range else tl.intersect(mine, ph.steady_windows())
                # A range of start-up work only is judged whole.
                whole[device] = whole_range or tl.total(steady) <= 0
                windows[device] = mine if whole[device] else steady
                labels[device] = f"range {range_name}"
            else:
                windows[device] = ph.steady_windows()
                start_lo, start_hi = ph.spans["start-up"]
                labels[device] = ("steady state" if ph.iterations is not None
                                  or start_hi > start_lo else "whole timeline")
        return cls(range_name, windows, labels, spans, range_windows, ranged, whole,
                   whole_range)

    @property
    def is_range(self) -> bool:
        """Is this a --range (one scope, never split into phases)?"""
        return self.range_windows is not None

    def on(self, device: int) -> tl.Intervals:
        """The windows judged on *device* (none where it has none)."""
        return self.windows.get(int(device), tl.EMPTY)

    def range_on(self, device: int) -> tl.Intervals:
        """The --range's windows on *device*, one-time parts included (none without a
        --range or where it has none)."""
        return self.ranged.get(int(device), tl.EMPTY)

    def is_whole(self, device: int) -> bool:
        """Is the --range judged whole on *device* (one instance, or no time of it in
        the steady state; a device outside the accounting too)? False without one."""
        return self.is_range and self.whole.get(int(device), True)

    def label(self, device: int) -> str:
        """What a verdict calls the windows judged on *device*."""
        return self.labels.get(int(device), f"range {self.range_name}" if self.is_range
                               else "steady state")

    def steady_span(self, device: int) -> tuple[int, int]:
        """(first, last) nanosecond of *device*'s steady state, whatever the scope."""
        return self.steady_spans[int(device)]

    def range_scope(self) -> dict[int, tl.Intervals] | None:
        """Per device, the --range's windows there (one-time parts included); None
        without a --range."""
        return dict(self.ranged) if self.is_range else None
