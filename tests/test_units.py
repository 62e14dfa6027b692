"""Numbers for people (gpugap.units): 3 significant digits, never an exponent (issue 40:
'cost 1.01e+03 s')."""

from __future__ import annotations

import pytest

from gpugap.units import fmt_bytes, fmt_ns


@pytest.mark.parametrize(("ns", "shown"), [
    (1.01e12, "1,010 s"), (2.5e12, "2,500 s"), (999.4e9, "999 s"), (61.8e6, "61.8 ms"),
    (999.4e6, "999 ms"), (999.6e6, "1 s"), (999.6e3, "1 ms"), (253e3, "253 us"),
    (1234, "1.23 us"), (999, "999 ns"), (0, "0 ns"), (-2e12, "-2,000 s")])
def test_durations(ns, shown):
    assert fmt_ns(ns) == shown


@pytest.mark.parametrize(("n", "shown"), [
    (468 * 2**20, "468 MiB"), (1200 * 2**30, "1,200 GiB"), (1023.7 * 2**20, "1 GiB"),
    (1023.4 * 2**20, "1,023 MiB"), (12, "12 B")])
def test_sizes(n, shown):
    assert fmt_bytes(n) == shown


def test_no_exponent_anywhere():
    for exponent in range(0, 16):
        for mantissa in (1, 1.01, 9.996, 9.9949):
            assert "e" not in fmt_ns(mantissa * 10**exponent).split()[0]
            assert "e" not in fmt_bytes(mantissa * 10**exponent).split()[0]
