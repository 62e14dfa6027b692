#!/usr/bin/env python3
"""Record `gpugap analyze --json` on every committed capture, to prove a change keeps
the answers (issue 25's and 26's "same answers" check).

    python benchmarks/snapshot.py save /tmp/before     # before the change
    python benchmarks/snapshot.py compare /tmp/before  # after: lists every difference
    python benchmarks/snapshot.py compare /tmp/before --fork-all   # forking everywhere

Covers reports/**.sqlite, tests/data/**.sqlite and the corpus (tests/corpus/captures,
decompressed to a temporary folder; not its sealed split nor the public split's held-out
third, which nobody analyzes until it is opened: tests/corpus/README.md; nor a capture
whose expectation is not yet written), plus the tiled benchmark reports under
benchmarks/data whose names end in -x39 / -x45 (about 200k kernels) when present.
The JSON's own path fields differ by where a report lies, so each report is analyzed
from the same path every time (the corpus from the same temporary names).
"""
from __future__ import annotations

import argparse
import difflib
import lzma
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS_COPY = Path("/tmp/gpugap-snapshot-corpus")


def reports() -> list[Path]:
    found = sorted(ROOT.glob("reports/**/*.sqlite")) + sorted(ROOT.glob("tests/data/**/*.sqlite"))
    CORPUS_COPY.mkdir(exist_ok=True)
    sys.path.insert(0, str(ROOT))
    from tests.corpus.score import UNOPENED, programs

    # Not the splits nobody may look at yet (sealed, the public split's held-out third),
    # nor a capture not yet pre-registered (no expected.toml: its first look is owed).
    sealed = {n for s in UNOPENED for n in programs(s)}
    registered = set(programs(None))
    for xz in sorted((ROOT / "tests/corpus/captures").glob("*.sqlite.xz")):
        name = xz.name.removesuffix(".sqlite.xz")
        if name in sealed or name not in registered:
            continue
        out = CORPUS_COPY / xz.name[:-3]
        if not out.exists():
            with lzma.open(xz) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
        found.append(out)
    found += sorted((ROOT / "benchmarks/data").glob("*-x39.sqlite"))
    found += sorted((ROOT / "benchmarks/data").glob("*-x45.sqlite"))
    return found


def key(path: Path) -> str:
    try:
        rel = path.relative_to(ROOT)
    except ValueError:
        rel = Path("corpus") / path.name
    return str(rel).replace("/", "__") + ".json"


# --fork-all: every analysis forks its accounting's slices and the pieces after it
# (gpugap.forkjoin), however small the report, to show forking changes no answer.
FORK_ALL = ("import gpugap.analysis.core as core; core.FORK_MIN_OPS = 0; "
            "from gpugap.cli import main; raise SystemExit(main())")


def analyze(path: Path, fork_all: bool = False) -> tuple[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = ["-c", FORK_ALL] if fork_all else ["-m", "gpugap"]
    done = subprocess.run([sys.executable, *run, "analyze", "--json", "--no-config",
                           str(path)], capture_output=True, text=True, env=env, cwd=ROOT)
    return done.stdout, f"rc={done.returncode}\n{done.stderr[-2000:]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["save", "compare"])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--fork-all", action="store_true",
                    help="fork every analysis's pieces, however small the report")
    args = ap.parse_args()
    paths = reports()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda p: analyze(p, args.fork_all), paths))
    if args.mode == "save":
        args.folder.mkdir(parents=True, exist_ok=True)
        for path, (out, err) in zip(paths, results, strict=True):
            (args.folder / key(path)).write_text(out)
            (args.folder / (key(path) + ".err")).write_text(err)
        print(f"saved {len(paths)} reports to {args.folder}")
        return 0
    differ = 0
    for path, (out, _err) in zip(paths, results, strict=True):
        before = (args.folder / key(path))
        if not before.exists():
            print(f"NEW   {key(path)}")
            continue
        if before.read_text() != out:
            differ += 1
            print(f"DIFF  {key(path)}")
            diff = difflib.unified_diff(before.read_text().splitlines(), out.splitlines(),
                                        "before", "after", lineterm="", n=1)
            print("\n".join(list(diff)[:40]))
    print(f"{len(paths) - differ} of {len(paths)} identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
