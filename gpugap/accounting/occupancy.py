"""How many blocks of a kernel the GPU can hold at once, from its launch configuration
and the device limits the report records (the CUDA occupancy calculator's arithmetic).

The functions read the columns they need of Tables (the kernels', or a few launch
configurations', and the devices')."""

from __future__ import annotations

import numpy as np

from gpugap.report.table import Table

REG_ALLOC_UNIT = 256          # registers are allocated per warp in units of 256
SMEM_RESERVED_PER_BLOCK = 1024  # bytes the driver reserves per block (sm_80 and newer)


def _device_limit(devices: Table, column: str, ids: np.ndarray,
                  default: int) -> np.ndarray:
    """The *column* of the device row of each id of *ids* (int64), *default* where the
    report has no such row, column or value (NaN)."""
    if column not in devices or not len(devices):
        return np.full(ids.shape, default, dtype=np.int64)
    device = np.asarray(devices["device"])
    order = np.argsort(device, kind="stable")
    row = order[np.searchsorted(device, ids, sorter=order).clip(max=device.size - 1)]
    value = np.asarray(devices[column])[row]
    known = device[row] == ids
    if value.dtype.kind == "f":                     # an int column with missing values
        known &= ~np.isnan(value)
    return np.where(known, value, default).astype(np.int64)


def resident_blocks_per_sm(kernels: Table, devices: Table) -> np.ndarray:
    """Per kernel: blocks one SM can hold at once (at least 1)."""
    if not len(kernels):
        return np.zeros(0, dtype=np.int64)
    ids = np.asarray(kernels["device"])

    def limit(column: str, default: int) -> np.ndarray:
        return _device_limit(devices, column, ids, default)

    warp = np.maximum(limit("warp_size", 32), 1)
    threads = np.maximum(np.asarray(kernels["threads_per_block"], dtype=np.int64), 1)
    warps = -(-threads // warp)
    by_threads = limit("max_threads_per_sm", 2048) // (warps * warp)
    by_blocks = limit("max_blocks_per_sm", 32)
    regs = np.asarray(kernels["registers"], dtype=np.int64)
    regs_per_warp = -(-(regs * warp) // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = np.where(regs > 0, limit("max_regs_per_sm", 65536)
                       // np.maximum(regs_per_warp * warps, 1), by_blocks)
    smem = (np.asarray(kernels["shared_static"], dtype=np.int64)
            + np.asarray(kernels["shared_dynamic"], dtype=np.int64))
    by_smem = np.where(smem > 0, limit("max_shmem_per_sm", 233472)
                       // (smem + SMEM_RESERVED_PER_BLOCK), by_blocks)
    return np.maximum(np.minimum.reduce([by_threads, by_blocks, by_regs, by_smem]), 1)


def sm_counts(kernels: Table, devices: Table) -> np.ndarray:
    """Per kernel: the SM count of its device (132, a Hopper's, where unrecorded)."""
    if not len(kernels):
        return np.zeros(0, dtype=np.int64)
    return _device_limit(devices, "sm_count", np.asarray(kernels["device"]), 132)

