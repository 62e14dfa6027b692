"""What every canned scenario shares: its description, its expected diagnosis, and a CLI.

A scenario module defines ``SCENARIO`` (a :class:`Scenario`) and a ``run(variant, params)``
function that does the GPU work and returns a dict of results. Heavy imports (torch,
cuda-python, nvtx) happen inside ``run`` so that the suite can be listed and its
expectations checked on a machine with neither a GPU nor those packages.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

NVTX_DOMAIN = "gpugap"
MEASURED_RANGE = "measured"


@dataclass(frozen=True)
class Expect:
    """A rule that must fire (or stay silent) on findings that overlap ``range``.

    ``cause`` None means "any cause". ``severity`` None means "any severity".
    """

    rule: str
    cause: str | None = None
    fire: bool = True
    range: str = MEASURED_RANGE
    severity: str | None = None

    def describe(self) -> str:
        what = self.rule + (f"/{self.cause}" if self.cause else "")
        if self.severity:
            what += f" ({self.severity})"
        verb = "fires" if self.fire else "silent"
        return f"{what} {verb} in '{self.range}'"


@dataclass(frozen=True)
class Bound:
    """A metric of an NVTX range that must lie within [min, max]."""

    metric: str
    min: float | None = None
    max: float | None = None
    range: str = MEASURED_RANGE

    def describe(self) -> str:
        lo = "" if self.min is None else f"{self.min:g} <= "
        hi = "" if self.max is None else f" <= {self.max:g}"
        return f"{lo}{self.metric}{hi} in '{self.range}'"


@dataclass(frozen=True)
class Variant:
    name: str
    summary: str
    expect: tuple[Expect, ...] = ()
    bounds: tuple[Bound, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    module: str
    seed: str
    title: str
    look_for: str
    requires: tuple[str, ...]
    params: dict[str, Any]
    variants: dict[str, Variant] = field(default_factory=dict)


@contextmanager
def nvtx_range(message: str) -> Iterator[None]:
    """An NVTX push/pop range in the gpugap domain."""
    import nvtx

    with nvtx.annotate(message, domain=NVTX_DOMAIN):
        yield


def _coerce(default: Any, text: str) -> Any:
    if isinstance(default, bool):
        return text.lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        return int(text)
    if isinstance(default, float):
        return float(text)
    if isinstance(default, tuple):
        return tuple(int(x) for x in text.split(",") if x)
    return text


def main(scenario: Scenario, run: Callable[[str, dict[str, Any]], dict[str, Any]],
         argv: list[str] | None = None) -> int:
    """``python -m gpugap.scenarios.<module> --variant bad [--param value ...] [--result FILE]``."""
    parser = argparse.ArgumentParser(
        prog=f"python -m gpugap.scenarios.{scenario.module}",
        description=f"{scenario.title} (seed {scenario.seed}). Look for: {scenario.look_for}",
    )
    parser.add_argument("--variant", choices=sorted(scenario.variants), required=True)
    parser.add_argument("--result", help="write the results as JSON to this file")
    for key, default in scenario.params.items():
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        parser.add_argument("--" + key.replace("_", "-"), dest=key, default=None,
                            help=f"default: {shown}")
    args = parser.parse_args(argv)
    params = {k: (d if getattr(args, k) is None else _coerce(d, getattr(args, k)))
              for k, d in scenario.params.items()}

    started = time.perf_counter()
    results = run(args.variant, params)
    results = {"scenario": scenario.name, "variant": args.variant, "params": params,
               "wall_s": round(time.perf_counter() - started, 3), **results}
    text = json.dumps(results, indent=2, default=str)
    print(text)
    if args.result:
        with open(args.result, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    if not results.get("check_ok", False):
        print(f"numerical check FAILED: {results.get('check')}", file=sys.stderr)
        return 1
    return 0
