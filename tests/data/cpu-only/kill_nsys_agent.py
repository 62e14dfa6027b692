"""Make the nsys profiling this program fail on its own, for real: kill nsys's agent.

nsys 2023.4 (Debian's, the one CI installs) profiles through an agent process it starts,
``nsys --start-agent --session-name=profile-<PID of nsys profile>``; this program runs
under ``nsys profile`` -> ``nsys-launcher`` and so finds nsys's PID two parents up, then
the agent by that session name, and kills it (SIGKILL): nsys prints "Connection to Agent
lost..." and writes no report, whatever this program then does. Exits 97 if no such
agent exists (another nsys version works otherwise): the test then says so.
"""

import os
import signal
import sys
import time


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


nsys_pid = parent_of(os.getppid())
session = f"--session-name=profile-{nsys_pid}".encode()
agents = []
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        with open(f"/proc/{entry}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        continue
    if b"--start-agent" in args and session in args:
        agents.append(int(entry))
if not agents:
    print("no nsys agent found", flush=True)
    sys.exit(97)
for pid in agents:
    os.kill(pid, signal.SIGKILL)
print(f"killed nsys's agent {agents}", flush=True)
time.sleep(0.5)        # nsys notices while the program still runs
print("program done", flush=True)
