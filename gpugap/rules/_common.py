"""Helpers shared by rules: CUDA API name patterns. (NVTX labels of moments live
beside the range table, in gpugap.accounting.labels.)"""

from __future__ import annotations

import re

from gpugap.accounting.host import MODULE_LOAD  # noqa: F401 (used by rules)

# Calls that block the host until the GPU (or part of it) is done.
SYNC = re.compile(r"Synchronize$")
LAUNCH = re.compile(r"Launch")
MEMCPY = re.compile(r"Memcpy")
# Copies that are asynchronous by API contract (they may still block, e.g. pageable).
ASYNC = re.compile(r"Async")
