"""A tiny NVRTC-compiled kernel library for the cuda-python scenarios (no nvcc needed)."""

from __future__ import annotations

from typing import Any

SOURCE = r"""
extern "C" __global__ void add_one(float* buf, unsigned int n) {
    unsigned int stride = blockDim.x * gridDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        buf[i] += 1.0f;
    }
}

// A few nanoseconds of work: the "small thing on the default stream" between launches.
extern "C" __global__ void bump(float* counter) {
    if (blockIdx.x == 0 && threadIdx.x == 0) counter[0] += 1.0f;
}
"""


class Kernels:
    """Compiles SOURCE for the current device and exposes launch helpers."""

    def __init__(self) -> None:
        from cuda.core import Device, Program, ProgramOptions

        self.device = Device()
        self.device.set_current()
        program = Program(SOURCE, code_type="c++", options=ProgramOptions(std="c++17"))
        module = program.compile("cubin")
        self.add_one = module.get_kernel("add_one")
        self.bump = module.get_kernel("bump")
        self.sm_count = self.device.properties.multiprocessor_count

    def launch(self, stream: Any, kernel: Any, grid: int, block: int, *args: Any) -> None:
        from cuda.core import LaunchConfig, launch

        launch(stream, LaunchConfig(grid=grid, block=block), kernel, *args)

    @staticmethod
    def ptr(buf: Any) -> int:
        """A device buffer as a kernel argument: its address (``T*`` parameters)."""
        return int(buf.handle)

    def zeros(self, n_floats: int, stream: Any) -> Any:
        buf = self.device.allocate(n_floats * 4, stream=stream)
        buf.fill(0, stream=stream)
        return buf

    @staticmethod
    def to_host(buf: Any, n_floats: int) -> Any:
        """Copy a device buffer back to a NumPy array (after the device is synchronised)."""
        import numpy as np
        from cuda.bindings import driver

        host = np.empty(n_floats, dtype=np.float32)
        (err,) = driver.cuMemcpyDtoH(host.ctypes.data, int(buf.handle), n_floats * 4)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemcpyDtoH failed: {err}")
        return host
