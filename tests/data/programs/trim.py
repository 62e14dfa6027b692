"""Trim a real nsys export to fit the repository's 2 MB limit, and say so in its manifest.

    python3 tests/data/programs/trim.py SRC.sqlite DST.sqlite [--manifest M.json]

What goes, and only this: the table OSRT_CALLCHAINS (stack traces of OS runtime calls,
which gpugap never reads) and the OS runtime calls shorter than 10 us (Python's imports
alone make tens of thousands of mmap/stat/open calls of a few microseconds; gpugap reads
OS runtime calls only as evidence of long host waits). Every CUDA, NVTX, GPU and
metadata row stays as nsys wrote it. The file is then VACUUMed. The source is never
modified (it is copied first); the manifest, if given, gets a "trimmed" entry.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
from pathlib import Path

MIN_OSRT_NS = 10_000


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
            "source_bytes": src.stat().st_size, "bytes": dst.stat().st_size}


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
