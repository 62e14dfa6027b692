"""Trim a real nsys export to fit the repository's 2 MB limit, and say so in its manifest.

    python3 tests/data/programs/trim.py SRC.sqlite DST.sqlite [--manifest M.json]

What goes, and only this: the table OSRT_CALLCHAINS (stack traces of OS runtime calls,
which gpugap never reads) and the OS runtime calls shorter than 10 us (Python's imports
alone make tens of thousands of mmap/stat/open calls of a few microseconds; gpugap reads
OS runtime calls only as evidence of long host waits). Every CUDA, NVTX, GPU and
metadata row stays as nsys wrote it. A capture of the host's own evidence
(--keep-callchains) keeps the call chains of the OS calls that stay, and its evidence
(CPU samples, their stacks to EVIDENCE_DEPTH frames, the GIL trace, Python sample
marks) from EVIDENCE_LEAD_NS before the GPU's first operation on, but the launching
thread's own holds of the GIL (its waits and the others' holds stay); its context switches
(SCHED_EVENTS, which gpugap never reads) go. The file is then VACUUMed. The source is
never modified (it is copied first); the manifest, if given, gets a "trimmed" entry.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
from pathlib import Path

MIN_OSRT_NS = 10_000
# A capture of the host's own evidence (issue 44) keeps it from this long before the
# GPU's first operation on: the interpreter's start-up, imports and model building before
# it (most of the samples and GIL ranges of a short program) explain no GPU idle time.
EVIDENCE_LEAD_NS = 200_000_000
# Frames kept per CPU sample, innermost first (gpugap.report.host reads as many): an
# interpreter's stack repeats its eval loop up to nsys's limit (128); what names the
# work is near the innermost frames.
EVIDENCE_DEPTH = 16
# nsys's NVTX domains of the host's evidence (the GIL trace; the Python samples are marks).
EVIDENCE_DOMAINS = ("GIL Trace",)
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75       # (the domain's name: kept)


def trim(src: Path, dst: Path, keep_callchains: bool = False) -> dict:
    """*keep_callchains*: keep the call chains of the OS runtime calls that stay (a
    capture of the host's own evidence: what a thread waited in, issue 44)."""
    if dst.exists():
        raise SystemExit(f"{dst} exists; remove it first")
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        dropped = 0
        if "OSRT_API" in tables:
            dropped = con.execute(f'DELETE FROM OSRT_API WHERE "end" - "start" < {MIN_OSRT_NS}'
                                  ).rowcount
        evidence = _trim_evidence(con, tables) if keep_callchains else {}
        if keep_callchains and "OSRT_CALLCHAINS" in tables and "OSRT_API" in tables:
            con.execute("DELETE FROM OSRT_CALLCHAINS WHERE id NOT IN "
                        "(SELECT callchainId FROM OSRT_API WHERE callchainId IS NOT NULL)")
        else:
            con.execute("DROP TABLE IF EXISTS OSRT_CALLCHAINS")
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    return {"dropped_tables": [] if keep_callchains else ["OSRT_CALLCHAINS"],
            "dropped_osrt_calls_shorter_than_ns": MIN_OSRT_NS, "osrt_calls_dropped": dropped,
            "source_bytes": src.stat().st_size, "bytes": dst.stat().st_size, **evidence}


def _trim_evidence(con: sqlite3.Connection, tables: set[str]) -> dict:
    """The host's evidence from EVIDENCE_LEAD_NS before the GPU's first operation on, CPU
    samples' stacks to EVIDENCE_DEPTH frames; every CUDA/GPU row and every NVTX range of
    the program stays."""
    gpu = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                       "CUPTI_ACTIVITY_KIND_MEMSET") if t in tables]
    if not gpu:
        return {}
    first = con.execute("SELECT min(s) FROM (" + " UNION ALL ".join(
        f"SELECT min(start) AS s FROM {t}" for t in gpu) + ")").fetchone()[0]
    if first is None:
        return {}
    since = first - EVIDENCE_LEAD_NS
    dropped: dict[str, int] = {}
    if "COMPOSITE_EVENTS" in tables:
        if "SAMPLING_CALLCHAINS" in tables:
            dropped["sample_frames"] = con.execute(
                "DELETE FROM SAMPLING_CALLCHAINS WHERE id IN (SELECT id FROM COMPOSITE_EVENTS "
                f"WHERE start < {since}) OR stackDepth >= {EVIDENCE_DEPTH}").rowcount
        dropped["samples"] = con.execute(
            f"DELETE FROM COMPOSITE_EVENTS WHERE start < {since}").rowcount
    if "SCHED_EVENTS" in tables:
        # (Context switches: gpugap reads none of them; the table goes.)
        dropped["sched_events"] = con.execute("SELECT count(*) FROM SCHED_EVENTS"
                                              ).fetchone()[0]
        con.execute("DROP TABLE SCHED_EVENTS")
    if "NVTX_EVENTS" in tables:
        names = ",".join("'" + d + "'" for d in EVIDENCE_DOMAINS)
        domains = [r[0] for r in con.execute(
            f"SELECT domainId FROM NVTX_EVENTS WHERE eventType = {NVTX_DOMAIN_CREATE} "
            f"AND text IN ({names})")]
        ids = ",".join(str(d) for d in domains) or "NULL"
        dropped["nvtx_evidence"] = con.execute(
            f"DELETE FROM NVTX_EVENTS WHERE coalesce(\"end\", start) < {since} AND "
            f"(eventType = {NVTX_MARK} OR (domainId IN ({ids}) AND eventType != "
            f"{NVTX_DOMAIN_CREATE}))").rowcount
    if "NVTX_EVENTS" in tables and "CUPTI_ACTIVITY_KIND_RUNTIME" in tables and domains:
        # The launching thread's own holds of the GIL (most of the trace when it launches
        # from Python): what is read is when it waited, and who held the GIL meanwhile.
        launcher = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY "
                               "globalTid ORDER BY count(*) DESC LIMIT 1").fetchone()
        holding = con.execute("SELECT id FROM StringIds WHERE value = 'Holding GIL'"
                              ).fetchone() if "StringIds" in tables else None
        if launcher and holding:
            dropped["launcher_gil_holds"] = con.execute(
                f"DELETE FROM NVTX_EVENTS WHERE domainId IN ({ids}) AND globalTid = "
                f"{launcher[0]} AND (textId = {holding[0]} OR text = 'Holding GIL')"
            ).rowcount
    return {"evidence_since_ns": since, "evidence_depth": EVIDENCE_DEPTH,
            "evidence_rows_dropped": dropped}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--manifest", type=Path)
    parser.add_argument("--keep-callchains", action="store_true")
    args = parser.parse_args()
    info = trim(args.src, args.dst, args.keep_callchains)
    if args.manifest:
        doc = json.loads(args.manifest.read_text())
        doc["trimmed"] = info
        args.manifest.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
