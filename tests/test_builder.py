"""The hand-built trace (gpugap.report.builder) is faithful: real captures rebuilt event by
event with the builder give the loader's frames (columns, dtypes, categoricals, values)
and the same analysis; its own inputs are checked."""

from __future__ import annotations

import sqlite3
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from gpugap.analysis import analyze
from gpugap.errors import NoCudaActivity
from gpugap.report import load
from gpugap.report.builder import BUILT, ENUMS, TraceBuilder
from gpugap.report.columns import PID_SHIFT

CAPTURES = Path(__file__).parent / "data" / "captures"
# Copies, memsets, syncs and NVTX (gemm); CUDA graph executions (small-graph); pageable
# copies (eval-pageable); two processes on two GPUs with NCCL (ddp-overlap).
REBUILT = ["gemm", "small-graph", "eval-pageable", "ddp-overlap"]
FRAMES = ["kernels", "memcpys", "memsets", "graphs", "api", "syncs", "nvtx", "devices", "osrt"]


def us(ns) -> float:
    return int(ns) / 1000


def tid_of(gtid) -> int:
    return int(gtid) & 0xFFFFFF


def rebuild(trace) -> object:
    """*trace* event by event through the builder (origin 0: the same times)."""
    b = TraceBuilder(origin_ns=0, pid=int(trace.threads["pid"].iloc[0]), devices=0)
    for r in trace.devices.to_dict("records"):
        fields = {c: r[c] for c in ("max_warps_per_sm", "warp_size", "max_blocks_per_sm",
                                    "max_regs_per_sm", "max_regs_per_block",
                                    "max_shmem_per_sm", "max_shmem_per_block", "cc_major",
                                    "cc_minor", "memory_bytes", "clock_hz", "bus", "uuid",
                                    "chip")}
        b.device(int(r["device"]), name=r["name"], sm_count=int(r["sm_count"]), **fields)
    b.threads.clear()
    for r in trace.threads.itertuples():
        b.thread(int(r.tid), r.name, pid=int(r.pid))
    for frame in (trace.api, trace.osrt, trace.nvtx):       # threads nsys did not name
        for g in set(frame["gtid"].astype(np.int64).tolist()) - set(trace.threads["gtid"]):
            b.thread(tid_of(g), pid=g >> PID_SHIFT & 0xFFFFFF)
    # Streams in the context (device) their work ran in.
    ops = pd.concat([f[["pid", "stream", "device"]] for f in (trace.kernels, trace.memcpys,
                                                             trace.memsets, trace.graphs)])
    device_of = ops.drop_duplicates(["pid", "stream"]).set_index(["pid", "stream"])["device"]
    main_device = ops.drop_duplicates("pid").set_index("pid")["device"]
    for r in trace.streams.itertuples():
        device = device_of.get((r.pid, r.stream), main_device.get(r.pid, 0))
        b.stream(int(r.stream), non_blocking=r.flag == "Non-blocking stream",
                 legacy=bool(r.legacy_default), priority=int(r.priority),
                 device=int(device), pid=int(r.pid))
    # Every API call in the report's order: the ones that launched an op through the op.
    launched = {}
    for kind in ("kernels", "memcpys", "memsets", "graphs", "syncs"):
        for r in getattr(trace, kind).to_dict("records"):
            launched[(int(r["pid"]), int(r["corr"]))] = (kind, r)
    for call in trace.api.itertuples():
        kind, r = launched.get((int(call.pid), int(call.corr)), (None, None))
        common = {"thread": int(call.tid)}
        api = {"api": str(call.name), "api_us": (us(call.start), us(call.end))} | common
        where = {} if r is None else {"start_us": us(r["start"]),
                                      "stream": int(r["stream"]), "device": int(r["device"])}
        dur = None if r is None else (int(r["end"]) - int(r["start"])) / 1000
        if kind == "kernels":
            b.kernel(r["name"], dur_us=dur, **where, **api,
                     grid=(r["grid_x"], r["grid_y"], r["grid_z"]),
                     block=(r["block_x"], r["block_y"], r["block_z"]),
                     registers=r["registers"], shared_static=r["shared_static"],
                     shared_dynamic=r["shared_dynamic"], demangled=r["demangled"],
                     graph_node=None if r["graph_node"] < 0 else int(r["graph_node"]))
        elif kind == "memcpys":
            b.memcpy(str(r["kind"]), bytes=int(r["bytes"]), dur_us=dur, src=str(r["src_kind"]),
                     dst=str(r["dst_kind"]), **where, **api)
        elif kind == "memsets":
            b.memset(bytes=int(r["bytes"]), memory=str(r["mem_kind"]), dur_us=dur, **where,
                     **api)
        elif kind == "graphs":
            b.graph(int(r["graph_id"]), exec_id=int(r["graph_exec_id"]), dur_us=dur, **where,
                    **api)
        elif kind == "syncs":
            b.sync(str(call.name), start_us=us(call.start), end_us=us(call.end),
                   stream=int(r["stream"]), device=int(r["device"]), thread=int(call.tid),
                   sync_type=str(r["sync_type"]), event=int(r["event"]),
                   gpu_us=(us(r["start"]), us(r["end"])))
        else:
            b.call(str(call.name), start_us=us(call.start), end_us=us(call.end),
                   driver=bool(call.driver), **common)
    for r in trace.nvtx.itertuples():
        b.nvtx(r.name, start_us=us(r.start), end_us=us(r.end), domain=str(r.domain),
               thread=int(r.tid), kind=str(r.kind))
    for r in trace.osrt.itertuples():
        b.osrt(str(r.name), start_us=us(r.start), end_us=us(r.end), thread=tid_of(r.gtid))
    return b.build()


