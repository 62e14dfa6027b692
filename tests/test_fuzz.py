"""Hostile and broken input (issue 13): a seeded mutation fuzzer over the committed real
exports (tests/data/captures, tests/data/scenarios).

Each case copies one real report into a temporary directory (never the original), breaks
the copy in one to three ways, and runs ``gpugap analyze COPY --json`` in-process in a
worker process, asserting what a user must always get:

- an exit code analyze documents for input: 0 analyzed, 2 unreadable or too broken,
  4 no CUDA activity; never a traceback (an exception escaping ``main``);
- at most 3 lines on stderr (no traceback, no warnings spilled), within a time limit
  (a case that runs longer is a hang: its worker is killed and the case fails);
- the input byte-identical afterwards (sha256), and no file written beside it;
- on stdout, strict JSON (NaN and Infinity refused) in which no number is impossible
  (``check_document``: finite, not negative, times below 2^62, percentages within
  [0, 100]), walked generically so that new fields are checked too.

One case in four (``Case.rendered``) also runs ``gpugap analyze COPY --html H --svg S``
(H and S outside the input's directory): the same exit code, no traceback, at most 5
stderr lines (the two 'wrote' lines), no raw control character in the terminal output,
the HTML or the SVG, and an SVG that is well-formed XML.

The mutations (``MUTATIONS``): every column gpugap reads (gpugap.report.columns.SCHEMA)
dropped, NULLed, retyped (text, numeric text, blob, real, +-inf, int64 extremes, 2^62,
2^53, -1, 0) or given dangling ids (far off, or beside the real ones), invalid UTF-8,
escape sequences and markup, or a huge string, in all rows, some or one; a column's
declared type changed; tables dropped, emptied, duplicated, renamed to invalid UTF-8,
given a row with a huge rowid, their start/end swapped; a junk table with an invalid
UTF-8 name; and, on the file, bit flips, a zeroed page and truncation.

Two cases in three are systematic (each column in turn, with each of SYSTEMATIC_OPS in
turn), the others random (one to three mutations of any kind). The suite runs
``DEFAULT_CASES`` cases on up to 2 processes; more, or a subset:

    GPUGAP_FUZZ_CASES=1600 python -m pytest tests/test_fuzz.py -q
    GPUGAP_FUZZ_SEED=7                      # other cases
    GPUGAP_FUZZ_ONLY=17,40                  # only these case numbers (each reproducible)
    GPUGAP_FUZZ_WORKERS=4 GPUGAP_FUZZ_TIMEOUT=60

A failure prints the case number, the source report, the mutations and what went wrong
(the traceback, the stderr lines, the offending JSON values).

The edges around the reports (issue 24), a handful of seeded cases each by default (a few
seconds), scaled by GPUGAP_FUZZ_CASES (1600: 6.7 times as many) and varied by
GPUGAP_FUZZ_SEED:

- scheduler addresses: generated ones (schemes, hosts, ports, tails, unicode, empty,
  200,000 characters) through ``check_address`` (one UsageError line or a usable
  (scheme, host, port)) and through ``analyze DIR --scheduler ADDR`` (exit 2, one line);
  listeners on 127.0.0.1 that refuse, never accept, or send random bytes (an HTTP reply,
  a frame length of up to 2^64) in random pieces with random pauses, then close, reset
  or hold, through ``probe``: one UsageError line within the timeout + 2 s, under 4 MB
  allocated, passing only a Dask-like handshake;
- signals: SIGINT or SIGTERM at a random moment (0 to the length of an uninterrupted run)
  of ``python -m gpugap analyze`` of a committed capture, with or without --json, --html
  and --svg: exit 0 and complete outputs, or 128 + the signal and exactly the
  ``gpugap: interrupted`` line; never a traceback, a partial output or a temporary file
  left (a signal before gpugap's first line or after its last, in Python's own start
  and exit, is counted apart);
- full disks: standard output on /dev/full and on a tmpfs of random size (part of it
  taken), and --html/--svg into one: exit 0 with every output complete (JSON parses,
  the HTML ends with </html>, the SVG is well-formed) or exit 9 with one line; the tmpfs
  cases need the right to mount (root, as in CI).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import ipaddress
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import traceback
import tracemalloc
import warnings
from collections import Counter
from dataclasses import dataclass, field
from dataclasses import replace as dataclasses_replace
from multiprocessing.connection import wait as wait_for
from pathlib import Path
from xml.etree import ElementTree

import pytest

from gpugap.report.columns import SCHEMA
from tests.conftest import DATA

DEFAULT_CASES = 240
CASES = int(os.environ.get("GPUGAP_FUZZ_CASES", DEFAULT_CASES))
SEED = int(os.environ.get("GPUGAP_FUZZ_SEED", "13"))
ONLY = [int(x) for x in os.environ.get("GPUGAP_FUZZ_ONLY", "").split(",") if x.strip()]
WORKERS = int(os.environ.get("GPUGAP_FUZZ_WORKERS", min(2, os.cpu_count() or 1)))
TIMEOUT_S = float(os.environ.get("GPUGAP_FUZZ_TIMEOUT", "60"))

EXIT_CODES = {0, 2, 4}          # analyze on input: analyzed, unreadable, no CUDA activity
MAX_STDERR_LINES = 3
TIME_LIMIT = 2**62

SOURCES = sorted([*(DATA / "captures").glob("*.sqlite"), *(DATA / "scenarios").glob("*.sqlite")])

# Numbers that may be negative by definition.
SIGNED = {
    "priority",       # CUDA stream priorities: 0, -1, -2 ... (lower is more urgent)
    # launch-gap's queued_ns: negative in the real default-stream/moe-experts reports
    # (the next op's launch call returned after the gap ended); reported to the lead.
    "queued_ns",
}


# --- the JSON checker ------------------------------------------------------------------

def strict_loads(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity."""
    def refuse(name):
        raise ValueError(f"non-finite number {name} in the JSON")
    return json.loads(text, parse_constant=refuse)


