"""Validation at the loading boundary: what the loader does with what no real export holds.

A report can be damaged (a copy cut short, bits flipped), edited, written by a buggy or
much older or newer nsys, or planted. Nothing in it is trusted: every column gpugap reads
(declared in gpugap.report.schema, with its bounds) is checked for presence and declared
type once, when the report is opened, and every value as it is read. What the analysis
then sees has only possible values; what was dropped or repaired is counted, one
warning line per kind of problem (``ReportInfo.warnings``), and the counts are in
``ReportInfo.problems``.

Rules (all vectorised; a valid report costs a min/max per column):

- a table without a column it cannot do without (``start``/``end`` of any event table,
  ``eventType`` of NVTX_EVENTS) is skipped as if absent, with a warning; any other
  missing column reads as its documented default. A column is never named in SQL unless
  the table has it, so a missing column is never read as the string of its name.
- a value that is not an integer where one is expected (NULL, text, BLOB, REAL,
  infinity) reads as the column's fill value (gpugap.report.reader.typed_sql), which the
  rules below then treat as invalid where it matters.
- times: an event needs 0 < start <= end <= the time limit (``time_limit``); rows
  without valid times, ending before they start, or beyond the limit are dropped. An NVTX
  range without a valid end is open: it ends with the capture.
- ids: a GPU op's device must be in [0, MAX_DEVICE) (else the row is dropped), and a
  device the device table does not list gets a placeholder row with default limits;
  stream, context and correlation ids, thread ids must be in [0, 2^32) (2^63 for
  serialized thread ids), else they become 0 (correlation 0: no launch call known).
- launch dimensions, registers and shared memory are clamped to CUDA's limits, copy
  and memset sizes to [0, MAX_BYTES]: each column's ``bounds`` in gpugap.report.schema.
- names: NULL or BLOB strings, ids missing from StringIds, become a placeholder
  ('<unnamed>', '<id>'); names longer than MAX_NAME characters are cut; invalid UTF-8 is
  replaced per string (the connection decodes with errors='replace').
- metadata (capture window, versions, enum tables, device limits) is validated before
  any int(); invalid entries are ignored or replaced by documented defaults.

Fatal (ReportError, exit 2, one line): not an SQLite file, truncated or corrupt, not an
nsys export, or nothing left to analyze after validation (event tables that had rows
and lost all of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpugap.lazy import LazyNumpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = LazyNumpy(globals())

MAX_TIME_NS = 2**62         # no valid time reaches this
UNTRUSTED_SPAN_NS = 2**50   # without a capture window: events within ~13 days of most
MIN_SLACK_NS = 10**9        # events may end this long (or a capture length) after stop
MAX_DEVICE = 4096
MAX_ID = 2**32 - 1          # stream, context, correlation ids are 32-bit
MAX_GTID = 2**63 - 1
MAX_NAME = 65536
MAX_BYTES = 2**48           # no copy or memset moves more (256 TiB): sums stay in int64

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def decode_text(raw: bytes) -> str:
    """SQLite TEXT as str, invalid UTF-8 replaced (U+FFFD) per string: one bad string
    never makes the rest of a report unreadable. The connection's text_factory."""
    return raw.decode("utf-8", errors="replace")


def as_text(value) -> str | None:
    """A value read where text is expected: str as is, a BLOB decoded (invalid UTF-8
    replaced), a number as its digits; NULL as None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return decode_text(value)
    return str(value)


def as_int(value, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int | None:
    """An integer value within [lo, hi], else None (NULL, text, BLOB, REAL, out of
    range). Text of an integer ('13000', as metadata tables store numbers) is parsed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 20 or not text.lstrip("+-").isdigit():
            return None
        value = int(text)
    if isinstance(value, int) and lo <= value <= hi:
        return value
    return None


