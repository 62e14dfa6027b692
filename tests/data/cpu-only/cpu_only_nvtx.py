import os
import time

import nvtx


def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


with nvtx.annotate("outer_step", domain="gpugap", color="blue"):
    for k in range(3):
        with nvtx.annotate(f"inner_{k}", domain="gpugap"):
            work(200000)
nvtx.push_range("pushpop_range")
time.sleep(0.05)
nvtx.pop_range()
with nvtx.annotate("default_domain_range"):
    time.sleep(0.02)
rng = nvtx.start_range("startend_range", domain="gpugap")
time.sleep(0.01)
nvtx.end_range(rng)
nvtx.mark("a_mark", domain="gpugap")
with open(os.devnull, "w") as f:
    f.write("x")
print("done")