@cache
def pair(name: str):
    real = load(CAPTURES / f"{name}.sqlite")
    return real, rebuild(real)


@pytest.mark.slow
@pytest.mark.parametrize("name", REBUILT)
def test_handbuilt_rebuild_of_a_capture_gives_the_loaders_frames(name: str) -> None:
    real, built = pair(name)
    assert len(real.kernels) and len(real.api)
    for frame in FRAMES:
        want, got = getattr(real, frame), getattr(built, frame)
        # Correlation ids are the builder's own (numbered by call start); what they join
        # (launch columns, sync records) is compared below.
        assert_frame_equal(got.drop(columns=["corr"], errors="ignore"),
                           want.drop(columns=["corr"], errors="ignore"), obj=frame)
        if "corr" in want:
            assert got["corr"].dtype == want["corr"].dtype, frame
    for frame, keys in (("streams", ["pid", "stream"]), ("threads", ["gtid"])):
        want = getattr(real, frame).sort_values(keys, ignore_index=True)
        got = getattr(built, frame).sort_values(keys, ignore_index=True)
        assert_frame_equal(got, want, obj=frame)
    # A sync record joins the call it came from, as in the capture.
    sync_calls = []
    for trace in (real, built):
        calls = trace.api.set_index(["pid", "corr"])
        keys = list(zip(trace.syncs["pid"], trace.syncs["corr"], strict=True))
        sync_calls.append(calls.loc[keys, "start"].tolist() if keys else [])
    assert sync_calls[1] == sync_calls[0]


@pytest.mark.parametrize("name", REBUILT)
def test_handbuilt_rebuild_analyzes_like_the_capture(name: str) -> None:
    real, built = pair(name)
    want, got = analyze(real), analyze(built)
    assert got.verdict.to_dict() == want.verdict.to_dict()
    assert got.metrics.to_dict() == want.metrics.to_dict()

    def findings(a):
        return [(f.rule, f.cause, f.phase, f.device, f.cost_ns, f.count, f.severity)
                for f in a.findings]

    assert findings(got) == findings(want) and findings(want)
    assert [d["accounting"] for d in got.devices] == [d["accounting"] for d in want.devices]


def test_handbuilt_info_names_no_capture() -> None:
    real, built = pair("gemm")
    info = built.info
    assert info.path == info.sqlite_path == BUILT
    assert info.nsys_version is None and info.schema_version is None
    assert info.capture_start_ns is None and info.session_start_utc_ns is None
    assert info.warnings == [] and info.problems == {} and not info.gpu_data_lost
    # The tables the events come from, each named as nsys names it.
    assert {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds",
            "TARGET_INFO_GPU"} <= info.tables <= real.info.tables
    assert built.osrt_source is None and len(built.osrt) == len(real.osrt)


