"""The OS runtime calls the program model reads: what a thread waited on, the child
processes it ran, the files it wrote. One read of the report's OS runtime trace, by name
(SQLite hands over only those calls), for the processes that drove GPUs.
"""

from __future__ import annotations

import re

from gpugap.report.table import Table
from gpugap.report.trace import Trace

# Every pattern below is anchored at the start (^): searching a name is matching it.
# A thread waiting for another thread (or for time to pass).
WAITS = re.compile(
    r"^(?:pthread_cond_(?:timed)?wait|pthread_cond_clockwait|sem_(?:timed|clock)?wait|"
    r"pthread_mutex_(?:timed)?lock|pthread_rwlock_\w*lock|pthread_join|futex|"
    r"(?:e|p)?poll|epoll_p?wait|p?select|(?:clock_)?nanosleep|usleep|sleep|"
    r"sigtimedwait|sigwaitinfo|msgrcv|mq_(?:timed)?receive)$")
# A child process started, and waited for.
CHILD_START = re.compile(r"^(?:posix_spawnp?|fork|vfork)$")
CHILD_WAIT = re.compile(r"^(?:waitpid|wait4|waitid)$")
# Writing files.
FILE_WRITES = re.compile(r"^(?:p?write(?:v|64)?|fwrite|fsync|fdatasync|sync_file_range|"
                         r"copy_file_range|sendfile)$")
_ANY = re.compile("|".join(p.pattern for p in (WAITS, CHILD_START, CHILD_WAIT, FILE_WRITES)))


def read(trace: Trace, pids: list[int]) -> Table | None:
    """The waits, child runs and file writes of *pids* (start, end, gtid, name), sorted
    by start; None when the report has no OS runtime trace."""
    if not trace.osrt_traced:
        return None
    return trace.osrt_calls_named(_ANY, pids=pids)


def named(calls: Table | None, pattern: re.Pattern[str]) -> Table | None:
    """The calls among *calls* (read) whose name matches *pattern* (one of the above)."""
    if calls is None or calls.empty:       # (an empty one's names may be no Labels)
        return calls
    return calls.rows(calls.labels("name").matching(pattern))

