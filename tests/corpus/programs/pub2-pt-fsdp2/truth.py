"""Truth figures for pub2-pt-fsdp2 (plain sqlite3/numpy, no gpugap).

    python3 truth.py REPORT.sqlite[.xz]

pytorch/examples distributed/FSDP2/example.py under torchrun, two ranks: a toy
Transformer (10 blocks, dim 16, 4 heads, vocab 1,024, sequence 64) sharded with
fully_shard per block and at the root (11 FSDP units, fp32), 10 iterations of
torch.randint(0, 1024, (32, 64)) on the GPU, forward (an all-gather per unit), sum,
backward (all-gathers again and a reduce-scatter per unit), clip_grad_norm_(1.0),
Adam, zero_grad; then a full checkpoint written by rank 0. No NVTX. Iterations: each
begins with the randint kernel (step_starts; reset_parameters' uniform_/normal_ kernels
before the loop are told apart by name and grid).


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