def check_document(doc) -> list[str]:
    """Impossible values anywhere in an analyze document, as 'path: problem' lines.

    Every number must be finite and fit in int64; must not be negative (SIGNED names the
    exceptions); a time (a key ending in _ns, or start/end/at/ns) must be below 2^62; a
    percentage (a key containing pct) must lie within [0, 100]."""
    problems: list[str] = []

    def walk(value, path: list[str], key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, [*path, str(k)], str(k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, [*path, str(i)], key)
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            return
        elif isinstance(value, (int, float)):
            where = "/".join(path)
            if not math.isfinite(value) or abs(value) >= 2**63:
                problems.append(f"{where}: impossible number {value}")
                return
            if value < 0 and key not in SIGNED:
                problems.append(f"{where}: negative {value}")
            if ((key.endswith("_ns") or key in ("ns", "start", "end", "at"))
                    and abs(value) >= TIME_LIMIT):
                problems.append(f"{where}: time {value} >= 2^62")
            if "pct" in key and not (-1e-9 <= value <= 100 + 1e-9):
                problems.append(f"{where}: percentage {value} outside [0, 100]")
        else:
            problems.append(f"{'/'.join(path)}: unexpected value {value!r}")

    walk(doc, [], "")
    return problems


def test_checker_catches_impossible_values():
    doc = {"metrics": {"span_ns": -5, "gpu_busy_pct": 104.0, "kernels": 3},
           "findings": [{"cost_ns": 2**62, "evidence": {"gaps": [{"start": 1.5e300}]}},
                        {"priority": -1, "queued_ns": -3, "count": -1}]}
    found = check_document(doc)
    assert any("span_ns: negative" in p for p in found)
    assert any("gpu_busy_pct: percentage" in p for p in found)
    assert any("cost_ns: time" in p for p in found)
    assert any("gaps/0/start: impossible" in p for p in found)
    assert any("1/count: negative" in p for p in found)
    assert not any("priority" in p or "queued_ns" in p for p in found)
    with pytest.raises(ValueError, match="non-finite"):
        strict_loads('{"a": NaN}')
    with pytest.raises(ValueError, match="non-finite"):
        strict_loads('[Infinity]')


# --- the reports and their schema ------------------------------------------------------

@dataclass(frozen=True)
class SourceInfo:
    path: Path
    tables: dict[str, tuple[str, ...]]          # the SCHEMA tables it has -> columns


def _source_info(path: Path) -> SourceInfo:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                            "WHERE type = 'table'")]
        tables = {t: tuple(r[1] for r in conn.execute(f'PRAGMA table_info("{t}")'))
                  for t in names}
    finally:
        conn.close()
    return SourceInfo(path, tables)


_INFO: dict[Path, SourceInfo] = {}


def source_info(path: Path) -> SourceInfo:
    if path not in _INFO:
        _INFO[path] = _source_info(path)
    return _INFO[path]


# --- mutations --------------------------------------------------------------------------

VALUE_OPS = {           # op -> SQL value expression (bound as a parameter where not SQL)
    "null": ("sql", "NULL"),
    "text": ("param", "garbage"),
    "numtext": ("param", "12x"),
    "blob": ("param", b"\x00\xffblob"),
    "real": ("param", 1.5),
    "inf": ("sql", "9e999"),
    "-inf": ("sql", "-9e999"),
    "int64max": ("param", 2**63 - 1),
    "int64min": ("param", -(2**63)),
    "2^62": ("param", 2**62),
    "2^53": ("param", 2**53 + 1),
    "-1": ("param", -1),
    "0": ("param", 0),
    "dangling": ("param", 7777),
    "nearid": ("param", 3),       # an id beside the real ones: a device, stream, thread
                                  # or string that the report's other tables do not list
    "bigid": ("param", 2**31 + 5),
    "badutf8": ("sql", "CAST(X'41ff42c3283fe282' AS TEXT)"),
    "hugestr": ("param", "[bold]x" + "y" * 1_000_000),
    "escapes": ("param", "k\x1b]0;t\x07\x1b[2J[/x]\x9b1m\u202e\n"),   # terminal injection
}
# Text columns whose values gpugap shows (kernel, API, NVTX, GPU and copy-kind names);
# StringIds twice: it names most of them.
NAME_COLUMNS = (("StringIds", "value"), ("StringIds", "value"), ("NVTX_EVENTS", "text"),
                ("TARGET_INFO_GPU", "name"), ("ENUM_CUDA_MEMCPY_OPER", "label"),
                ("ENUM_CUDA_MEM_KIND", "label"), ("META_DATA_EXPORT", "value"))
SCOPES = {"all": "1", "some": "rowid % 7 = 3", "half": "rowid % 2 = 0",
          "one": 'rowid = (SELECT min(rowid) FROM "{t}")'}
TABLE_OPS = ("drop_table", "empty_table", "dup_rows", "huge_rowid", "swap_times",
             "rename_badutf8", "retype_decl")
FILE_OPS = ("bitflip", "zero_page", "truncate")


@dataclass
class Mutation:
    kind: str                   # a VALUE_OPS key, "drop_column", a TABLE_OPS or FILE_OPS
    table: str = ""
    column: str = ""
    scope: str = "all"
    arg: int = 0

    def describe(self) -> str:
        if self.kind in FILE_OPS:
            return f"{self.kind}({self.arg})"
        if self.kind in TABLE_OPS or self.kind == "junk_badutf8":
            return (f"{self.kind} {self.table}{'.' + self.column if self.column else ''}"
                    f"{f' ({self.arg})' if self.arg else ''}")
        if self.kind == "drop_column":
            return f"drop column {self.table}.{self.column}"
        return f"set {self.table}.{self.column} = {self.kind} where {self.scope}"


@dataclass
class Case:
    index: int
    source: Path
    mutations: list[Mutation] = field(default_factory=list)

    @property
    def rendered(self) -> bool:
        """One case in four also runs ``analyze COPY --html H --svg S`` (terminal output,
        HTML and SVG of the broken report, written outside the input's directory); half
        of them through the fast reader."""
        return self.index % 8 in (2, 7)

    @property
    def fast(self) -> bool:
        """Odd cases read every table through the fast (ADBC) reader and prefetch, as
        reports of 50k rows and more are; even ones through sqlite3."""
        return self.index % 2 == 1

    def describe(self) -> str:
        return (f"case {self.index} ({self.source.name}{', fast reader' if self.fast else ''}"
                f"{', rendered' if self.rendered else ''}): "
                + "; ".join(m.describe() for m in self.mutations))


# Systematic cases: each column gpugap reads (that some real report has) with each of
# these, in turn; two cases in three are systematic, so the default run breaks every
# column at least once and GPUGAP_FUZZ_CASES=1600 every column in each of these ways.
SYSTEMATIC_OPS = ("drop_column", "null", "text", "blob", "inf", "int64max", "-1", "badutf8")


def systematic_pairs() -> list[tuple[str, str]]:
    pairs = {(t, c) for path in SOURCES for t, have in source_info(path).tables.items()
             if t in SCHEMA for c in SCHEMA[t] if c in have}
    return sorted(pairs)


