"""The loaded report: typed pandas frames, one per kind of event, plus what we know of
the report itself. Rules and metrics read only this; they never touch SQL.

Times are int64 nanoseconds on the report's session clock. ``pid``/``tid`` are the plain
process and thread ids decoded from nsys's serialized ``globalTid``; ``gtid`` keeps the
serialized value (unique across hosts/VMs) for joins.

Frames and their columns (all present even when the report lacks the table, then empty):

- ``kernels``: start, end, device, context, stream, corr, pid, name, grid_x/y/z,
  block_x/y/z, blocks, threads_per_block, registers, shared_static, shared_dynamic,
  graph_node, + launch columns
- ``memcpys``: start, end, device, stream, corr, pid, bytes, kind (e.g. "Host-to-Device"),
  src_kind, dst_kind (e.g. "Pageable", "Pinned", "Device"), + launch columns
- ``memsets``: start, end, device, stream, corr, pid, bytes, mem_kind, + launch columns
- launch columns (from the CUDA API call with the same correlation id in the same
  process): api_start, api_end, gtid, api_name (NaN/None when no call matched)
- ``api``: start, end, gtid, pid, tid, corr, name (version suffix stripped, e.g.
  "cudaMemcpyAsync"), driver (bool), per_thread (bool: a ``_ptsz``/``_ptds`` variant)
- ``syncs``: start, end, device, stream, corr, pid, sync_type (e.g. "Stream sync")
- ``nvtx``: start, end, name, domain, gtid, pid, tid, depth (per thread and domain),
  library (bool: a range nsys made for a traced library such as cuBLAS), kind
- ``streams``: pid, stream, context, flag (label), priority, legacy_default (bool)
- ``devices``: device, name, sm_count, max_threads_per_sm, max_blocks_per_sm,
  max_regs_per_sm, max_shmem_per_sm, reg_alloc_unit, compute_capability, ...
- ``threads``: gtid, pid, tid, name
- ``osrt``: start, end, gtid, name (OS runtime calls, when traced)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd


@dataclass
class ReportInfo:
    path: str                       # what the user passed
    sqlite_path: str                # the export actually read
    nsys_version: str | None        # the nsys that wrote the export
    schema_version: str | None
    capture_start_ns: int | None
    capture_end_ns: int | None
    cuda_traced: bool | None        # from META_DATA_CAPTURE when present
    tables: frozenset[str]
    warnings: list[str] = field(default_factory=list)


@dataclass
class Trace:
    info: ReportInfo
    kernels: pd.DataFrame
    memcpys: pd.DataFrame
    memsets: pd.DataFrame
    api: pd.DataFrame
    syncs: pd.DataFrame
    nvtx: pd.DataFrame
    streams: pd.DataFrame
    devices: pd.DataFrame
    threads: pd.DataFrame
    osrt: pd.DataFrame

    @property
    def has_gpu_activity(self) -> bool:
        return bool(len(self.kernels) or len(self.memcpys) or len(self.memsets))

    @cached_property
    def gpu_ops(self) -> pd.DataFrame:
        """Kernels, copies and memsets in one frame (kind: kernel/memcpy/memset), sorted
        by start: the GPU's activity for idle/busy and gap math."""
        cols = ["start", "end", "device", "stream", "pid", "corr", "api_start", "api_end",
                "gtid"]
        parts = []
        for kind, frame in (("kernel", self.kernels), ("memcpy", self.memcpys),
                            ("memset", self.memsets)):
            if len(frame):
                part = frame[cols].copy()
                part["kind"] = kind
                part["name"] = (frame["name"].astype(object) if kind == "kernel"
                                else frame["kind"].astype(object) if kind == "memcpy"
                                else "memset")
                parts.append(part)
        if not parts:
            return pd.DataFrame({c: pd.Series([], dtype="int64") for c in cols}
                                | {"kind": pd.Series([], dtype=object),
                                   "name": pd.Series([], dtype=object)})
        ops = pd.concat(parts, ignore_index=True)
        return ops.sort_values("start", kind="stable", ignore_index=True)

    def legacy_streams(self) -> set[tuple[int, int]]:
        """(pid, stream) of every legacy default (NULL) stream."""
        s = self.streams[self.streams["legacy_default"]]
        return set(zip(s["pid"].tolist(), s["stream"].tolist(), strict=True))

    def device_row(self, device: int) -> pd.Series | None:
        match = self.devices[self.devices["device"] == device]
        return None if match.empty else match.iloc[0]

    def thread_name(self, gtid: int) -> str:
        match = self.threads.loc[self.threads["gtid"] == gtid, "name"]
        tid = int(gtid) & 0xFFFFFF
        return f"{match.iloc[0]} (tid {tid})" if len(match) else f"tid {tid}"

    def span(self) -> tuple[int, int] | None:
        """First to last GPU activity, or None without GPU activity."""
        ops = self.gpu_ops
        if ops.empty:
            return None
        return int(ops["start"].min()), int(ops["end"].max())


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(np.array([], dtype=t if t != "str" else object))
                         for c, t in columns.items()})
