"""Truth figures for pub2-pt-tp-toy (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

pytorch/examples distributed/tensor_parallelism/tensor_parallel_example.py under
torchrun, two ranks: a ToyModel (Linear 10->32, ReLU, Linear 32->5) parallelised with
DTensor (in_proj ColwiseParallel, out_proj RowwiseParallel: one all-reduce of the
output in the forward), AdamW (foreach), 10 iterations of torch.rand(20, 10) on the GPU,
forward, output.sum().backward(), optimizer.step(); rank 0 logs a line per iteration.
No NVTX. Iterations: each begins with the rand kernel (step_starts).


Figures: tests/corpus/truth_torchrun_steps.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from truth_torchrun_steps import job_figures, random_batch_starts  # noqa: E402


def main(path: str) -> dict:
    return job_figures(path, random_batch_starts)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), sort_keys=True, indent=1))
