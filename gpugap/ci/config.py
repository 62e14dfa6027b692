"""Project configuration: gates, rule thresholds and baseline policy, so that the CI line
is just ``gpugap check report.sqlite``.

Where it is read from (first found wins; ``--config FILE`` names one, ``--no-config``
ignores them all):

1. ``gpugap.toml`` in the current directory (keys at its top level);
2. the nearest ``pyproject.toml`` upwards from there that has a ``[tool.gpugap]`` table.

Schema (``gpugap.toml`` drops the ``tool.gpugap`` prefix)::

    [tool.gpugap]
    range = "measured"             # default scope of [gates] (absent: the whole report)
    allow_missing = false          # a gate on a null metric passes (skipped) instead of failing
    allow_lost_gpu_data = false    # check a report that lost GPU data instead of failing it
    min_severity = "info"          # findings.* metrics count findings of this severity and up

    [tool.gpugap.gates]            # on the default scope
    min = { kernel_overlap_pct = 50 }
    max = { "findings.blocking-memcpy.count" = 0 }

    [tool.gpugap.ranges.step]      # on the NVTX range 'step' (quote names with spaces/dots)
    min = { copy_compute_overlap_pct = 60 }

    [tool.gpugap.thresholds.launch-gap]   # rule thresholds (see gpugap rules)
    min_gap_us = 50

    [tool.gpugap.directions]       # override gates.DIRECTIONS: higher | lower | none
    kernels = "lower"

    [tool.gpugap.baseline]         # used by gpugap check when a file is given
    file = "gpugap-baseline.json"  # relative to this config file
    tolerance = 5                  # points for *_pct metrics, percent of the median otherwise
    noise_k = 3                    # beyond noise: |delta| > max(tolerance, noise_k x stdev)
    cost_tolerance_ms = 1          # a warning/error findings cost may always move this much
    metrics = ["kernel_overlap_pct", "findings.*.*.cost_ms"]   # compared metrics (patterns)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpugap.ci.gates import (
    HIGHER,
    LOWER,
    MAX,
    MIN,
    NONE,
    Gate,
    validate_pattern,
)
from gpugap.errors import UsageError, option
from gpugap.files import CONFIG_MAX_BYTES, read_text
from gpugap.rules import thresholds as rule_thresholds
from gpugap.rules.model import Severity
from gpugap.rules.thresholds import number as _number

CONFIG_NAME = "gpugap.toml"
PYPROJECT = "pyproject.toml"
TOP_KEYS = ("range", "allow_missing", "allow_lost_gpu_data", "min_severity", "gates",
            "ranges", "thresholds", "directions", "baseline")
BASELINE_KEYS = ("file", "tolerance", "noise_k", "cost_tolerance_ms", "metrics")

# The baseline policy's defaults. The policy is here, not with the baselines
# (gpugap.ci.baseline), whose import `gpugap analyze` does not need (start-up).
DEFAULT_TOLERANCE = 5.0     # points for *_pct metrics, percent of the median otherwise
DEFAULT_NOISE_K = 3.0       # a change within 3 standard deviations of the runs is noise
DEFAULT_COST_TOLERANCE_MS = 1.0   # a findings cost may always move this much
# Compared by default: what a lost overlap, a returning blocking copy or a slower
# iteration moves, and the cost of every warning/error finding per rule and cause.
# The whole report's span_ns and gpu_busy_pct / gpu_idle_pct also have a direction but
# follow the start-up; add them with Policy.metrics (config: [tool.gpugap.baseline]
# metrics) when the runs' start-up is stable.
DEFAULT_METRICS = ("kernel_overlap_pct", "copy_compute_overlap_pct", "concurrency",
                   "steady.*", "findings.*.*.cost_ms", "job.*")


@dataclass(frozen=True)
class Policy:
    """How a run is compared with a baseline."""

    tolerance: float = DEFAULT_TOLERANCE
    noise_k: float = DEFAULT_NOISE_K
    metrics: tuple[str, ...] = DEFAULT_METRICS        # patterns, as in gates.matches
    directions: Mapping[str, str] = field(default_factory=dict)   # overrides
    cost_tolerance_ms: float = DEFAULT_COST_TOLERANCE_MS

    def __post_init__(self) -> None:
        if self.tolerance < 0 or self.noise_k < 0 or self.cost_tolerance_ms < 0:
            raise UsageError("baseline tolerance, noise_k and cost_tolerance_ms must "
                             "be >= 0")


@dataclass(frozen=True)
class Config:
    """The configuration in effect; ``Config()`` is the defaults (no file)."""

    path: Path | None = None
    range: str | None = None
    gates: tuple[Gate, ...] = ()
    thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    allow_missing: bool = False
    allow_lost_gpu_data: bool = False
    min_severity: str = "info"
    directions: Mapping[str, str] = field(default_factory=dict)
    baseline_file: Path | None = None
    tolerance: float = DEFAULT_TOLERANCE
    noise_k: float = DEFAULT_NOISE_K
    cost_tolerance_ms: float = DEFAULT_COST_TOLERANCE_MS
    baseline_metrics: tuple[str, ...] = DEFAULT_METRICS

    @property
    def gated_ranges(self) -> list[str]:
        """NVTX ranges named by per-range gates."""
        return list(dict.fromkeys(g.range for g in self.gates if g.range is not None))

    def merged_thresholds(self, overrides: Mapping[str, Mapping[str, float]] | None
                          ) -> dict[str, dict[str, float]]:
        """The configured rule thresholds with *overrides* (e.g. --set) on top, per rule
        and name: what ``analyze(thresholds=...)`` takes."""
        merged = {rule: dict(values) for rule, values in self.thresholds.items()}
        for rule, values in (overrides or {}).items():
            merged.setdefault(rule, {}).update(values)
        return merged

    def policy(self) -> Policy:
        return Policy(tolerance=self.tolerance, noise_k=self.noise_k,
                      metrics=self.baseline_metrics, directions=dict(self.directions),
                      cost_tolerance_ms=self.cost_tolerance_ms)

    def overridden(self, **changes: Any) -> Config:
        """A copy with the given settings replaced, skipping those that are None
        (command-line options that were not given)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _read_toml(path: Path) -> dict[str, Any]:
    """The TOML document at *path*: a regular UTF-8 file of at most CONFIG_MAX_BYTES
    (1 MiB), else UsageError naming the file."""
    try:
        import tomllib
    except ModuleNotFoundError:         # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise UsageError(f"reading {path} needs Python 3.11+ or the tomli package "
                             "(pip install tomli)") from None
    text = read_text(path, "config file", CONFIG_MAX_BYTES, error=UsageError)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path} is nested too deeply to be a gpugap config; "
                         "flatten it") from None