def test_handbuilt_enums_are_nsys_own() -> None:
    """The labels the builder writes are nsys's, with nsys's ids and names."""
    with sqlite3.connect(f"file:{CAPTURES / 'gemm.sqlite'}?mode=ro", uri=True) as conn:
        for table, members in ENUMS.items():
            real = {i: (n, lbl) for i, n, lbl in conn.execute(
                f"SELECT id, name, label FROM {table}")}
            assert {k: real[k] for k in members} == members, table


def test_handbuilt_defaults() -> None:
    b = TraceBuilder(gpu="NVIDIA H200", sm_count=132)
    side = b.stream(13, non_blocking=True)
    b.kernel("gemm", start_us=0, dur_us=50)
    b.memcpy("H2D", bytes=1 << 20, start_us=60, dur_us=30, src="Pageable", stream=side)
    b.sync(start_us=20, end_us=95)
    t = b.build()
    k, m = t.kernels.iloc[0], t.memcpys.iloc[0]
    assert (k["start"], k["end"]) == (b.ns(0), b.ns(50)) == (1_000_000_000, 1_000_050_000)
    assert (k["device"], k["stream"], k["pid"], k["blocks"]) == (0, 7, 1, 132)
    assert k["api_name"] == "cudaLaunchKernel" and k["api_start"] == b.ns(-10)
    assert t.legacy_streams() == {(1, 7)}
    assert t.streams.set_index("stream").loc[13, "flag"] == "Non-blocking stream"
    # A pageable copy's call holds the thread for the copy; correlation ids follow the
    # calls' starts.
    assert (m["api_start"], m["api_end"]) == (b.ns(55), b.ns(92))
    assert t.api["corr"].tolist() == [1, 2, 3]
    assert t.api["name"].astype(str).tolist() == ["cudaLaunchKernel", "cudaStreamSynchronize",
                                                  "cudaMemcpyAsync"]
    assert t.syncs["sync_type"].astype(str).tolist() == ["Stream sync"]
    assert t.devices["name"].tolist() == ["NVIDIA H200"]
    assert t.thread_name(int(t.api["gtid"].iloc[0])) == "python (tid 1)"


def test_handbuilt_empty_trace_has_no_cuda_activity() -> None:
    t = TraceBuilder().build()
    assert not t.has_gpu_activity and t.api.empty and t.kernels.empty
    with pytest.raises(NoCudaActivity, match="made no kernel launches"):
        analyze(t)
    a = analyze(t, require_gpu=False)
    assert a.status == "no-cuda-activity" and a.findings == []


@pytest.mark.parametrize(("call", "message"), [
    (lambda b: b.kernel("k", start_us=10, dur_us=-1), "lasts -1 us"),
    (lambda b: b.call("cudaMalloc", start_us=10, end_us=5), "ends .* before it starts"),
    (lambda b: b.nvtx("step", start_us=-2e6, end_us=0), "before the session began"),
    (lambda b: b.kernel("k", start_us=0, dur_us=1, block=(2048, 1, 1)), "block_x 2048"),
    (lambda b: b.kernel("k", start_us=0, dur_us=1, device=3), "unknown device 3"),
    (lambda b: b.kernel("k", start_us=0, dur_us=1, thread=99), "unknown thread 99"),
    (lambda b: b.memcpy("H2X", bytes=1, start_us=0, dur_us=1), "unknown copy kind"),
    (lambda b: b.memcpy("H2D", bytes=-1, start_us=0, dur_us=1), "invalid size"),
    (lambda b: b.memcpy("H2D", bytes=1, start_us=0, dur_us=1, src="Paged"),
     "unknown memory kind"),
    (lambda b: b.stream(-1), "invalid stream id"),
    (lambda b: b.device(1, sm_count=132, smCount=1), "unknown device field"),
    (lambda b: b.device(1, sm_count=0), "invalid device 1 sm_count 0"),
    (lambda b: b.kernel("", start_us=0, dur_us=1), "invalid kernel name"),
])
def test_handbuilt_inputs_are_checked(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(TraceBuilder())
