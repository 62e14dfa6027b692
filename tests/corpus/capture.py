"""Build and profile the corpus's programs on the GPU machine; pack the exports.

    python3 tests/corpus/capture.py --out $OUT [--lanes 2] [--deadline-s 540] [NAME ...]

For every program (tests/corpus/programs/NAME/program.toml; default: all those whose
`gpus` the machine has) this builds it when it says how, profiles it under nsys, trims
the export (tests/data/programs/trim.py: OSRT_CALLCHAINS and OS-runtime calls under
10 us go, every CUDA/NVTX/GPU row stays), xz-compresses it and writes a manifest (the
versions, the exact nsys command, exit code, wall time, the program's RESULT line).
One-GPU programs run in `--lanes` parallel lanes, one GPU each (CUDA_VISIBLE_DEVICES),
so two programs never share a GPU; programs of two GPUs run alone, after them. Past the
deadline no program is started. Everything is packed into at most 7 tar files of at
most 15 MB under --out (the device tool brings back 8 files of 16 MiB), plus log.txt.
Nothing here imports gpugap: the captures depend only on nsys.

Public programs (split "public": code nobody here wrote) keep their source out of the
repository: program.toml's `[source]` says where it came from and what was changed, and
the adapted copy lives in tests/corpus/public/NAME/ (ignored by git, carried to the GPU
machine by the device call) with its run.toml (command, build, env, nsys_options).
`trace = [...]` in program.toml replaces the default tracing options (TRACE) for a
program captured with the host's own evidence (issue 44), `fallback_trace` is tried when
nsys refuses it, and `keep_callchains = true` keeps the OS calls' call chains (and
exports the Python samples' payloads, where the nsys can: --include-blobs). `--baseline
NAME` captures NAME once more with the default tracing, just before it, as
NAME-baseline: the step times of the two are the overhead of recording the evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from queue import Empty, Queue

import tomllib

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
PUBLIC = HERE / "public"            # adapted public sources, never committed
TRIM = HERE.parent / "data" / "programs" / "trim.py"
NSYS = os.environ.get("GPUGAP_NSYS",
                      "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys")
TRACE = ["-t", "cuda,nvtx,osrt,cublas", "--sample=none", "--cpuctxsw=none"]
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
LOG_LOCK = threading.Lock()


def log(line: str, out: Path) -> None:
    with LOG_LOCK:
        print(line, flush=True)
        with open(out / "log.txt", "a") as f:
            f.write(line + "\n")


def query(cmd: list[str]) -> str | None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


def environment() -> dict:
    versions = query([sys.executable, "-c", """
import json, importlib.metadata as m
out = {}
for name in ("torch", "jax", "jaxlib", "cupy-cuda13x", "triton", "cuda-core",
             "cuda-bindings", "numpy", "nvtx"):
    try:
        out[name] = m.version(name)
    except Exception:
        pass