def find_config(start: Path | None = None) -> Path | None:
    """gpugap.toml in *start* (default: the current directory), else the nearest
    pyproject.toml from there upwards that has a [tool.gpugap] table.

    Every pyproject.toml met on the way up is read: one that cannot be read (not a
    regular file, unreadable, over 1 MiB, not UTF-8, not TOML) is an error naming it,
    not skipped, since skipping it could silently drop the gates it holds.
    """
    start = (start or Path.cwd()).resolve()
    if os.path.lexists(start / CONFIG_NAME):
        return start / CONFIG_NAME
    for directory in (start, *start.parents):
        candidate = directory / PYPROJECT
        if not os.path.lexists(candidate):
            continue
        try:
            tool = _read_toml(candidate).get("tool", {})
        except UsageError as exc:
            raise UsageError(f"{exc} (found looking for [tool.gpugap]; fix it, or pass "
                             "--config FILE or --no-config)") from None
        if isinstance(tool, dict) and "gpugap" in tool:
            return candidate
    return None


def load_config(path: str | Path | None = None, *, start: Path | None = None,
                discover: bool = True) -> Config:
    """The configuration from *path*, else the discovered file, else the defaults.

    *path* may be a gpugap.toml (settings at its top level) or any TOML file with a
    [tool.gpugap] table, such as a pyproject.toml.
    """
    if path is None:
        path = find_config(start) if discover else None
        if path is None:
            return Config()
    path = Path(path)
    data = _read_toml(path)
    tool = data.get("tool", {})
    if isinstance(tool, dict) and "gpugap" in tool:
        return parse_config(tool["gpugap"], path, prefix="tool.gpugap")
    if path.name == PYPROJECT:
        raise UsageError(f"{path} has no [tool.gpugap] table; add one or point {option('config')} "
                         "at a gpugap.toml")
    return parse_config(data, path)