class Problems:
    """Counts of what was dropped or repaired, one message per kind."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._messages: dict[str, str] = {}

    def add(self, key: str, count, message: str) -> None:
        """*count* rows or values had problem *key*; the line reads '<count> <message>'."""
        count = int(count)
        if count > 0:
            self._counts[key] = self._counts.get(key, 0) + count
            self._messages[key] = "{n} " + message

    def note(self, key: str, message: str) -> None:
        """A problem that is not counted in rows (the line is *message*)."""
        self._counts[key] = self._counts.get(key, 0) + 1
        self._messages[key] = message

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def lines(self) -> list[str]:
        return [self._messages[k].format(n=n) for k, n in self._counts.items()]


def in_range(values: np.ndarray, lo: int, hi: int) -> bool:
    """Whether every value lies within [lo, hi] (two reductions, no temporary array)."""
    return values.size == 0 or (int(values.min()) >= lo and int(values.max()) <= hi)


def time_mask(start: np.ndarray, end: np.ndarray, limit: int, what: str,
              problems: Problems) -> np.ndarray | None:
    """The rows whose times are valid (0 < start <= end <= limit), or None when all are
    (the usual case: then nothing is copied). Counts each kind of invalid row."""
    # All valid when 1 <= the first start, the last end <= limit and no row ends before
    # it starts (then every start and end lies in [1, limit]): three passes, not five.
    if start.size == 0 or (int(start.min()) >= 1 and int(end.max()) <= limit
                           and not bool((end < start).any())):
        return None
    no_time = (start <= 0) | (end <= 0)
    backwards = (end < start) & ~no_time
    beyond = ((end > limit) | (start > limit)) & ~no_time & ~backwards
    problems.add(f"{what}:no-time", np.count_nonzero(no_time),
                 f"{what} without a valid start/end time (NULL, not an integer, or <= 0): "
                 "dropped")
    problems.add(f"{what}:backwards", np.count_nonzero(backwards),
                 f"{what} ending before they start: dropped")
    problems.add(f"{what}:beyond", np.count_nonzero(beyond),
                 f"{what} with times beyond the capture (after {limit} ns): dropped")
    return ~(no_time | backwards | beyond)


def fix_ids(values: np.ndarray, hi: int, what: str, column: str,
            problems: Problems) -> np.ndarray:
    """Ids outside [0, hi] (negative: NULL or not an integer) -> 0, counted."""
    if in_range(values, 0, hi):
        return values
    bad = (values < 0) | (values > hi)
    problems.add(f"{what}:{column}", np.count_nonzero(bad),
                 f"{what} with an invalid {column} id (NULL, not an integer, negative or "
                 "too large): set to 0")
    return np.where(bad, 0, values).astype(values.dtype, copy=False)


def clamp(values: np.ndarray, lo: int, hi: int, what: str, column: str,
          problems: Problems) -> np.ndarray:
    """Values outside [lo, hi] clamped to it, counted."""
    if in_range(values, lo, hi):
        return values
    bad = (values < lo) | (values > hi)
    problems.add(f"{what}:{column}", np.count_nonzero(bad),
                 f"{what} with {column} out of range (NULL, not an integer, or beyond "
                 f"[{lo}, {hi}]): clamped")
    return np.clip(values, lo, hi).astype(values.dtype, copy=False)


def take(data: dict[str, np.ndarray], mask: np.ndarray | None) -> dict[str, np.ndarray]:
    return data if mask is None else {k: v[mask] for k, v in data.items()}


def reference_time(starts: np.ndarray) -> int | None:
    """A typical start (the median of a sample of the valid ones): where most events
    are, whatever a few planted values say."""
    if starts.size == 0:
        return None
    sample = starts[:: max(1, starts.size // 65536)]
    sample = sample[(sample > 0) & (sample < MAX_TIME_NS)]
    return int(np.median(sample)) if sample.size else None


def time_limit(capture: tuple[int, int] | None, reference: int | None,
               problems: Problems) -> tuple[int, bool]:
    """(the latest valid time, whether the capture window is trusted). With a capture
    window most events agree with: its stop plus its length (at least 1 s); else a
    generous span after where most events are."""
    if capture is not None:
        lo, hi = capture
        if reference is None or reference <= hi:
            return min(hi + max(hi - lo, MIN_SLACK_NS), MAX_TIME_NS - 1), True
        problems.note("ANALYSIS_DETAILS:contradicted",
                      f"the capture window in ANALYSIS_DETAILS (stops at {hi} ns) ends "
                      f"before most events (around {reference} ns): ignored")
    base = reference or 0
    return min(base + UNTRUSTED_SPAN_NS, MAX_TIME_NS - 1), False


# --- versions: an nsys older than the CUDA it traced -----------------------------------

# The first Nsight Systems released with each CUDA major version: an older one cannot
# trace that CUDA's GPU activity (CUPTI of an older major), and loses it silently.
FIRST_NSYS_FOR_CUDA = {11: (2020, 3), 12: (2022, 4), 13: (2025, 3)}


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """'2025.3.2.0' -> (2025, 3, 2, 0); None when it does not start with a number."""
    if not text:
        return None
    parts = []
    for piece in str(text).strip().split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits or len(digits) > 9:
            break
        parts.append(int(digits))
        if digits != piece:
            break
    return tuple(parts) if parts else None


def cuda_version(driver_version: str | None) -> tuple[int, int] | None:
    """TARGET_INFO_SYSTEM_ENV CudaDriverVersion ('13000') -> (13, 0)."""
    value = as_int(driver_version, 1000, 99_999)
    return None if value is None else (value // 1000, value % 1000 // 10)


def nsys_too_old(nsys: tuple[int, ...] | None, cuda: tuple[int, int] | None
                 ) -> tuple[int, int] | None:
    """The first nsys able to trace *cuda* when *nsys* is older than it, else None."""
    if nsys is None or cuda is None or len(nsys) < 2:
        return None
    known = max(FIRST_NSYS_FOR_CUDA)
    needed = FIRST_NSYS_FOR_CUDA.get(min(cuda[0], known)) if cuda[0] >= min(
        FIRST_NSYS_FOR_CUDA) else None
    return needed if needed is not None and nsys[:2] < needed else None


# The variables distributed launchers set for each rank (torchrun, Slurm, Open MPI, MPICH /
# PMI, PMIx, MVAPICH), kept from the environment nsys recorded.
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                      "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS",
                      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                      "PMIX_RANK", "MV2_COMM_WORLD_RANK")


def launcher_env(environment: str | None) -> dict[str, str]:
    """The launcher variables of DeviceEnvironment ('A=1;B=2;...'), in LAUNCHER_VARIABLES
    order; values that are not small integers are dropped."""
    if not environment:
        return {}
    found: dict[str, str] = {}
    for item in environment.split(";"):
        name, eq, value = item.partition("=")
        value = value.strip()
        if eq and name.strip() in LAUNCHER_VARIABLES and value.isdigit() and len(value) < 10:
            found.setdefault(name.strip(), value)
    return {k: found[k] for k in LAUNCHER_VARIABLES if k in found}
