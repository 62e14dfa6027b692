"""A CPU-only program whose host evidence is known (tests/test_host_evidence.py): the
main thread runs numpy ufuncs for about 0.6 s, then waits on an empty queue.Queue for
about 0.6 s while a producer thread runs pure Python, then gets one item."""

import queue
import threading
import time

import numpy as np


def numpy_work(seconds: float) -> float:
    a = np.random.default_rng(0).random(2_000_000)
    total, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        total += float(np.sqrt(np.exp(a) * 1.5 + a).sum())
    return total


def producer(q: queue.Queue, seconds: float) -> None:
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += sum(i * i for i in range(1000))          # pure Python
    q.put(n)


def main() -> None:
    numpy_work(0.6)
    q: queue.Queue = queue.Queue()
    t = threading.Thread(target=producer, args=(q, 0.6), name="producer")
    t.start()
    q.get()                                            # waits ~0.6 s
    t.join()


if __name__ == "__main__":
    main()
