"""Profile the programs of this folder under nsys and pack the exports with manifests.

Run on the GPU machine from the repository root (see tests/data/README.md):

    python3 tests/data/programs/capture.py --out DIR [NAME ...]   # default: all single-GPU

Each capture NAME is a program, its arguments, extra nsys options and environment. For
every one this writes DIR/NAME.sqlite (nsys export), DIR/NAME.manifest.json (versions,
the exact nsys command, the program's own result line) and DIR/NAME.log, and goes on to
the next when one fails. Nothing here imports gpugap: the captures depend only on nsys.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
NSYS = os.environ.get("GPUGAP_NSYS",
                      "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys")
TRACE = ["-t", "cuda,nvtx,osrt,cublas", "--sample=none", "--cpuctxsw=none"]
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


def py(script: str, *args: str) -> list[str]:
    return [sys.executable, str(HERE / script), *args]


def torchrun(script: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", "2", str(HERE / script), *args]


# name -> (program, extra nsys options, extra environment, GPUs needed)
CAPTURES: dict[str, tuple[list[str], list[str], dict[str, str], int]] = {
    "train-workers0": (py("train_loader.py", "--variant", "workers0"), [], {}, 1),
    "train-workers": (py("train_loader.py", "--variant", "workers"), [], {}, 1),
    "decode": (py("decode.py"), [], {}, 1),
    "sync-item": (py("sync_loop.py", "--variant", "sync"), [], {}, 1),
    "sync-free": (py("sync_loop.py", "--variant", "nosync"), [], {}, 1),
    "alloc-nocache": (py("alloc_loop.py", "--variant", "nocache"), [], {}, 1),
    "alloc-cache": (py("alloc_loop.py", "--variant", "cache"), [], {}, 1),
    "eval-pageable": (py("eval_copy.py", "--variant", "pageable"), [], {}, 1),
    "eval-pinned": (py("eval_copy.py", "--variant", "pinned"), [], {}, 1),
    "gemm": (py("gemm_loop.py"), [], {}, 1),
    "pipeline": (py("pipeline.py"), [], {}, 1),
    "small-eager": (py("small_model.py", "--variant", "eager"), [], {}, 1),
    "small-graph": (py("small_model.py", "--variant", "graph"),
                    ["--cuda-graph-trace=graph"], {}, 1),
    "small-graph-node": (py("small_model.py", "--variant", "graph"),
                         ["--cuda-graph-trace=node"], {}, 1),
    "small-compile": (py("small_model.py", "--variant", "compile", "--steps", "100",
                         "--recompile-at", "70"), [], {}, 1),
    # batch 512: communication (~2.3 ms a step) is a fair share of the step, as in real
    # data-parallel jobs, and 10 steps keep the reports under 2 MB
    "ddp-overlap": (torchrun("ddp_train.py", "--variant", "overlap", "--batch", "512",
                             "--steps", "10"), [], NO_MULTICAST, 2),
    "ddp-manual": (torchrun("ddp_train.py", "--variant", "manual", "--batch", "512",
                            "--steps", "10"), [], NO_MULTICAST, 2),
}

# One report per rank (nsys inside torchrun, as multi-node jobs are profiled):
# name -> program arguments; writes DIR/NAME.rank0.sqlite, DIR/NAME.rank1.sqlite.
PER_RANK: dict[str, list[str]] = {
    "ddp-ranks-balanced": ["--variant", "overlap"],
    "ddp-ranks-late": ["--variant", "overlap", "--late-rank", "1", "--late-ms", "30"],
}


def query(cmd: list[str]) -> str | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


def environment() -> dict:
    gpu = query(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    torch_info = query([sys.executable, "-c", "import torch, json; print(json.dumps("
                        "{'torch': torch.__version__, 'cuda': torch.version.cuda, "
                        "'nccl': '.'.join(map(str, torch.cuda.nccl.version())), "
                        "'gpus': torch.cuda.device_count()}))"])
    return {"gpu": gpu, "nsys": query([NSYS, "--version"]), "python": sys.version.split()[0],
            "torch": json.loads(torch_info) if torch_info else None}


def capture(name: str, out: Path, env_info: dict) -> dict:
    program, nsys_opts, extra_env, _ = CAPTURES[name]
    base = out / name
    result_file = Path(tempfile.mkdtemp()) / "result.json"
    command = [NSYS, "profile", *TRACE, *nsys_opts, "--force-overwrite=true",
               "--export=sqlite", "-o", str(base), *program, "--result", str(result_file)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra_env}
    if name == "small-compile":          # a cold compile: no cache from earlier runs
        cache = tempfile.mkdtemp(prefix="inductor-")
        env |= {"TORCHINDUCTOR_CACHE_DIR": cache, "TRITON_CACHE_DIR": cache + "/triton"}
    started = time.perf_counter()
    with open(base.with_suffix(".log"), "w") as log:
        rc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                            check=False, timeout=420).returncode
    wall = time.perf_counter() - started
    sqlite = base.with_suffix(".sqlite")
    manifest = {
        "capture": name,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **env_info,
        "nsys_command": [shlex.quote(c) for c in command],
        "environment": extra_env | ({"TORCHINDUCTOR_CACHE_DIR": "fresh temporary directory"}
                                    if name == "small-compile" else {}),
        "exit_code": rc, "wall_s": round(wall, 1),
        "result": json.loads(result_file.read_text()) if result_file.is_file() else None,
        "sqlite_bytes": sqlite.stat().st_size if sqlite.is_file() else None,
    }
    base.with_suffix(".manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    base.with_suffix(".nsys-rep").unlink(missing_ok=True)
    return manifest


def capture_per_rank(name: str, out: Path, env_info: dict) -> dict:
    """torchrun starts one nsys per rank; each writes its own report (%q{RANK})."""
    result_file = Path(tempfile.mkdtemp()) / "result.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "2", "--no-python", NSYS, "profile", *TRACE,
               "--force-overwrite=true", "--export=sqlite", "-o",
               str(out / f"{name}.rank%q{{RANK}}"), sys.executable,
               str(HERE / "ddp_train.py"), *PER_RANK[name], "--result", str(result_file)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **NO_MULTICAST}
    started = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        rc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                            check=False, timeout=420).returncode
    wall = time.perf_counter() - started
    reports = sorted(out.glob(f"{name}.rank*.sqlite"))
    manifest = {
        "capture": name,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        **env_info,
        "nsys_command": [shlex.quote(c) for c in command],
        "environment": NO_MULTICAST,
        "exit_code": rc, "wall_s": round(wall, 1),
        "result": json.loads(result_file.read_text()) if result_file.is_file() else None,
        "reports": {r.name: r.stat().st_size for r in reports},
        "sqlite_bytes": sum(r.stat().st_size for r in reports) or None,
    }
    (out / f"{name}.manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    for rep in out.glob(f"{name}.rank*.nsys-rep"):
        rep.unlink()
    return manifest


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    env_info = environment()
    gpus = (env_info.get("torch") or {}).get("gpus", 1)
    names = args.names or [n for n, c in CAPTURES.items() if c[3] <= gpus] + (
        list(PER_RANK) if gpus >= 2 else [])
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in names:
        m = (capture_per_rank if name in PER_RANK else capture)(name, args.out, env_info)
        ok = m["exit_code"] == 0 and m["sqlite_bytes"]
        failed += not ok
        print(f"{name}: rc={m['exit_code']} {m['wall_s']} s "
              f"{(m['sqlite_bytes'] or 0) / 2**20:.2f} MiB {m['result']}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
