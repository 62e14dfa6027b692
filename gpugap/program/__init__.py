"""The program model: what the program is, from the report alone (gpugap.program.model):
its frameworks and libraries, processes and their threads' roles, GPUs and the links
between them, the NVTX domains that are libraries', when it compiled, and each GPU's
iterations. The accounting reads its devices' ops, windows and iterations.
"""

from gpugap.program.model import DeviceLink, DeviceProgram, Program, understand

__all__ = ["DeviceLink", "DeviceProgram", "Program", "understand"]