class _Where:
    """Names the table a value came from, for one-line errors: 'gpugap.toml [gates]'."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path, self.prefix = path, prefix

    def __call__(self, *keys: str) -> str:
        table = ".".join(k if k.replace("-", "").replace("_", "").isalnum() else f'"{k}"'
                         for k in [*filter(None, self.prefix.split(".")), *keys])
        return f"{self.path.name} [{table}]" if table else self.path.name


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be a table, not {type(value).__name__}")
    return value


def _known(table: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    unknown = [k for k in table if k not in keys]
    if unknown:
        raise UsageError(f"unknown key '{unknown[0]}' in {where}; known: {', '.join(keys)}")


def _gates(table: Any, where: _Where, keys: tuple[str, ...], range_name: str | None
           ) -> list[Gate]:
    table = _table(table, where(*keys))
    _known(table, (MIN, MAX), where(*keys))
    gates = []
    for op in (MIN, MAX):
        for metric, limit in _table(table.get(op, {}), where(*keys, op)).items():
            source = f"{where(*keys)} {op}"
            gates.append(Gate(metric, op, _number(limit, f"{source}.{metric}"), range_name,
                              source))
    return gates


def _thresholds(table: Any, where: _Where) -> dict[str, dict[str, float]]:
    """The [thresholds] table, a table per rule, checked where the rules are
    (gpugap.rules.thresholds)."""
    return rule_thresholds.from_tables(_table(table, where("thresholds")), where)


def parse_config(table: Mapping[str, Any], path: Path, prefix: str = "") -> Config:
    """A Config from the gpugap table of a TOML file; UsageError naming the bad key."""
    where = _Where(path, prefix)
    table = _table(table, where())
    _known(table, TOP_KEYS, where())
    settings: dict[str, Any] = {"path": path}

    if "range" in table:
        if not isinstance(table["range"], str) or not table["range"]:
            raise UsageError(f"{where()} range must be the name of an NVTX range")
        settings["range"] = table["range"]
    for key in ("allow_missing", "allow_lost_gpu_data"):
        if key in table:
            if not isinstance(table[key], bool):
                raise UsageError(f"{where()} {key} must be true or false, "
                                 f"not {table[key]!r}")
            settings[key] = table[key]
    if "min_severity" in table:
        if not isinstance(table["min_severity"], str) \
                or table["min_severity"] not in Severity.names():
            raise UsageError(f"{where()} min_severity must be one of "
                             f"{', '.join(Severity.names())}, not {table['min_severity']!r}")
        settings["min_severity"] = table["min_severity"]

    gates = _gates(table["gates"], where, ("gates",), None) if "gates" in table else []
    for name, ranged in _table(table.get("ranges", {}), where("ranges")).items():
        gates += _gates(ranged, where, ("ranges", name), name)
    settings["gates"] = tuple(gates)

    if "thresholds" in table:
        settings["thresholds"] = _thresholds(table["thresholds"], where)
    if "directions" in table:
        directions = _table(table["directions"], where("directions"))
        for pattern, direction in directions.items():
            validate_pattern(pattern, where("directions"))
            if direction not in (HIGHER, LOWER, NONE):
                raise UsageError(f"{where('directions')} {pattern} must be '{HIGHER}', "
                                 f"'{LOWER}' or '{NONE}', not {direction!r}")
        settings["directions"] = dict(directions)
    if "baseline" in table:
        base = _table(table["baseline"], where("baseline"))
        _known(base, BASELINE_KEYS, where("baseline"))
        if "file" in base:
            if not isinstance(base["file"], str) or not base["file"]:
                raise UsageError(f"{where('baseline')} file must be a path")
            # Relative to the config file, so the check works from any directory.
            settings["baseline_file"] = path.parent / base["file"]
        for key in ("tolerance", "noise_k", "cost_tolerance_ms"):
            if key in base:
                settings[key] = _number(base[key], f"{where('baseline')} {key}", minimum=0)
        if "metrics" in base:
            metrics = base["metrics"]
            if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
                raise UsageError(f"{where('baseline')} metrics must be a list of metric "
                                 "names or patterns")
            settings["baseline_metrics"] = tuple(validate_pattern(m, where("baseline"))
                                                 for m in metrics)
    return Config(**settings)


__all__ = ["CONFIG_NAME", "Config", "Policy", "find_config", "load_config", "parse_config"]
