"""The host's own evidence: reading CPU samples, their stacks, the OS waits' stacks and
the GIL trace inside windows (gpugap.report.host), classifying frames into kinds of work
(gpugap.program.host_work), and the evidence a verdict of a host-side cause carries
(gpugap.analysis.host_evidence), with the capture flags a report without it is told.

The real capture: tests/data/host/host_threads.py profiled on the CPU machine by
Debian's nsys 2023.4.4 (tests/data/README.md gives the command): the main thread runs
numpy ufuncs for 0.6 s, then waits 0.6 s on an empty queue while a producer thread runs
pure Python."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpugap import load
from gpugap.analysis import host_evidence as he
from gpugap.program import host_work as hw
from gpugap.report import nsys as nsys_mod
from gpugap.report.host import MAX_DEPTH, HostInventory
from tests.conftest import DATA

CAPTURE = DATA / "host" / "host-threads.sqlite.xz"
QUEUE_WAIT_NS = 600_000_000          # producer(q, 0.6) in the program


@pytest.fixture(scope="module")
def host_capture():
    trace = load(CAPTURE)
    osrt = trace.table("osrt")
    length = osrt["end"] - osrt["start"]
    longest = int(np.argmax(length))
    main = int(osrt["gtid"][longest])
    wait = (int(osrt["start"][longest]), int(osrt["end"][longest]))
    return trace, main, wait, osrt.labels("name")[longest]


def test_the_capture_holds_every_kind_of_host_evidence(host_capture):
    trace, *_ = host_capture
    inv = trace.host_source.inventory()
    assert (inv.cpu_samples, inv.backtraces, inv.gil, inv.os_runtime,
            inv.osrt_backtraces, inv.python_sampling) == (True,) * 6
    # nsys 2023.4 exports no NVTX payloads: the Python samples have no stacks.
    assert inv.python_stacks is False
    assert inv.sample_period_ns == 1_000_000


def test_main_thread_waits_on_the_queue_for_the_producer(host_capture):
    trace, main, (lo, hi), name = host_capture
    assert name == "sem_wait" and abs((hi - lo) - QUEUE_WAIT_NS) < 50_000_000
    pid = (main >> 24) & 0xFFFFFF
    found = he.evidence(trace, (np.array([lo]), np.array([hi])), main, {pid}, python=True)
    assert found.sampled and found.samples > 50
    launcher = found.threads[0]
    assert launcher.role == "launching thread" and launcher.share_pct < 5
    # What it waited in, named from its stack: CPython's lock under queue.get.
    assert found.waits[0]["name"] == "sem_wait"
    assert found.waits[0]["share_pct"] > 95
    assert found.waits[0]["where"] == hw.WAIT_CALLERS["PyThread_acquire_lock_timed"]
    # The producer ran Python meanwhile: the thread to look at.
    producer = found.threads[1]
    assert producer.role == "launching process" and producer.share_pct > 20
    assert max(producer.work, key=producer.work.get) == "python"
    assert found.work == "wait"
    assert "spare capacity" in found.fix and producer.who in found.fix
    assert found.advice is None            # every flag was on
    assert any("include-blobs" in n for n in found.notes)


def test_numpy_on_the_launching_thread_is_named_with_its_fix(host_capture):
    trace, main, (lo, _), _ = host_capture
    pid = (main >> 24) & 0xFFFFFF
    # The numpy loop: the 0.6 s before the producer starts (less its edges).
    window = (np.array([lo - 550_000_000]), np.array([lo - 50_000_000]))
    found = he.evidence(trace, window, main, {pid}, python=True)
    launcher = found.threads[0]
    assert launcher.tid == main & 0xFFFFFF and launcher.share_pct > 20
    assert max(launcher.work, key=launcher.work.get) == "numpy"
    assert found.work == "numpy"
    assert found.fix == hw.KINDS["numpy"].fix[:1].upper() + hw.KINDS["numpy"].fix[1:]
    frames = [f.frame for f in launcher.frames if f.work == "numpy"]
    assert frames and all(f.startswith("_multiarray_umath") for f in frames)
    # JSON of the evidence is the dataclass's fields.
    doc = json.loads(found.to_json())
    assert doc["work"] == "numpy" and doc["threads"][0]["work"]["numpy"] > 20


def test_samples_are_read_only_inside_the_windows(host_capture):
    trace, main, (lo, hi), _ = host_capture
    source = trace.host_source
    every = source.samples(np.array([0]), np.array([2**62]))
    inside = source.samples(np.array([lo]), np.array([hi]))
    starts = every["start"]
    assert len(inside) == int(((starts >= lo) & (starts < hi)).sum()) > 0
    # Two windows: the union of what each gives.
    mid = (lo + hi) // 2
    both = source.samples(np.array([lo, mid + 1]), np.array([mid, hi]))
    assert len(both) == int((((starts >= lo) & (starts < mid))
                             | ((starts >= mid + 1) & (starts < hi))).sum())
    frames = source.sample_frames(inside["id"])
    assert set(frames["id"].tolist()) <= set(inside["id"].tolist())
    assert frames["depth"].max() < MAX_DEPTH


def test_kinds_of_native_frames():
    frames = hw.native_frames(
        ["DOUBLE_sqrt", "_PyEval_EvalFrameDefault", "ImagingUnpackRGB", "memcpy",
         "blas_thread_server", "0x7f00", "at::native::add_kernel", "sem_wait"],
        ["/x/numpy/_core/_multiarray_umath.cpython-312.so", "/usr/bin/python3.12",
         "/x/PIL/_imaging.cpython-312.so", "/usr/lib/libc.so.6",
         "/x/numpy.libs/libscipy_openblas64_.so", "[Unknown]", "/x/torch/lib/libtorch_cpu.so",
         "/usr/lib/libc.so.6"])
    assert frames.kind.tolist() == ["numpy", "python", "image", "memory", "blas", "",
                                    "torch-cpu", "wait"]
    assert frames.generic.tolist() == [False, False, False, False, False, True, False,
                                       False]
    assert frames.label[1] == "python3.12: Python code"
    # A stack is named by its innermost telling frame: libc's plumbing is skipped.
    ids = np.array([1, 1, 1, 2, 2])
    unknown_then_numpy = np.array([5, 0, 1, 1, 6])
    stacks = hw.classify_stacks(ids, unknown_then_numpy, frames)
    assert stacks.kind.tolist() == ["numpy", "python"]


def test_python_frames_name_the_users_line_and_the_library_work():
    label, kind = hw.python_stack(
        ["/venv/lib/python3.12/site-packages/triton/runtime/jit.py", "/home/u/rowloop.py"],
        ["run", "main"], [600, 42])
    assert (label, kind) == ("u/rowloop.py:main:42", "triton-launcher")
    label, kind = hw.python_stack(
        ["/usr/lib/python3.12/queue.py", "/srv/app/server.py"], ["get", "serve"], [171, 9])
    assert (label, kind) == ("app/server.py:serve:9", "wait")


def test_capture_advice_names_only_what_is_off():
    none = he.capture_advice(None, python=True)
    assert "--sample=process-tree" in none and "python-gil" in none
    assert "--python-sampling=true" in none
    samples_only = HostInventory(cpu_samples=True, backtraces=True)
    said = he.capture_advice(samples_only, python=True)
    assert "--sample" not in said and "python-gil" in said
    assert he.capture_advice(samples_only, python=False) is None
    no_stacks = HostInventory(cpu_samples=True, backtraces=False)
    assert "--backtrace=fp" in he.capture_advice(no_stacks, python=False)


def test_verdict_of_a_host_side_cause_without_samples_says_which_flags(analysis_of):
    # A real capture without CPU samples (--sample=none) whose verdict is launch-bound.
    v = analysis_of("moe-experts-bad").verdict
    assert v.cause == "host-launch-bound"
    assert v.host.sampled is False and v.host.threads == []
    assert v.host.stretches > 0 and v.host.idle_ns > 0
    assert "--sample=process-tree" in v.host.advice and "python-gil" in v.host.advice
    assert v.to_dict()["host"]["advice"] == v.host.advice
    assert v.host.advice in v.host.lines()


def test_verdict_of_a_device_cause_has_no_host_evidence(analysis_of):
    v = analysis_of("h2d-copy-bad").verdict
    assert v.kind == "bottleneck" and v.host is None


def test_profile_flags_follow_what_the_nsys_takes(monkeypatch, tmp_path):
    nsys = nsys_mod.Nsys("/fake/nsys", "2023.4.4")
    helps = {"profile": "--sample= --backtrace= --cpuctxsw= --python-sampling= "
                        "--python-backtrace= python-gil", "export": "--type="}
    monkeypatch.setattr(nsys_mod, "help_text", lambda n, c, timeout=60: helps[c])
    cmd = nsys_mod.profile_command(nsys, tmp_path / "x", ["python3", "t.py"],
                                   host_evidence=True)
    assert cmd[cmd.index("-t") + 1] == "cuda,nvtx,osrt,cublas,python-gil"
    assert "--python-sampling=true" in cmd and "--sample=process-tree" in cmd
    # An option this nsys lacks is left out, the others kept.
    assert "--python-sampling-frequency=1000" not in cmd
    # Not a Python program: no Python flags.
    cmd = nsys_mod.profile_command(nsys, tmp_path / "x", ["./app"], host_evidence=True)
    assert "python-gil" not in cmd[cmd.index("-t") + 1]
    assert "--python-sampling=true" not in cmd and "--backtrace=fp" in cmd
    # An nsys that samples nothing: sampling off, as --no-host-evidence.
    helps["profile"] = "--trace="
    cmd = nsys_mod.profile_command(nsys, tmp_path / "x", ["./app"], host_evidence=True)
    assert "--sample=none" in cmd and "--cpuctxsw=none" in cmd
    off = nsys_mod.profile_command(nsys, tmp_path / "x", ["python3"], host_evidence=False)
    assert "--sample=none" in off and "python-gil" not in off[off.index("-t") + 1]


def test_native_patterns_read_the_module_before_the_symbol():
    # native_frames reads a frame's module kind before its symbol kind: that is the
    # first match of _NATIVE only while module patterns come first and none has both.
    from gpugap.program.host_work import _NATIVE
    by_module = [bool(mod) for _, mod, _ in _NATIVE]
    assert by_module == sorted(by_module, reverse=True)
    assert not any(mod and sym for _, mod, sym in _NATIVE)


@pytest.mark.slow
def test_a_range_verdict_carries_the_host_evidence_of_its_windows():
    # host-infer-server (the corpus's host split): --range request judges the requests
    # alone, launch-bound; the host evidence is read inside those requests' idle time,
    # where the launching thread runs (PyTorch and the driver), not in the waits for the
    # next request between them (sem_wait: spare capacity, said apart).
    from gpugap.analysis import analyze
    from tests.conftest import corpus_capture

    trace = load(corpus_capture("host-infer-server"))
    whole = analyze(trace).verdict
    ranged = analyze(trace, range_name="request").verdict
    assert ranged.cause == "launch-bound" and ranged.host is not None
    assert ranged.host.sampled and ranged.host.idle_ns > 0
    launcher = ranged.host.threads[0]
    assert launcher.role == "launching thread" and launcher.share_pct > 50
    # Read inside the requests only: less idle time than the whole steady state's.
    assert whole.host is None or ranged.host.idle_ns < whole.host.idle_ns


@pytest.mark.slow
def test_python_stacks_decode_to_the_users_file_function_and_line():
    # host-noranges-train (the corpus's host split, nsys 2025.3 with payloads exported):
    # numpy augmentation in a Dataset's __getitem__ on the launching thread. Its Python
    # samples' payloads follow their data entries (schema id, size, offset) and the
    # schema's first field has no offset: read so, the frames are the program's own.
    # truth_host (tests/corpus/programs/host-noranges-train/truth.json) counts
    # noranges_train.py:__getitem__:12 as the innermost frame of 76.5% of the idle
    # Python samples, none undecodable.
    from gpugap.analysis import analyze
    from tests.conftest import corpus_capture

    v = analyze(load(corpus_capture("host-noranges-train"))).verdict
    assert v.host is not None and v.host.work == "numpy"
    launcher = v.host.threads[0]
    assert launcher.role == "launching thread"
    top = launcher.python[0]
    assert top.frame.endswith("noranges_train.py:__getitem__:12")
    assert top.share_pct > 50
    assert "under host-noranges-train/noranges_train.py:__getitem__:12" in v.host.summary
    assert not any("do not read as Python frames" in n for n in v.host.notes)


def test_python_samples_without_cpu_samples_say_where_the_python_thread_was():
    # host-pub-jax-mnist-classifier (the corpus's host split): Python samples, the GIL
    # and OS calls, no CPU samples. The thread gpugap follows for the idle gaps is XLA's
    # runtime thread, which launches what the Python thread dispatches and waits in a
    # futex meanwhile; the Python thread's samples put it on the training loop's call of
    # the jitted update (truth_host: mnist_classifier.py:<module>:89 innermost in 71.9%
    # of the idle Python samples). Said so, with no running time claimed for either
    # thread (there are no CPU samples), and no 'spare capacity' fix.
    from gpugap.analysis import analyze
    from tests.conftest import corpus_capture

    v = analyze(load(corpus_capture("host-pub-jax-mnist-classifier"))).verdict
    assert v.host is not None and not v.host.sampled
    assert "ran 0%" not in v.host.summary
    assert "mnist_classifier.py:<module>:89" in v.host.summary
    python = [t for t in v.host.threads if t.python]
    assert python and python[0].role == "launching process" and python[0].ns == 0
    assert v.host.fix is None or "spare capacity" not in v.host.fix


def test_os_waits_past_the_budget_are_a_sample_drawn_by_length():
    """A launching thread of more OS calls than the budget (the MoE scenario's H200
    capture: 16,455 calls on its main thread) is read as a sample drawn by length: every
    call of D (their total length over the budget) or longer, a shorter one with a chance
    of its length over D or at least half the budget over their count, standing for one
    over its chance: each name's time as the whole read gives it, within the sample's
    error (the square root of D times it), counts within a sample's error, and a long
    wait never sampled away."""
    trace = load(DATA / "scenarios" / "moe-experts-bad.sqlite")
    osrt = trace.table("osrt")
    threads, calls = np.unique(osrt["gtid"], return_counts=True)
    main = int(threads[np.argmax(calls)])
    lo, hi = int(osrt["start"].min()), int(osrt["end"].max())
    windows = {main: (np.array([lo]), np.array([hi]))}
    whole, sample_ns = trace.host_source.os_waits(windows)
    assert sample_ns == 0 and len(whole) == calls.max() and (whole["weight"] == 1).all()
    length = whole["end"] - whole["start"]
    budget = 2000
    sample, sample_ns = trace.host_source.os_waits(windows, at_most=budget)
    assert sample_ns == -(-2 * int(np.maximum(length, 0).sum()) // budget)
    # About as many calls as their chances add up to (at most the budget).
    floor = 1_000_003 * budget // (2 * len(whole)) / 1_000_003
    expected = float(np.minimum(np.maximum(length / sample_ns, floor), 1.0).sum())
    assert expected <= budget and abs(len(sample) - expected) <= 4 * np.sqrt(expected)
    assert int((length >= sample_ns).sum()) == int((sample["weight"] == 1).sum()) > 0

    def by_name(calls):
        names = calls["name"].strings()
        w = calls["weight"]
        return {n: (float(((calls["end"] - calls["start"]) * w)[names == n].sum()),
                    float(w[names == n].sum())) for n in set(names.tolist())}

    truth, estimate = by_name(whole), by_name(sample)
    for name, (ns, count) in truth.items():
        got_ns, got_count = estimate.get(name, (0.0, 0.0))
        assert abs(got_ns - ns) <= 4 * np.sqrt(sample_ns * ns), name
        if count >= 1000:            # a plain sample of 60 calls or more
            assert abs(got_count - count) <= 4 * np.sqrt(count / floor), name