def systematic_case(k: int, rng: random.Random) -> Case | None:
    pairs = systematic_pairs()
    if k >= len(pairs) * len(SYSTEMATIC_OPS):
        return None
    table, column = pairs[k % len(pairs)]
    op = SYSTEMATIC_OPS[(k // len(pairs) + k) % len(SYSTEMATIC_OPS)]
    source = rng.choice([p for p in SOURCES if column in source_info(p).tables.get(table, ())])
    return Case(-1, source, [Mutation(op, table, column, "all" if k % 2 else "some")])


def make_case(index: int, seed: int = SEED) -> Case:
    rng = random.Random(f"gpugap-fuzz-{seed}-{index}")
    if index % 3 != 2:
        case = systematic_case(index - index // 3, rng)
        if case is not None:
            case.index = index
            return case
    source = rng.choice(SOURCES)
    info = source_info(source)
    read_tables = sorted(t for t in SCHEMA if t in info.tables
                         and any(c in info.tables[t] for c in SCHEMA[t]))
    case = Case(index, source)
    for _ in range(rng.choices([1, 2, 3], weights=[70, 20, 10])[0]):
        roll = rng.random()
        names = [tc for tc in NAME_COLUMNS if tc[1] in info.tables.get(tc[0], ())]
        if roll < 0.12 and names:
            # The text gpugap shows: names hostile, huge, undecodable or missing.
            table, column = rng.choice(names)
            kind = rng.choice(["escapes", "escapes", "hugestr", "badutf8", "null", "blob"])
            scope = "one" if kind == "hugestr" else rng.choice(list(SCOPES))
            case.mutations.append(Mutation(kind, table, column, scope))
        elif roll < 0.72:
            table = rng.choice(read_tables)
            column = rng.choice([c for c in SCHEMA[table] if c in info.tables[table]])
            kind = rng.choice(["drop_column", *VALUE_OPS, "null", "text", "inf", "badutf8"])
            scope = "one" if kind == "hugestr" else rng.choice(list(SCOPES))
            case.mutations.append(Mutation(kind, table, column, scope))
        elif roll < 0.90:
            kind = rng.choice([*TABLE_OPS, "junk_badutf8"])
            table = rng.choice(read_tables)
            column = ""
            arg = 0
            if kind == "huge_rowid":
                arg = rng.choice([2**30, 2**40, 2**62])
            if kind == "retype_decl":
                column = rng.choice([c for c in SCHEMA[table] if c in info.tables[table]])
            if kind == "swap_times" and "start" not in info.tables[table]:
                table = "CUPTI_ACTIVITY_KIND_KERNEL"
            case.mutations.append(Mutation(kind, table, column, arg=arg))
        else:
            kind = rng.choice(FILE_OPS)
            case.mutations.append(Mutation(kind, arg=rng.randrange(1 << 30)))
            break                     # file damage comes last
    return case


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")]


def _rebuild(conn: sqlite3.Connection, table: str, select: list[str]) -> None:
    """Replace *table* by a table of the given select expressions (no constraints)."""
    tmp = f"{table}__fuzz"
    conn.execute(f"CREATE TABLE {_q(tmp)} AS SELECT {', '.join(select)} FROM {_q(table)}")
    conn.execute(f"DROP TABLE {_q(table)}")
    conn.execute(f"ALTER TABLE {_q(tmp)} RENAME TO {_q(table)}")


def _set_schema_name(conn: sqlite3.Connection, old: str, new: bytes) -> None:
    """Rename a table to a name that is not valid UTF-8 (through writable_schema)."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                          (old,)).fetchone()
    rest = sql[sql.index("(", len("CREATE TABLE")):]
    new_sql = b'CREATE TABLE "' + new + b'" ' + rest.encode()
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET name = CAST(? AS TEXT), tbl_name = CAST(? AS TEXT),"
                 " sql = CAST(? AS TEXT) WHERE type = 'table' AND name = ?",
                 (new, new, new_sql, old))
    conn.execute("PRAGMA writable_schema = OFF")


def apply_sql(path: Path, m: Mutation) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        t = m.table
        if m.kind == "drop_column":
            try:
                conn.execute(f"ALTER TABLE {_q(t)} DROP COLUMN {_q(m.column)}")
            except sqlite3.OperationalError:        # a key or indexed column: rebuild
                _rebuild(conn, t, [_q(c) for c in _columns(conn, t) if c != m.column])
        elif m.kind in VALUE_OPS:
            how, value = VALUE_OPS[m.kind]
            where = SCOPES[m.scope].format(t=t.replace('"', '""'))
            sql = f"UPDATE {_q(t)} SET {_q(m.column)} = " \
                  f"{value if how == 'sql' else '?'} WHERE {where}"
            try:
                conn.execute(sql, () if how == "sql" else (value,))
            except sqlite3.IntegrityError:   # NOT NULL, key or type constraint: drop them
                _rebuild(conn, t, [_q(c) for c in _columns(conn, t)])
                conn.execute(sql, () if how == "sql" else (value,))
        elif m.kind == "drop_table":
            conn.execute(f"DROP TABLE {_q(t)}")
        elif m.kind == "empty_table":
            conn.execute(f"DELETE FROM {_q(t)}")
        elif m.kind == "dup_rows":
            if not conn.execute(f"INSERT OR IGNORE INTO {_q(t)} SELECT * FROM {_q(t)}"
                                ).rowcount:             # a key refused them: drop it
                _rebuild(conn, t, [_q(c) for c in _columns(conn, t)])
                conn.execute(f"INSERT INTO {_q(t)} SELECT * FROM {_q(t)}")
        elif m.kind == "huge_rowid":
            cols = ", ".join(_q(c) for c in _columns(conn, t))
            conn.execute(f"INSERT OR REPLACE INTO {_q(t)} (rowid, {cols}) "
                         f"SELECT {m.arg}, {cols} FROM {_q(t)} LIMIT 1")
        elif m.kind == "swap_times":
            conn.execute(f'UPDATE {_q(t)} SET "start" = "end", "end" = "start" '
                         f"WHERE rowid % 3 = 0")
        elif m.kind == "retype_decl":
            _rebuild(conn, t, [f"CAST({_q(c)} AS TEXT) AS {_q(c)}" if c == m.column
                               else _q(c) for c in _columns(conn, t)])
        elif m.kind == "rename_badutf8":
            _set_schema_name(conn, t, t.encode()[:6] + b"\xff\xfe" + t.encode()[6:])
        elif m.kind == "junk_badutf8":
            conn.execute("CREATE TABLE fuzz_junk (a INTEGER)")
            conn.execute("INSERT INTO fuzz_junk VALUES (1)")
            _set_schema_name(conn, "fuzz_junk", b"junk\xc3\x28\xff")
        else:
            raise ValueError(m.kind)
    finally:
        conn.close()


def apply_file(path: Path, m: Mutation) -> None:
    rng = random.Random(m.arg)
    data = bytearray(path.read_bytes())
    if m.kind == "bitflip":
        for _ in range(rng.randint(1, 64)):
            pos = rng.randrange(len(data))
            data[pos] ^= 1 << rng.randrange(8)
    elif m.kind == "zero_page":
        page = int.from_bytes(data[16:18], "big") or 4096
        k = rng.randrange(max(len(data) // page, 1))
        data[k * page:(k + 1) * page] = bytes(len(data[k * page:(k + 1) * page]))
    elif m.kind == "truncate":
        del data[rng.randrange(len(data)):]
    path.write_bytes(bytes(data))


def build(case: Case, directory: Path) -> tuple[Path, list[str]]:
    """The mutated copy, and the mutations that could not be applied (with why)."""
    path = directory / f"fuzz-{case.index}.sqlite"
    shutil.copyfile(case.source, path)
    skipped = []
    for m in case.mutations:
        try:
            if m.kind in FILE_OPS:
                apply_file(path, m)
            else:
                apply_sql(path, m)
        except (sqlite3.Error, ValueError, TypeError) as exc:
            skipped.append(f"{m.describe()}: not applied ({exc})")
    for extra in directory.glob(f"{path.name}-*"):     # journals of the mutation step
        extra.unlink()
    return path, skipped


# --- running a case ---------------------------------------------------------------------

def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _invoke(argv: list[str], fast: bool) -> tuple[int | None, str, str, str | None]:
    """``main(argv)`` in this process: exit code, stdout, stderr, escaped traceback."""
    from gpugap.cli import main
    from gpugap.report import reader

    out, err = io.StringIO(), io.StringIO()
    escaped = None
    fast_min_rows = reader.FAST_MIN_ROWS
    reader.FAST_MIN_ROWS = 0 if fast else fast_min_rows
    with warnings.catch_warnings():
        warnings.simplefilter("always")      # each case shows its own warnings
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except BaseException:            # noqa: BLE001 - what the fuzzer looks for
                code, escaped = None, traceback.format_exc()
            finally:
                reader.FAST_MIN_ROWS = fast_min_rows
    return code, out.getvalue(), err.getvalue(), escaped


# Control characters no rendering of a report may hold: C0 but tab/newline, DEL, C1.
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def run_case(case: Case, directory: Path) -> dict:
    """Build the case, run analyze on it in this process, and judge the outcome."""
    directory.mkdir(parents=True, exist_ok=True)
    path, skipped = build(case, directory)
    before = _digest(path)
    files = sorted(p.name for p in directory.iterdir())
    t0 = time.monotonic()
    code, out, err, escaped = _invoke(["analyze", str(path), "--json"], case.fast)
    problems = judge(code, out, err, escaped)
    stderr = err
    if case.rendered:
        # The terminal (not a tty here: rich adds no escape sequence of its own), the
        # HTML and the SVG: same exit code, no traceback, no raw control character.
        outdir = directory.parent / f"{directory.name}-out"
        shutil.rmtree(outdir, ignore_errors=True)
        outdir.mkdir()
        html, svg = outdir / "r.html", outdir / "r.svg"
        code2, out2, err2, escaped2 = _invoke(
            ["analyze", str(path), "--html", str(html), "--svg", str(svg)], case.fast)
        stderr += err2
        rendered = judge(code2, out2, err2, escaped2, max_stderr=MAX_STDERR_LINES + 2,
                         json_out=False)
        if code2 != code and escaped2 is None and escaped is None:
            rendered.append(f"exit {code2} rendered, {code} with --json")
        for name, text in (("stdout", out2),
                           *((p.name, p.read_text(errors="replace")) for p in (html, svg)
                             if p.is_file())):
            if _RAW_CONTROL.search(text):
                rendered.append(f"raw control character in the {name}")
        if svg.is_file():
            try:
                ElementTree.parse(svg)
            except ElementTree.ParseError as exc:
                rendered.append(f"the SVG is not well-formed XML ({exc})")
        if code2 == 0 and not (html.is_file() and svg.is_file()):
            rendered.append("exit 0 without the --html/--svg files")
        shutil.rmtree(outdir, ignore_errors=True)
        problems += [f"rendered: {p}" for p in rendered]
        escaped = escaped or escaped2
    seconds = time.monotonic() - t0
    if _digest(path) != before:
        problems.append("the input was modified")
    if sorted(p.name for p in directory.iterdir()) != files:
        problems.append("files appeared beside the input: "
                        f"{sorted(set(p.name for p in directory.iterdir()) - set(files))}")
    path.unlink()
    return {"index": case.index, "describe": case.describe(), "code": code,
            "seconds": round(seconds, 3), "problems": problems, "skipped": skipped,
            "traceback": escaped, "stderr": stderr[-4000:]}


def judge(code, out: str, err: str, escaped: str | None,
          max_stderr: int = MAX_STDERR_LINES, json_out: bool = True) -> list[str]:
    problems = []
    if escaped is not None:
        problems.append("traceback: " + escaped.strip().splitlines()[-1])
    elif code not in EXIT_CODES:
        problems.append(f"exit code {code}")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if "Traceback" in err:
        problems.append("traceback on stderr")
    if len(lines) > max_stderr:
        problems.append(f"{len(lines)} stderr lines: {lines[:6]}")
    if code not in (0, None) and not any(ln.startswith("gpugap: error: ") for ln in lines):
        problems.append(f"exit {code} without a 'gpugap: error:' line: {lines[:3]}")
    if json_out and (code == 0 or out.strip()):
        try:
            doc = strict_loads(out)
        except ValueError as exc:
            problems.append(f"stdout is not strict JSON ({exc}): {out[:200]!r}")
        else:
            problems += [f"json {p}" for p in check_document(doc)[:20]]
    return problems


# --- the pool: worker processes with a per-case watchdog --------------------------------

def _worker(conn, directory: str) -> None:
    import gpugap.analysis  # noqa: F401 - imported once per worker, before the cases
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        if case is None:
            return
        try:
            result = run_case(case, Path(directory))
        except BaseException:                # noqa: BLE001 - the harness's own failure
            result = {"index": case.index, "describe": case.describe(), "code": None,
                      "seconds": 0, "skipped": [], "stderr": "",
                      "traceback": traceback.format_exc(),
                      "problems": ["harness error: " + traceback.format_exc()]}
        conn.send(result)


def run_cases(cases: list[Case], directory: Path, workers: int = WORKERS,
              timeout: float = TIMEOUT_S) -> list[dict]:
    ctx = multiprocessing.get_context("fork")
    queue = list(reversed(cases))
    results: dict[int, dict] = {}
    slots: list[dict] = []

    def spawn(n: int) -> dict:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child, str(directory / f"w{n}")),
                           daemon=True)
        proc.start()
        child.close()
        return {"n": n, "proc": proc, "conn": parent, "case": None, "t0": 0.0}

    def fail(slot: dict, why: str) -> None:
        case = slot["case"]
        results[case.index] = {"index": case.index, "describe": case.describe(),
                               "code": None, "seconds": time.monotonic() - slot["t0"],
                               "problems": [why], "skipped": [], "traceback": None,
                               "stderr": ""}
        slot["proc"].kill()
        slot["proc"].join()
        shutil.rmtree(directory / f"w{slot['n']}", ignore_errors=True)
        slots[slots.index(slot)] = spawn(slot["n"])

    for n in range(max(1, min(workers, len(cases)))):
        slots.append(spawn(n))
    try:
        while queue or any(s["case"] is not None for s in slots):
            for slot in slots:
                if slot["case"] is None and queue:
                    slot["case"], slot["t0"] = queue.pop(), time.monotonic()
                    slot["conn"].send(slot["case"])
            busy = [s for s in slots if s["case"] is not None]
            ready = wait_for([s["conn"] for s in busy], timeout=0.5)
            for slot in busy:
                if slot["conn"] in ready:
                    try:
                        result = slot["conn"].recv()
                    except (EOFError, OSError):
                        fail(slot, f"worker died (exit code {slot['proc'].exitcode})")
                        continue
                    results[result["index"]] = result
                    slot["case"] = None
                elif time.monotonic() - slot["t0"] > timeout:
                    fail(slot, f"hang: no result within {timeout:.0f} s")
    finally:
        for slot in slots:
            with contextlib.suppress(OSError):
                slot["conn"].send(None)
            slot["proc"].join(timeout=5)
            if slot["proc"].is_alive():
                slot["proc"].kill()
    return [results[c.index] for c in cases]


def summary(results: list[dict]) -> str:
    """Counts, then every failed case: its mutations, problems and traceback."""
    failed = [r for r in results if r["problems"]]
    hangs = sum(1 for r in failed if any(p.startswith("hang") for p in r["problems"]))
    modified = sum(1 for r in failed if "the input was modified" in r["problems"])
    kinds = Counter(re.sub(r"/\d+", "/*", p.split(":")[0]) for r in failed
                    for p in r["problems"])
    slowest = sorted(results, key=lambda r: -r["seconds"])[:3]
    lines = [f"{len(results)} cases, {len(failed)} failed; exit codes "
             f"{dict(Counter(r['code'] for r in results))}; tracebacks "
             f"{sum(1 for r in results if r['traceback'])}, hangs {hangs}, inputs modified "
             f"{modified}",
             f"problems: {dict(kinds)}",
             "slowest: " + ", ".join(f"case {r['index']} {r['seconds']:.1f} s"
                                     for r in slowest)]
    for r in failed:
        lines.append(f"--- {r['describe']} -> exit {r['code']}")
        lines += [f"    {p}" for p in r["problems"]]
        if r["traceback"]:
            lines.append("    " + "\n    ".join(r["traceback"].strip().splitlines()[-12:]))
    return "\n".join(lines)


@pytest.mark.slow
def test_mutations_apply_to_real_reports(tmp_path):
    """The fuzzer itself: every kind of mutation applies to a real report."""
    source = next(p for p in SOURCES if p.name == "moe-experts-bad.sqlite")
    ops = ([Mutation(k, "CUPTI_ACTIVITY_KIND_KERNEL", "end", "some") for k in VALUE_OPS]
           + [Mutation("drop_column", "StringIds", "id"),
              Mutation("drop_column", "CUPTI_ACTIVITY_KIND_KERNEL", "end")]
           + [Mutation(k, "StringIds", "value" if k == "retype_decl" else "", arg=2**40)
              for k in (*TABLE_OPS, "junk_badutf8") if k != "swap_times"]
           + [Mutation("swap_times", "CUPTI_ACTIVITY_KIND_KERNEL")]
           + [Mutation(k, arg=5) for k in FILE_OPS])
    for i, m in enumerate(ops):
        path, skipped = build(Case(i, source, [m]), tmp_path)
        assert not skipped, skipped
        assert _digest(path) != _digest(source), m.describe()
        path.unlink()
    assert make_case(3).describe() == make_case(3).describe()       # reproducible


@pytest.mark.slow
def test_fuzz(tmp_path):
    indices = ONLY or list(range(CASES))
    for path in SOURCES:                 # read the schemas once, before the workers fork
        source_info(path)
    import gpugap.analysis  # noqa: F401 - the workers inherit the imports
    import gpugap.cli  # noqa: F401

    cases = [make_case(i) for i in indices]
    t0 = time.monotonic()
    results = run_cases(cases, tmp_path)
    report = summary(results) + f"\n{time.monotonic() - t0:.1f} s"
    print(report, file=sys.stderr)
    assert not any(r["problems"] for r in results), report


# --- the edges around the reports (issue 24): scheduler addresses, signals, full disks ---
# Each edge runs a handful of seeded cases in the default suite (a few seconds in all) and
# scales with GPUGAP_FUZZ_CASES, the long mode (GPUGAP_FUZZ_CASES=1600: 6.7 times as
# many); GPUGAP_FUZZ_SEED gives other cases. A failure prints every case's outcome.

def edge_count(default: int) -> int:
    """*default* cases in the default suite, scaled as GPUGAP_FUZZ_CASES scales the
    report cases."""
    return max(1, round(default * CASES / DEFAULT_CASES))


def edge_rng(edge: str, index: int) -> random.Random:
    return random.Random(f"gpugap-fuzz-{edge}-{SEED}-{index}")


def edge_summary(edge: str, outcomes: list[tuple[str, str, list[str]]]) -> str:
    """Counts by outcome, then every failed case: (case, outcome, problems)."""
    failed = [o for o in outcomes if o[2]]
    tracebacks = sum(1 for o in failed if any("traceback" in p.lower() for p in o[2]))
    hangs = sum(1 for o in failed if any(p.startswith("hang") for p in o[2]))
    broken = sum(1 for o in failed if any(p.startswith("broken") for p in o[2]))
    lines = [f"{edge}: {len(outcomes)} cases, {len(failed)} failed; tracebacks {tracebacks},"
             f" hangs {hangs}, broken outputs {broken}; outcomes "
             f"{dict(Counter(o[1] for o in outcomes))}"]
    for case, outcome, problems in failed:
        lines.append(f"--- {case} -> {outcome}")
        lines += [f"    {p}" for p in problems]
    return "\n".join(lines)


def one_error_line(err: str, prefix: str = "gpugap: error: ") -> list[str]:
    """Problems with *err* as the one line a failure must be ([] when it is)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if "Traceback" in err:
        return ["traceback on stderr: " + (lines[-1] if lines else "")]
    if len(lines) != 1 or not lines[0].startswith(prefix):
        return [f"not one {prefix.strip()!r} line: {lines[:4]}"]
    return []


# Scheduler addresses: generated from parts a user (or a script) could type, or random.
_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc", "http", "https", "TCP", "ftp", "",
            "tcp:", "t\u0441p", "tcp\x00", "ipc", "x" * 70)
_HOSTS = ("127.0.0.1", "localhost", "10.0.0.5", "scheduler", "", "[::1]", "::1", "[::1",
          "[fe80::1%eth0]", "999.1.1.1", "user:pw@host", "@", "h\u00f6st.invalid",
          "a b", "%41", "\u202ehost", "host\n", "-", "x" * 300, "[]", "[v1.x]", "0")
_PORTS = ("8786", "1", "65535", "", "0", "-1", "65536", "9" * 30, "0x10", "80a", " 80",
          "\u0968\u096e", "1e3", "+80", "8786:8786", "\uff18\uff17")
_TAILS = ("", "", "", "/", "/x", "?a=1", "#f", "//", "/..", "\x00", ";x", " ")


def random_address(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.08:                      # bytes of any kind, any length
        size = rng.choice([0, 1, 5, 40, 5000, 200_000])
        if rng.random() < 0.5:
            return rng.randbytes(size).decode("latin-1")
        return rng.randbytes(size * 2).decode("utf-16-le", "replace")
    if roll < 0.12:
        return rng.choice(["", " ", "\n", "://", ":", "tcp://", "tcp://:", "::::",
                           "tcp://127.0.0.1:8786" * 500])
    scheme, host, port = rng.choice(_SCHEMES), rng.choice(_HOSTS), rng.choice(_PORTS)
    text = (f"{scheme}://" if rng.random() < 0.85 else "") + host
    if rng.random() < 0.9:
        text += f":{port}"
    return text + rng.choice(_TAILS)


def judge_address(address: str) -> tuple[str, list[str]]:
    """check_address: a (scheme, host, port) a connection can use, or one UsageError line;
    never another exception."""
    from gpugap.analysis.scheduler import SCHEMES, check_address
    from gpugap.errors import UsageError

    try:
        scheme, host, port = check_address(address)
    except UsageError as exc:
        message = str(exc)
        if "\n" in message or "\r" in message or not message:
            return "refused", [f"not one line: {message[:200]!r}"]
        return "refused", []
    except BaseException as exc:        # noqa: BLE001 - what the fuzzer looks for
        return "traceback", [f"traceback: {type(exc).__name__}: {exc}"[:300]]
    problems = []
    if scheme not in SCHEMES or not isinstance(host, str) or not isinstance(port, int):
        problems.append(f"accepted as {(scheme, host, port)!r}")
    elif scheme == "inproc":
        pass                             # a cluster inside this process: taken as given
    elif not 0 < port < 65536 or not is_host(host):
        problems.append(f"accepted as {(scheme, host, port)!r}")
    elif host not in address.lower() or str(port) not in address:
        problems.append(f"accepted as {(scheme, host, port)!r}, not what was typed")
    elif "#" in address or any(c < " " or c == "\x7f" for c in address.strip()):
        problems.append(f"accepted as {(scheme, host, port)!r}, dropping part of it")
    return "accepted", problems


_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


def is_host(host: str) -> bool:
    """An IP address (v6 with its scope) or a host name: labels of letters, digits,
    hyphens (and the underscores of container names), international ones as IDNA."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host.split("%", 1)[0] if ":" in host else host)
        return ":" not in host or "%" not in host or bool(host.split("%", 1)[1])
    if ":" in host or re.fullmatch(r"[0-9.]+", host):
        return False
    try:
        name = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return False
    return len(name) <= 253 and all(_LABEL.fullmatch(x) for x in name.split("."))


def test_fuzz_scheduler_addresses():
    """Generated addresses through check_address: never a traceback."""
    outcomes = []
    for i in range(edge_count(200)):
        address = random_address(edge_rng("address", i))
        outcome, problems = judge_address(address)
        outcomes.append((f"address {i} {address[:80]!r}", outcome, problems))
    report = edge_summary("scheduler addresses", outcomes)
    print(report, file=sys.stderr)
    assert not any(o[2] for o in outcomes), report


def test_fuzz_scheduler_addresses_through_the_cli():
    """`analyze DIR --scheduler ADDR`: always exit 2 and one line (nothing listens where a
    well-formed address points: a closed port, an unroutable host, a name that does not
    resolve), within the timeout and 2 s; never a traceback."""
    pytest.importorskip("distributed")
    ranks = DATA / "captures" / "ranks"
    timeout = 0.3
    outcomes = []
    for i in range(edge_count(8)):
        rng = edge_rng("cli-address", i)
        address = random_address(rng)
        if rng.random() < 0.3:            # a well-formed one, so the probe runs too
            address = (f"{rng.choice(['tcp', 'tls', 'ucx', 'ws', 'wss'])}://"
                       f"{rng.choice(['127.0.0.1', 'localhost', '[::1]'])}:"
                       f"{rng.choice([1, 9, 47])}")
        t0 = time.monotonic()
        code, out, err, escaped = _invoke(["analyze", str(ranks), "--scheduler", address,
                                           "--scheduler-timeout", str(timeout)], False)
        took = time.monotonic() - t0
        problems = []
        if escaped is not None:
            problems.append("traceback: " + escaped.strip().splitlines()[-1])
        else:
            problems += one_error_line(err)
            if code != 2:
                problems.append(f"exit {code}, not 2")
            if out:
                problems.append(f"stdout: {out[:100]!r}")
        if took > timeout + 2 + 3:        # + 3: the command's own start (imports, parsing)
            problems.append(f"hang: {took:.1f} s")
        outcomes.append((f"cli {i} {address[:80]!r}", f"exit {code}", problems))
    report = edge_summary("--scheduler on the command line", outcomes)
    print(report, file=sys.stderr)
    assert not any(o[2] for o in outcomes), report


# Listeners on 127.0.0.1 that are not (or are) a Dask scheduler: each follows a random
# plan of pauses, sends and a close, or refuses the connection, or never accepts it.
def random_plan(rng: random.Random, timeout: float) -> list[tuple[str, object]]:
    roll = rng.random()
    if roll < 0.08:
        return [("refuse", None)]
    if roll < 0.14:
        return [("never_accept", None)]
    plan: list[tuple[str, object]] = []
    if rng.random() < 0.15:              # a Dask-like handshake: the probe must pass it
        body = b"\x83\xabcompression\xc0\xa6python\x93\x03\x0b\x07\xafpickle-protocol\x05"
        payload = struct.pack("<Q", len(body)) + body
    else:
        head = rng.choice([b"", b"HTTP/1.1 400 Bad Request\r\n\r\n", b"SSH-2.0-x\r\n",
                           struct.pack("<Q", rng.choice([0, 1, 12, 1 << 20, (1 << 20) + 1,
                                                         1 << 62, 2**64 - 1]))])
        payload = head + rng.randbytes(rng.choice([0, 1, 3, 7, 8, 100, 5000, 60_000]))
    cuts = sorted(rng.sample(range(len(payload) + 1), min(len(payload) + 1,
                                                           rng.randint(1, 4))))
    pieces = [payload[a:b] for a, b in zip([0, *cuts], [*cuts, len(payload)], strict=True) if b > a]
    for piece in pieces:
        if rng.random() < 0.4:
            plan.append(("sleep", rng.choice([0.01, 0.05, timeout / 2, timeout * 1.5])))
        plan.append(("send", piece))
    if rng.random() < 0.4:
        plan.append(("sleep", rng.choice([0.05, timeout * 2])))
    plan.append(rng.choice([("close", None), ("close", None), ("reset", None),
                            ("hold", None)]))
    return plan


class Listener:
    """A socket on 127.0.0.1 following *plan* for its first connection, in a thread."""

    def __init__(self, plan: list[tuple[str, object]], hold: float) -> None:
        self.plan, self.hold = plan, hold
        self.done = threading.Event()         # set when the probe is over: pauses end
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = None
        if plan[0][0] == "refuse":        # bound, never listening: refused
            return
        self.sock.listen(1)
        if plan[0][0] == "never_accept":  # the kernel completes the handshake; nobody reads
            return
        self.sock.settimeout(hold)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            try:
                for action, arg in self.plan:
                    if action == "sleep":
                        self.done.wait(arg)
                    elif action == "send":
                        conn.sendall(arg)
                    elif action == "reset":   # RST, not FIN
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                    elif action == "hold":
                        self.done.wait(self.hold)
            except OSError:
                pass                          # the probe gave up and closed first

    def close(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join(self.hold + 5)
        self.sock.close()


def test_fuzz_scheduler_listeners():
    """probe against listeners that answer random bytes, pause, close or reset at random
    points: one UsageError line within the timeout and 2 s (or nothing, where a Dask-like
    handshake came whole), never a hang, never more than a few MB allocated."""
    from gpugap.analysis.scheduler import probe
    from gpugap.errors import UsageError

    timeout = 0.25
    outcomes = []
    for i in range(edge_count(8)):
        rng = edge_rng("listener", i)
        plan = random_plan(rng, timeout)
        sent = b"".join(arg for action, arg in plan if action == "send")
        dask_like = b"pickle-protocol" in sent and 0 < struct.unpack("<Q", sent[:8])[0] <= (
            1 << 20) and len(sent) >= 8 + struct.unpack("<Q", sent[:8])[0]
        listener = Listener(plan, hold=timeout * 3)
        tracemalloc.start()
        t0 = time.monotonic()
        problems = []
        try:
            probe(f"tcp://127.0.0.1:{listener.port}", timeout)
            outcome = "passed"
        except UsageError as exc:
            outcome = "refused"
            if "\n" in str(exc):
                problems.append(f"not one line: {str(exc)[:200]!r}")
        except BaseException as exc:      # noqa: BLE001 - what the fuzzer looks for
            outcome = "traceback"
            problems.append(f"traceback: {type(exc).__name__}: {exc}"[:300])
        took = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        listener.close()
        if took > timeout + 2:
            problems.append(f"hang: {took:.2f} s with a {timeout} s timeout")
        if peak > 4 << 20:
            problems.append(f"allocated {peak >> 20} MB")
        if outcome == "passed" and not dask_like:
            problems.append("passed what is no Dask handshake")
        describe = " ".join(f"{a}({len(x) if isinstance(x, bytes) else x})" if x is not None
                            else a for a, x in plan)
        outcomes.append((f"listener {i}: {describe}", outcome, problems))
    report = edge_summary("scheduler listeners", outcomes)
    print(report, file=sys.stderr)
    assert not any(o[2] for o in outcomes), report


# Real runs of the command (`python -m gpugap analyze` of a committed capture), a few at a
# time, each sent a signal at its moment (or none), each killed past the time limit.
EDGE_CAPTURE = DATA / "captures" / "gemm.sqlite"
REPO = Path(__file__).resolve().parents[1]
GPUGAP_DIR = REPO / "gpugap"


@dataclass
class Run:
    argv: list[str]                     # after `gpugap analyze`
    stdout: Path                        # a file (a tmpfs, /dev/full)
    workdir: Path                       # stderr goes here
    signum: int = 0
    delay: float = 0.0                  # seconds after the start
    unbuffered: bool = False
    code: int | None = None
    stderr: str = ""
    seconds: float = 0.0


def run_processes(runs: list[Run], workers: int = WORKERS, timeout: float = TIMEOUT_S
                  ) -> None:
    """Run each in its own interpreter, *workers* at a time; code None: a hang (killed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    for first in range(0, len(runs), max(1, workers)):
        batch = runs[first:first + max(1, workers)]
        procs = []
        for run in batch:
            run.workdir.mkdir(parents=True, exist_ok=True)
            with open(run.stdout, "wb") as out, open(run.workdir / "stderr", "wb") as err:
                procs.append((run, time.monotonic(), subprocess.Popen(
                    [sys.executable, "-m", "gpugap", "analyze", *run.argv], stdout=out,
                    stderr=err, cwd=run.workdir,
                    env=dict(env, PYTHONUNBUFFERED="1" if run.unbuffered else ""))))
        pending = {id(run) for run, _, _ in procs}
        signalled: set[int] = set()
        while pending:
            now = time.monotonic()
            for run, t0, proc in procs:
                if id(run) not in pending:
                    continue
                if proc.poll() is not None:
                    run.code, run.seconds = proc.returncode, now - t0
                    pending.discard(id(run))
                elif now - t0 > timeout:
                    proc.kill()
                    proc.wait()
                    run.code, run.seconds = None, now - t0
                    pending.discard(id(run))
                elif run.signum and id(run) not in signalled and now - t0 >= run.delay:
                    proc.send_signal(run.signum)
                    signalled.add(id(run))
            time.sleep(0.002)
        for run in batch:
            run.stderr = (run.workdir / "stderr").read_text(errors="replace")
            (run.workdir / "stderr").unlink()


def broken_outputs(paths: list[Path]) -> list[str]:
    """'broken output' problems of the outputs that exist: JSON that does not parse, an
    HTML page without its end, an SVG that is not well-formed XML."""
    problems = []
    for path in paths:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".json":
            try:
                strict_loads(text)
            except ValueError as exc:
                problems.append(f"broken output: {path.name} is not JSON ({exc}), "
                                f"{len(text)} chars")
        elif path.suffix == ".html" and not text.rstrip().endswith("</html>"):
            problems.append(f"broken output: {path.name} ends without </html> "
                            f"({len(text)} chars)")
        elif path.suffix == ".svg":
            try:
                ElementTree.fromstring(text)
            except ElementTree.ParseError as exc:
                problems.append(f"broken output: {path.name} is not well-formed ({exc})")
    return problems


def leftovers(directory: Path, expected: list[Path]) -> list[str]:
    """Files in *directory* other than the outputs asked for (temporary files)."""
    names = {p.name for p in expected}
    extra = sorted(p.name for p in directory.iterdir() if p.name not in names)
    return [f"leftover files in the output directory: {extra}"] if extra else []


def _gpugap_frames(err: str) -> bool:
    """Whether a traceback on *err* passes through gpugap's own code."""
    return any(str(GPUGAP_DIR) in line for line in err.splitlines()
               if line.lstrip().startswith('File "'))


def judge_interrupted(run: Run, outputs: list[Path], outdir: Path) -> tuple[str, list[str]]:
    """Exit 0 and complete outputs, or exit 128 + the signal and exactly the
    `gpugap: interrupted` line, never a partial output or a temporary file left behind.
    Two outcomes lie outside gpugap's code and are counted apart: the interpreter killed
    by SIGTERM or stopped by Ctrl-C before gpugap's first line ran (Python's own start,
    tenths of a second), or after its last (while it exits)."""
    import signal

    name = signal.Signals(run.signum).name
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    problems = broken_outputs(outputs) + leftovers(outdir, outputs)
    if run.code == 0 and "--json" in run.argv:
        problems += broken_outputs([run.stdout])     # cut short, stdout is as far as it got
    if run.code is None:
        return "hang", [f"hang: no exit within {TIMEOUT_S:.0f} s", *problems]
    if run.code == 0:
        outcome = "finished"
        missing = [p.name for p in outputs if not p.is_file()]
        if missing:
            problems.append(f"broken output: exit 0 without {missing}")
        if "Traceback" in run.stderr or any(not ln.startswith("wrote ") for ln in lines):
            problems.append(f"exit 0 with stderr {lines[:4]}")
    elif run.code == 128 + run.signum:
        outcome = "interrupted"
        wanted = re.compile(rf"gpugap: interrupted \({name}\)(; not written: .+)?")
        said = [ln for ln in lines if not ln.startswith("wrote ")]
        if len(said) != 1 or not wanted.fullmatch(said[0]):
            problems.append(f"not the one interrupted line: {lines[:4]}")
    elif run.code == -run.signum and not run.stderr:
        outcome = "killed outside gpugap's code"
    elif ("KeyboardInterrupt" in run.stderr and run.code in (1, -signal.SIGINT)
          and not _gpugap_frames(run.stderr)):
        outcome = "Ctrl-C before gpugap's code"
    else:
        outcome = f"exit {run.code}"
        if "Traceback" in run.stderr:
            problems.append("traceback: " + (lines[-1] if lines else ""))
        else:
            problems.append(f"exit {run.code}: {lines[:4]}")
    return outcome, problems


@pytest.mark.slow
def test_fuzz_signals(tmp_path):
    """SIGINT or SIGTERM at a random moment of a real run (between its start and the
    length of an uninterrupted run), with and without --html/--svg outputs and --json."""
    import signal

    base = Run(["--json", "--html", "out/r.html", str(EDGE_CAPTURE)],
               tmp_path / "base" / "stdout.json", tmp_path / "base")
    (tmp_path / "base" / "out").mkdir(parents=True)
    run_processes([base])
    outcome, problems = judge_interrupted(
        dataclasses_replace(base, signum=signal.SIGINT),
        [tmp_path / "base/out/r.html"], tmp_path / "base/out")
    assert (base.code, outcome, problems) == (0, "finished", []), base.stderr
    length = base.seconds

    runs, expected = [], []
    for i in range(edge_count(2)):
        rng = edge_rng("signal", i)
        workdir = tmp_path / f"s{i}"
        (workdir / "out").mkdir(parents=True)
        argv, outputs = [], []
        if rng.random() < 0.5:
            argv.append("--json")
        for option, name in (("--html", "r.html"), ("--svg", "r.svg")):
            if rng.random() < 0.6:
                argv += [option, f"out/{name}"]
                outputs.append(workdir / "out" / name)
        runs.append(Run([*argv, str(EDGE_CAPTURE)], workdir / "stdout.json", workdir,
                        signum=rng.choice([signal.SIGINT, signal.SIGTERM]),
                        delay=rng.uniform(0, length)))
        expected.append(outputs)
    run_processes(runs)
    outcomes = []
    for i, (run, outputs) in enumerate(zip(runs, expected, strict=True)):
        outcome, problems = judge_interrupted(run, outputs, run.workdir / "out")
        if "--json" not in run.argv and run.code == 0 and not run.stdout.read_text():
            problems.append("broken output: exit 0 and nothing on stdout")
        outcomes.append((f"signal {i}: {signal.Signals(run.signum).name} at "
                         f"{run.delay:.2f} s of {length:.2f} s, {' '.join(run.argv[:-1])}",
                         outcome, problems))
    report = edge_summary("signals", outcomes)
    print(report, file=sys.stderr)
    assert not any(o[2] for o in outcomes), report


@pytest.fixture
def small_filesystems(tmp_path):
    """Mounts a tmpfs of a random size, part of it filled, in a new directory: *mount(rng)*
    gives (directory, description), or None where this user may not mount (not root; CI
    is): /dev/full alone stands for a full disk there."""
    mounted: list[Path] = []

    def mount(rng: random.Random) -> tuple[Path, str] | None:
        where = tmp_path / f"small{len(mounted)}"
        where.mkdir()
        size_k = rng.choice([4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048])
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_k}k", "tmpfs",
                               str(where)], capture_output=True)
        if made.returncode != 0:
            return None
        mounted.append(where)
        taken = rng.choice([0, 0, 1, 4096, 10_000, size_k * 512])
        if taken:
            with contextlib.suppress(OSError), open(where / "filler", "wb") as f:
                f.write(rng.randbytes(taken))
        return where, f"tmpfs {size_k}k, {taken} bytes taken"

    yield mount
    for where in mounted:
        subprocess.run(["umount", str(where)], check=False)


def judge_full(code, err: str, escaped: str | None, outputs: list[Path],
               outdir: Path | None, stdout_doc: Path | None = None) -> tuple[str, list[str]]:
    """Exit 0 with every output complete, or exit 9 with one 'cannot write ...' line
    (after 'wrote' lines for what was written whole); never exit 0 with a broken output,
    never a partial file or a temporary one left. *stdout_doc*: where the JSON on
    stdout went, complete on exit 0 (on exit 9 the line says it is not)."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    problems = broken_outputs(outputs)
    if code == 0 and stdout_doc is not None:
        problems += broken_outputs([stdout_doc])
    if outdir is not None:
        problems += leftovers(outdir, [*outputs, outdir / "filler"])
    if escaped is not None:
        return "traceback", ["traceback: " + escaped.strip().splitlines()[-1], *problems]
    if code is None:
        return "hang", [f"hang: no exit within {TIMEOUT_S:.0f} s", *problems]
    if code == 0:
        missing = [p.name for p in outputs if not p.is_file()]
        if missing:
            problems.append(f"broken output: exit 0 without {missing}")
        if "Traceback" in err or any(not ln.startswith("wrote ") for ln in lines):
            problems.append(f"exit 0 with stderr {lines[:4]}")
        return "complete", problems
    said = [ln for ln in lines if not ln.startswith("wrote ")]
    if code != 9:
        problems.append(("traceback: " + lines[-1]) if "Traceback" in err
                        else f"exit {code}: {lines[:4]}")
    elif len(said) != 1 or not said[0].startswith("gpugap: error: cannot write "):
        problems.append(f"exit 9 without the one write-error line: {lines[:4]}")
    return f"exit {code}", problems


@pytest.mark.slow
def test_fuzz_full_disk_under_stdout(tmp_path, small_filesystems):
    """Standard output on /dev/full (always) and on a tmpfs of random size (where root
    may mount one), with --json or the terminal report, buffered or not."""
    runs, places = [], []
    for i in range(edge_count(2)):
        rng = edge_rng("stdout", i)
        small = small_filesystems(rng) if i % 2 else None
        if small is None:
            stdout, where = Path("/dev/full"), "/dev/full"
            json_out = rng.random() < 0.6
        else:
            stdout, where = small[0] / "o.json", small[1]
            json_out = True
        runs.append(Run(["--json"] * json_out + [str(EDGE_CAPTURE)], stdout,
                        tmp_path / f"w{i}", unbuffered=rng.random() < 0.5))
        places.append(where)
    run_processes(runs)
    outcomes = []
    for i, (run, where) in enumerate(zip(runs, places, strict=True)):
        doc = run.stdout if where != "/dev/full" else None
        outcome, problems = judge_full(run.code, run.stderr, None, [], None, doc)
        if where == "/dev/full" and outcome != "exit 9":
            problems.append(f"{outcome} on /dev/full")
        outcomes.append((f"stdout {i}: {where}, {' '.join(run.argv[:-1]) or 'terminal'}"
                         f"{', unbuffered' if run.unbuffered else ''}", outcome, problems))
    report = edge_summary("full disk under stdout", outcomes)
    print(report, file=sys.stderr)
    assert not any(o[2] for o in outcomes), report


def test_fuzz_full_disk_under_file_outputs(small_filesystems):
    """--html and --svg written into a tmpfs of random size (in this process: the files
    are real, stdout is not the point here)."""
    outcomes = []
    for i in range(edge_count(3)):
        rng = edge_rng("files", i)
        small = small_filesystems(rng)
        if small is None:
            pytest.skip("cannot mount a tmpfs here (not root): the stdout fuzz's /dev/full "
                        "covers the write error")
        directory, where = small
        outputs = []
        argv = ["analyze", str(EDGE_CAPTURE), "--json"]
        for option, name in rng.sample([("--html", "r.html"), ("--svg", "r.svg")],
                                       rng.randint(1, 2)):
            argv += [option, str(directory / name)]
            outputs.append(directory / name)
        code, out, err, escaped = _invoke(argv, False)
        outcome, problems = judge_full(code, err, escaped, outputs, directory)
        if code == 0:
            try:
                strict_loads(out)
            except ValueError as exc:
                problems.append(f"broken output: stdout is not JSON ({exc})")
        outcomes.append((f"files {i}: {where}, {' '.join(argv[3:])}", outcome, problems))
    report = edge_summary("full disk under --html/--svg", outcomes)
    print(report, file=sys.stderr)
    assert not any(o[2] for o in outcomes), report
