"""How many blocks of a kernel the GPU can hold at once, from its launch configuration
and the device limits the report records (the CUDA occupancy calculator's arithmetic)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpugap.report.trace import Trace

REG_ALLOC_UNIT = 256          # registers are allocated per warp in units of 256
SMEM_RESERVED_PER_BLOCK = 1024  # bytes the driver reserves per block (sm_80 and newer)


def resident_blocks_per_sm(kernels: pd.DataFrame, devices: pd.DataFrame) -> np.ndarray:
    """Per kernel: blocks one SM can hold at once (at least 1)."""
    if kernels.empty:
        return np.zeros(0, dtype=np.int64)
    dev = devices.set_index("device")
    ids = kernels["device"].to_numpy()

    def limit(col: str, default: int) -> np.ndarray:
        if col in dev.columns and len(dev):
            return dev[col].reindex(ids).fillna(default).to_numpy(dtype=np.int64)
        return np.full(ids.shape, default, dtype=np.int64)

    warp = np.maximum(limit("warp_size", 32), 1)
    threads = np.maximum(kernels["threads_per_block"].to_numpy(dtype=np.int64), 1)
    warps = -(-threads // warp)
    by_threads = limit("max_threads_per_sm", 2048) // (warps * warp)
    by_blocks = limit("max_blocks_per_sm", 32)
    regs = kernels["registers"].to_numpy(dtype=np.int64)
    regs_per_warp = -(-(regs * warp) // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = np.where(regs > 0, limit("max_regs_per_sm", 65536)
                       // np.maximum(regs_per_warp * warps, 1), by_blocks)
    smem = (kernels["shared_static"].to_numpy(dtype=np.int64)
            + kernels["shared_dynamic"].to_numpy(dtype=np.int64))
    by_smem = np.where(smem > 0, limit("max_shmem_per_sm", 233472)
                       // (smem + SMEM_RESERVED_PER_BLOCK), by_blocks)
    return np.maximum(np.minimum.reduce([by_threads, by_blocks, by_regs, by_smem]), 1)


def sm_counts(kernels: pd.DataFrame, devices: pd.DataFrame) -> np.ndarray:
    if kernels.empty:
        return np.zeros(0, dtype=np.int64)
    dev = devices.set_index("device")
    if "sm_count" not in dev.columns or dev.empty:
        return np.full(len(kernels), 132, dtype=np.int64)
    return dev["sm_count"].reindex(kernels["device"].to_numpy()).fillna(132).to_numpy(np.int64)


def capacity(trace: Trace) -> np.ndarray:
    """Per kernel of trace.kernels: blocks the whole device can hold at once."""
    return sm_counts(trace.kernels, trace.devices) * resident_blocks_per_sm(trace.kernels,
                                                                          trace.devices)
