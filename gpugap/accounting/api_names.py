"""CUDA API calls by what they do, named once: the one classification of API names that
the accounting (which category a host thread's time in a call goes to:
gpugap.accounting.host), the rules (the calls a finding counts or cites) and the
timeline (a call's colour: gpugap.render.timeline) read. Each pattern is searched in a
call's name (``re.search``; runtime and driver names alike); a name may match several
(cudaMemcpyAsync: a copy, and asynchronous), and each reader says which wins.
"""

from __future__ import annotations

import re

# Library/module loading: lazy loading of kernels happens inside these.
MODULE_LOAD = re.compile(r"^(?:cu|cuda)(?:Library|Module)Load|^cuLink(?:Complete|AddData|AddFile)")
# Calls that block the host until the GPU (or part of it) is done.
SYNCHRONIZE = re.compile(r"Synchronize$")
# Allocation and freeing of device, host and virtual memory.
ALLOCATE = re.compile(
    r"^(?:cuda|cu)(?:Malloc|Free|MemAlloc|MemFree|HostAlloc|MallocHost|FreeHost|"
    r"HostRegister|HostUnregister|MemHostAlloc|MemHostRegister|MemHostUnregister|MemCreate|"
    r"MemRelease|MemMap|MemUnmap|MemSetAccess|MemAddressReserve|MemAddressFree|"
    r"MallocManaged|MallocArray|FreeArray|Malloc3D|MallocPitch|ArrayCreate|ArrayDestroy)")
MEMCPY = re.compile(r"Memcpy")
# Copies (and other calls) that are asynchronous by API contract (they may still block,
# e.g. a copy from pageable memory).
ASYNC = re.compile(r"Async")
# Launches of work: kernels, CUDA graphs, host functions.
LAUNCH = re.compile(r"Launch")
# Launches, copies and memsets: the calls that put work on a GPU.
GPU_WORK = re.compile(r"Launch|Memcpy|Memset")

# The classes a timeline draws API calls in (first match wins), wider than the
# accounting's: every call that touches modules (lookups too), memory (pools too), the
# GPU's progress (waits and queries too) or copies (memsets and prefetches too) is
# coloured as such; the rest are "other".
DRAWN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("api-launch", LAUNCH),
    ("api-copy", re.compile(r"Memcpy|Memset|MemPrefetch")),
    ("api-sync", re.compile(r"Synchronize|WaitEvent|StreamWait|EventQuery|StreamQuery")),
    ("api-memory", re.compile(r"Malloc|Free|MemAlloc|HostAlloc|HostRegister|MemPool|"
                              r"MemCreate|MemMap|MemRelease")),
    ("api-module", re.compile(r"Module|Library|LinkComplete|GetProcAddress")),
)
