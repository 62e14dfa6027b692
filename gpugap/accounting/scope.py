"""What an analysis judges: one value, made once per analysis and handed to the rules,
settling, the verdict and the renderers.

The scope is either the user's ``--range`` (the windows of its instances, on each
device clipped to that device's window) or, without one, each device's steady state
(its steady iterations, first uses left out: ``Phases.steady_windows``). It also keeps
each device's steady span, the first to the last nanosecond of the steady state as the
phases cut it, which the timeline's fold and a job's ranks read whatever the scope.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gpugap import intervals as tl
from gpugap.accounting.attribution import DeviceAccount


@dataclass(frozen=True)
class Scope:
    """Per device, the windows an analysis judges (a --range's, else the steady state),
    their label ('range step', 'steady state', 'whole timeline') and the steady span."""

    range_name: str | None = None
    # Per device: the windows judged (the --range's there, else its steady state).
    windows: Mapping[int, tl.Intervals] = field(default_factory=dict, repr=False)
    # Per device: what a verdict calls the windows judged.
    labels: Mapping[int, str] = field(default_factory=dict, repr=False)
    # Per device: (first, last) nanosecond of the steady state as the phases cut it.
    steady_spans: Mapping[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    # The --range's windows on the report's clock, every device alike (the metrics');
    # None without a --range.
    range_windows: tl.Intervals | None = field(default=None, repr=False)

    @classmethod
    def of(cls, devices: Mapping[int, DeviceAccount], range_name: str | None = None,
           range_windows: tl.Intervals | None = None) -> Scope:
        """The scope of an analysis of the accounting's *devices*: the --range
        *range_name* whose instances cover *range_windows*, else (None) each device's
        steady state."""
        windows: dict[int, tl.Intervals] = {}
        labels: dict[int, str] = {}
        spans: dict[int, tuple[int, int]] = {}
        for device, dev in devices.items():
            ph = dev.phases
            lo, hi = ph.spans["steady"]
            spans[device] = (int(lo), int(hi))
            if range_windows is not None:
                windows[device] = tl.intersect(range_windows, (
                    np.array([dev.window[0]]), np.array([dev.window[1]])))
                labels[device] = f"range {range_name}"
            else:
                windows[device] = ph.steady_windows()
                start_lo, start_hi = ph.spans["start-up"]
                labels[device] = ("steady state" if ph.iterations is not None
                                  or start_hi > start_lo else "whole timeline")
        return cls(range_name, windows, labels, spans, range_windows)

    @property
    def is_range(self) -> bool:
        """Is this a --range (one scope, never split into phases)?"""
        return self.range_windows is not None

    def on(self, device: int) -> tl.Intervals:
        """The windows judged on *device* (none where it has none)."""
        return self.windows.get(int(device), tl.EMPTY)

    def label(self, device: int) -> str:
        """What a verdict calls the windows judged on *device*."""
        return self.labels.get(int(device), f"range {self.range_name}" if self.is_range
                               else "steady state")

    def steady_span(self, device: int) -> tuple[int, int]:
        """(first, last) nanosecond of *device*'s steady state, whatever the scope."""
        return self.steady_spans[int(device)]

    def range_scope(self) -> dict[int, tl.Intervals] | None:
        """Per device, the --range's windows there; None without a --range."""
        return dict(self.windows) if self.is_range else None