print(json.dumps(out))"""])
    return {"gpu": query(["nvidia-smi", "--query-gpu=name,driver_version",
                          "--format=csv,noheader"]),
            "gpu_count": len((query(["nvidia-smi", "-L"]) or "").splitlines()),
            "nsys": query([NSYS, "--version"]), "nvcc": (query(["nvcc", "--version"])
                                                         or "").splitlines()[-1:],
            "python": sys.version.split()[0],
            "packages": json.loads(versions) if versions else None}


def load(name: str) -> dict:
    spec = tomllib.loads((PROGRAMS / name / "program.toml").read_text())
    if spec.get("source"):
        # A public program's build and run commands live beside its adapted source
        # (run.toml, never committed: no recipe that builds code that is not ours).
        run = PUBLIC / spec.get("source_dir", name) / "run.toml"
        if run.is_file():
            spec |= tomllib.loads(run.read_text())
    spec.setdefault("gpus", 1)
    spec.setdefault("timeout_s", 180)
    return spec


def result_line(text: str) -> dict | None:
    for line in reversed(text.splitlines()):
        if line.startswith("RESULT "):
            try:
                return json.loads(line[len("RESULT "):])
            except ValueError:
                return {"unparsed": line[:500]}
    return None


def capture(name: str, spec: dict, work: Path, out: Path, visible: str | None,
            env_info: dict) -> dict:
    folder = work / name
    shutil.copytree(PROGRAMS / spec.get("program_dir", name), folder, dirs_exist_ok=True)
    if spec.get("source"):
        src = PUBLIC / spec.get("source_dir", name)
        if not src.is_dir():
            return {"capture": name, "exit_code": f"no adapted source in {src}"}
        shutil.copytree(src, folder, dirs_exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **NO_MULTICAST,
           **{k: str(v) for k, v in spec.get("env", {}).items()}}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    # Compile caches start empty, so a program that compiles does so in its capture.
    cache = work / f".cache-{name}"
    env |= {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "TRITON_CACHE_DIR": str(cache / "triton"), "CUPY_CACHE_DIR": str(cache / "cupy"),
            "JAX_COMPILATION_CACHE_DIR": str(cache / "jax")}
    started = time.perf_counter()
    manifest: dict = {"capture": name, "framework": spec.get("framework"),
                      "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      **env_info, "cuda_visible_devices": visible}
    if spec.get("build"):
        b = subprocess.run(spec["build"], cwd=folder, capture_output=True, text=True,
                           env=env, check=False, timeout=300)
        if not spec.get("source"):
            manifest["build"] = [shlex.quote(c) for c in spec["build"]]
        if b.returncode:
            manifest |= {"exit_code": f"build failed ({b.returncode})",
                         "log_tail": (b.stdout + b.stderr)[-3000:]}
            return manifest
    command = list(spec["command"])
    if spec.get("gpus", 1) > 1 and spec.get("torchrun"):
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", str(spec["gpus"]), *command[1:]]
    elif command and command[0] == "python3":
        command[0] = sys.executable
    base = work / "reports" / name
    base.parent.mkdir(parents=True, exist_ok=True)
    options = list(spec.get("nsys_options", []))
    for attempt in range(2):
        nsys_cmd = [NSYS, "profile", *spec.get("trace", TRACE), *options, "--force-overwrite=true",
                    "--export=sqlite", "-o", str(base), *command]
        rc, text = _profile(nsys_cmd, folder, env, spec["timeout_s"])
        # nsys 2025.3.1 cannot import XLA's NVTX ranges when their registered strings
        # are lost ("Cannot find string for an exterior index"): the import then drops
        # most GPU activity. Profile again without XLA's domain (TSL), and say so.
        if attempt == 0 and LOST_STRINGS in text and "TSL" not in " ".join(options):
            manifest["first_attempt"] = {"nsys_command": [shlex.quote(c) for c in nsys_cmd],
                                         "why_discarded": LOST_STRINGS}
            options.append("--nvtx-domain-exclude=TSL")
            # The first attempt filled the compile caches: start the second cold too.
            shutil.rmtree(cache, ignore_errors=True)
            continue
        # Host evidence (CPU samples, Python stacks) the machine refused: once more with
        # the program's fallback tracing, and say so.
        if attempt == 0 and spec.get("fallback_trace") and \
                not base.with_suffix(".sqlite").is_file():
            manifest["first_attempt"] = {"nsys_command": [shlex.quote(c) for c in nsys_cmd],
                                         "why_discarded": text[-1500:]}
            spec = {**spec, "trace": spec["fallback_trace"]}
            shutil.rmtree(cache, ignore_errors=True)
            continue
        break
    sqlite = base.with_suffix(".sqlite")
    if spec.get("keep_callchains") and sqlite.is_file() and _exports_blobs():
        # The Python samples' stacks are NVTX payloads that a default export leaves out.
        export = [NSYS, "export", "--type=sqlite", "--include-blobs=true",
                  "--force-overwrite=true", "-o", str(sqlite), str(base) + ".nsys-rep"]
        e = subprocess.run(export, capture_output=True, text=True, check=False, timeout=300)
        manifest["export_command"] = [shlex.quote(c) for c in export]
        manifest["export_exit_code"] = e.returncode
    manifest |= {"nsys_command": [shlex.quote(c) for c in nsys_cmd],
                 "environment": {k: str(v) for k, v in spec.get("env", {}).items()}
                 | NO_MULTICAST,
                 "exit_code": rc, "wall_s": round(time.perf_counter() - started, 1),
                 "result": result_line(text), "log_tail": text[-3000:]}
    if not sqlite.is_file():
        return manifest
    trimmed = out / "staging" / f"{name}.sqlite"
    trimmed.parent.mkdir(parents=True, exist_ok=True)
    keep = ["--keep-callchains"] if spec.get("keep_callchains") else []
    t = subprocess.run([sys.executable, str(TRIM), str(sqlite), str(trimmed), *keep],
                       capture_output=True, text=True, check=False)
    if t.returncode == 0:
        manifest["trimmed"] = json.loads(t.stdout.strip().splitlines()[-1])
        subprocess.run(["xz", "-9", "-T2", "-f", str(trimmed)], check=False)
        xz = trimmed.with_suffix(".sqlite.xz")
        manifest["xz_bytes"] = xz.stat().st_size if xz.is_file() else None
    else:
        manifest["trim_error"] = t.stderr[-2000:]
    return manifest


LOST_STRINGS = "Cannot find string for an exterior index"


def _exports_blobs() -> bool:
    """Whether this nsys can export NVTX payloads (nsys export --include-blobs)."""
    return "include-blobs" in (query([NSYS, "export", "--help"]) or "")


def _profile(command: list[str], folder: Path, env: dict, timeout: float
             ) -> tuple[int | str, str]:
    try:
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env,
                              check=False, timeout=timeout)
        return proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        out = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
               for x in (e.stdout, e.stderr)]
        return "timeout", "".join(out)


def run_lane(queue: Queue, work: Path, out: Path, visible: str | None, env_info: dict,
             deadline: float, done: list) -> None:
    while True:
        try:
            name, spec = queue.get_nowait()
        except Empty:
            return
        if time.monotonic() > deadline:
            log(f"{name}: skipped (deadline)", out)
            done.append({"capture": name, "exit_code": "skipped (deadline)"})
            continue
        m = capture(name, spec, work, out, visible, env_info)
        (out / "staging").mkdir(exist_ok=True)
        (out / "staging" / f"{name}.manifest.json").write_text(json.dumps(m, indent=2) + "\n")
        done.append(m)
        log(f"{name}: rc={m.get('exit_code')} {m.get('wall_s')} s "
            f"xz={m.get('xz_bytes')} gpu={visible} result={m.get('result')}", out)
        if m.get("exit_code") != 0:
            log("  " + (m.get("log_tail") or "")[-1200:].replace("\n", "\n  "), out)


def pack(out: Path) -> None:
    """Staged files into tar parts of at most 15 MB (the device tool's limits)."""
    files = sorted((out / "staging").iterdir())
    part, size, members = 0, 0, []
    limit = 15 * 10**6

    def flush() -> None:
        nonlocal part, size, members
        if members:
            with tarfile.open(out / f"captures-{part}.tar", "w") as tar:
                for f in members:
                    tar.add(f, arcname=f.name)
            part, size, members = part + 1, 0, []

    for f in files:
        s = f.stat().st_size
        if f.suffix == ".sqlite":          # not compressed: xz failed; too big to carry
            continue
        if size + s > limit:
            flush()
        members.append(f)
        size += s
    flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--lanes", type=int, default=None)
    parser.add_argument("--deadline-s", type=float, default=540)
    parser.add_argument("--work", type=Path, default=Path("/tmp/corpus-work"))
    parser.add_argument("--baseline", action="append", default=[], metavar="NAME",
                        help="programs to capture once more with the default tracing "
                        "(TRACE), as NAME-baseline (repeatable): the overhead of a "
                        "program's own trace")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    start = time.monotonic()
    deadline = start + args.deadline_s
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "staging").mkdir(exist_ok=True)
    env_info = environment()
    log(json.dumps(env_info), args.out)
    gpus = max(1, env_info["gpu_count"])
    names = args.names or sorted(p.name for p in PROGRAMS.iterdir()
                                 if (p / "program.toml").is_file())
    specs = {n: load(n) for n in names}
    single = [n for n in names if specs[n]["gpus"] == 1]
    multi = [n for n in names if 1 < specs[n]["gpus"] <= gpus]
    for n in names:
        if specs[n]["gpus"] > gpus:
            log(f"{n}: needs {specs[n]['gpus']} GPUs, the machine has {gpus}", args.out)
    lanes = min(args.lanes or gpus, gpus)
    done: list = []
    queue: Queue = Queue()
    for n in args.baseline:
        # Each baseline just before its program, on the same GPU: the two step times
        # compare the tracing alone.
        spec = {k: v for k, v in load(n).items()
                if k not in ("trace", "fallback_trace", "keep_callchains")}
        queue.put((f"{n}-baseline", {**spec, "source_dir": spec.get("source_dir", n),
                                     "program_dir": n}))
        if n in single:
            single.remove(n)
            queue.put((n, specs[n]))
    for n in single:
        queue.put((n, specs[n]))
    threads = [threading.Thread(target=run_lane, args=(queue, args.work, args.out,
                                                       str(i) if lanes > 1 else None,
                                                       env_info, deadline, done))
               for i in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    queue = Queue()
    for n in multi:
        queue.put((n, specs[n]))
    run_lane(queue, args.work, args.out, None, env_info, deadline, done)
    pack(args.out)
    shutil.rmtree(args.out / "staging", ignore_errors=True)
    ok = sum(1 for m in done if m.get("exit_code") == 0 and m.get("xz_bytes"))
    log(f"done: {ok} of {len(done)} captured in {time.monotonic() - start:.0f} s", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
