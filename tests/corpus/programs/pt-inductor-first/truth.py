"""Truth figures for pt-inductor-first: the compile must be in step 0 only; steady busy.

    python3 truth.py REPORT.sqlite[.xz]

Iterations: the NVTX ranges ``step N``. Steady state: steps 2..49 (from the start of
``step 2`` to the end of the last step). A compiling step: one lasting over 10 times the
median steady step and over 1 s (compilation is seconds of host work; nothing else
in the program takes that long). Evidence per compiling step: the longest stretch of
the step with no CUDA call from its thread (Dynamo/Inductor working), the module loads
in it (the new Triton kernels), and its GPU idle. Compilation share: the steady
compiling steps' time beyond the median step (designed: none), as a % of the window.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torch import compile_steps_figures  # noqa: E402


def main(path: str) -> dict:
    return compile_steps_figures(path)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
