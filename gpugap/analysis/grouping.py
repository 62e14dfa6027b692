"""Which reports are ranks of one job: read from what each report records, never assumed
from how they were passed (a directory, a glob, a list).

::

    from gpugap.analysis.job import group_reports

    grouping = group_reports(["runs/"])       # metadata only: no analysis
    for job in grouping.jobs:
        print(job.name, job.how)   # 'A', '2 reports, RANK 0-1 of WORLD_SIZE 2, same ...'
    grouping.alone                # reports that form no job with others

What a report records (read from its SQLite export; nothing else is needed)

- The launcher's variables, from the environment nsys recorded for the profiled
  program (TARGET_INFO_SYSTEM_ENV ``DeviceEnvironment``, 'A=1;B=2;...'): the rank
  (RANK under torchrun, SLURM_PROCID under srun, OMPI_COMM_WORLD_RANK, PMI_RANK,
  PMIX_RANK, MV2_COMM_WORLD_RANK), the world size and local rank, and what names one
  launch: TORCHELASTIC_RUN_ID, MASTER_ADDR/MASTER_PORT, SLURM_JOB_ID/SLURM_STEP_ID,
  Open MPI's job id, PMIx's namespace, PMI's job id.
- The host (TARGET_INFO_SYSTEM_ENV ``Hostname``).
- The session's span in UTC: TARGET_INFO_SESSION_START_TIME plus ANALYSIS_DETAILS's
  start and stop (the report's times count from the session start).
- The program: the command nsys launched and its script (META_DATA_CAPTURE
  PROCESS_0:COMMAND and PROCESS_0:ARGUMENT_n): ``python3 train.py``.

NCCL's NVTX ranges can carry a communicator id in their payload; the exports nsys
2025.3 writes of them hold no payload values (NVTX_EVENTS.binaryData is empty), so the
id is not used here.

The rule

Two reports can be ranks of one job only if they run the same program, use the same
rank variable, record the same launch (every launch variable either records has the
same value in the other; one recording a variable the other lacks is another launcher)
and the same world size, and their sessions run at the same time: a job's ranks are all
alive together, so a job's sessions share an instant (the latest start is before the
earliest stop). Among reports that qualify, each rank appears once: a rank recorded
twice starts another job (two runs of one program with the default run id 'none' and
port 29500 do not merge). Reports that record no rank join only others that record
none, with the same program and overlapping sessions; their ranks are then the order of
the files, and the job says so. A report left alone is analyzed on its own.

Two reports of the same capture (copies of one file, or a .nsys-rep and its export: the
same host, program, launcher variables and session span to the nanosecond, else the
same bytes) are one report given twice: the later is a duplicate, in no job.
"""

from __future__ import annotations

import os
import string
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpugap.errors import GpugapError
from gpugap.report.cache import content_key, sqlite_export
from gpugap.report.database import Database

# The variables that give a rank and the world size, first found wins (each launcher
# sets its pair: torchrun, srun, Open MPI, MPICH/PMI, PMIx, MVAPICH).
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                  "MV2_COMM_WORLD_RANK")
SIZE_VARIABLES = {"RANK": "WORLD_SIZE", "SLURM_PROCID": "SLURM_NTASKS",
                  "OMPI_COMM_WORLD_RANK": "OMPI_COMM_WORLD_SIZE", "PMI_RANK": "PMI_SIZE",
                  "PMIX_RANK": "PMIX_SIZE", "MV2_COMM_WORLD_RANK": "MV2_COMM_WORLD_SIZE"}
LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK")
# What names one launch: equal in every rank of it, different from run to run (the run
# id of torchrun --standalone, a Slurm job and step, an mpirun's job) or at least from
# concurrent runs (the rendezvous address and port).
LAUNCH_VARIABLES = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID",
                    "SLURM_STEP_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                    "PMI_JOBID")
JOB_VARIABLES = (RANK_VARIABLES + tuple(SIZE_VARIABLES.values()) + LOCAL_RANK_VARIABLES
                 + LAUNCH_VARIABLES)
_VALUE_LIMIT = 200        # a recorded value longer than this is no launcher's


@dataclass
class ReportIdentity:
    """What one report records about where and when it ran (see the module docstring).
    ``start_ns``/``end_ns``: the session's span in UTC ns; ``env``: the job variables
    found, by name; ``error``: why the report could not be read (then nothing else is
    known)."""

    report: str
    program: str | None = None
    host: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    # The bytes' hash (gpugap.report.cache.content_key), read only where the session's
    # span is not recorded: what tells a copy of the report then.
    content: str | None = None

    @property
    def capture(self) -> tuple | None:
        """What one capture alone has: its host, program, launcher variables and session
        span (to the nanosecond), else its bytes. Two reports with the same are copies
        of one capture (or its .nsys-rep and its export), never two ranks."""
        if self.start_ns is not None and self.end_ns is not None:
            return ("session", self.host, self.program, self.start_ns, self.end_ns,
                    tuple(sorted(self.env.items())))
        return None if self.content is None else ("bytes", self.content)

    @property
    def rank_variable(self) -> str | None:
        return next((n for n in RANK_VARIABLES if _is_int(self.env.get(n))), None)

    @property
    def rank(self) -> int | None:
        name = self.rank_variable
        return None if name is None else int(self.env[name])

    @property
    def world_size(self) -> int | None:
        name = self.rank_variable
        size = self.env.get(SIZE_VARIABLES[name]) if name else None
        return int(size) if size is not None and _is_int(size) else None

    @property
    def local_rank(self) -> int | None:
        value = next((self.env[n] for n in LOCAL_RANK_VARIABLES if n in self.env), None)
        return int(value) if value is not None and _is_int(value) else None

    @property
    def launch(self) -> tuple[tuple[str, str], ...]:
        """The launch variables recorded, in LAUNCH_VARIABLES order."""
        return tuple((n, self.env[n]) for n in LAUNCH_VARIABLES if n in self.env)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"rank": self.rank, "world_size": self.world_size}


def _is_int(value: str | None) -> bool:
    return value is not None and value.isdigit() and len(value) < 10


def environment_variables(environment: str | None) -> dict[str, str]:
    """The job variables of a recorded environment ('A=1;B=2;...'), first value wins."""
    found: dict[str, str] = {}
    for item in (environment or "").split(";"):
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if eq and name in JOB_VARIABLES and value and len(value) <= _VALUE_LIMIT \
                and all(c in string.printable and c not in "\r\n\t\x0b\x0c" for c in value):
            found.setdefault(name, value)
    return {k: found[k] for k in JOB_VARIABLES if k in found}


def read_identity(path: str | os.PathLike[str], *, nsys: str | None = None,
                  shown: str | None = None) -> ReportIdentity:
    """The :class:`ReportIdentity` of one report (a .nsys-rep is exported once, as
    gpugap.report.load does, into the same cache; a compressed one decompressed for the
    while). Never raises for a bad report: its identity has ``error`` set."""
    out = ReportIdentity(report=shown or str(path))
    try:
        with sqlite_export(Path(path), nsys=nsys) as export:
            _read_identity(Database(export), out)
            if out.error is None and out.start_ns is None:
                out.content = content_key(export)
    except (GpugapError, OSError) as exc:
        out.error = (str(exc).splitlines() or ["unreadable"])[0]
    return out


def _read_identity(db: Database, out: ReportIdentity) -> None:
    try:
        env = db.system_env
        out.host = env.get("Hostname")
        out.env = environment_variables(env.get("DeviceEnvironment"))
        out.program = db.program
        start = db.session_start_utc_ns
        spans = db.session_spans if start is not None else []
        if start is not None and spans:
            out.start_ns = start + min(a for a, _ in spans)
            out.end_ns = start + max(b for _, b in spans)
    except GpugapError as exc:
        out.error = (str(exc).splitlines() or ["unreadable"])[0]
    finally:
        db.close()


# ---------------------------------------------------------------------------------------
# Grouping


@dataclass
class JobGroup:
    """The reports that are one job: positions in the list grouped, their ranks, and
    what made them one (``how``)."""

    name: str                       # 'A', 'B', ... in the order of the first report
    members: list[int]              # positions, by rank
    ranks: dict[int, int]           # position -> rank
    rank_source: str
    how: str

    def to_dict(self, identities: Sequence[ReportIdentity]) -> dict[str, Any]:
        return {"name": self.name, "how": self.how, "rank_source": self.rank_source,
                "reports": [{"report": identities[i].report, "rank": self.ranks[i]}
                            for i in self.members]}


@dataclass
class Grouping:
    """The reports given, grouped: ``jobs`` (two reports or more each), ``alone``
    (positions of the reports that form no job with others, analyzed on their own) and
    ``duplicates`` (the position of each report that is a copy of an earlier one -> that
    one's: the same capture, counted once, never a rank)."""

    identities: list[ReportIdentity]
    jobs: list[JobGroup]
    alone: list[int]
    duplicates: dict[int, int] = field(default_factory=dict)

    def job_of(self, position: int) -> JobGroup | None:
        return next((j for j in self.jobs if position in j.ranks), None)

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": [j.to_dict(self.identities) for j in self.jobs],
                "alone": [self.identities[i].report for i in self.alone],
                "duplicates": [{"report": self.identities[d].report,
                                "of": self.identities[o].report}
                               for d, o in self.duplicates.items()]}


def _overlap(span: tuple[int, int], identity: ReportIdentity) -> tuple[int, int] | None:
    """The shared instant range of a job's span and one more report's session, or None."""
    if identity.start_ns is None or identity.end_ns is None:
        return None
    lo, hi = max(span[0], identity.start_ns), min(span[1], identity.end_ns)
    return (lo, hi) if lo < hi else None


def _clusters(positions: list[int], ids: Sequence[ReportIdentity]) -> list[list[int]]:
    """*positions* (one program, one launch) split into jobs: sessions that share an
    instant, each rank once. Greedy in start order: a report joins the first job whose
    sessions all overlap its own and which lacks its rank."""
    timed = sorted((p for p in positions if ids[p].start_ns is not None),
                   key=lambda p: (ids[p].start_ns, p))
    members: list[list[int]] = []
    shared: list[tuple[int, int]] = []      # the instants every member's session spans
    for p in timed:
        for k, job in enumerate(members):
            common = _overlap(shared[k], ids[p])
            rank = ids[p].rank          # (None: no rank recorded, none to repeat)
            if common is not None and (rank is None
                                       or rank not in {ids[m].rank for m in job}):
                job.append(p)
                shared[k] = common
                break
        else:
            members.append([p])
            shared.append((ids[p].start_ns, ids[p].end_ns))  # type: ignore[arg-type]
    # A session without a recorded span joins others only by a launch id they share
    # (the bucket's), rank by rank; without one it stays alone.
    for p in (p for p in positions if ids[p].start_ns is None):
        home = next((job for job in members if ids[p].launch
                     and all(ids[m].start_ns is None for m in job)
                     and ids[p].rank is not None
                     and ids[p].rank not in {ids[m].rank for m in job}), None)
        if home is None:
            members.append([p])
        else:
            home.append(p)
    return members


def _rank_range(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])
    return ",".join(map(str, ranks))


def _names(count: int) -> list[str]:
    """'A'..'Z', then 'AA', 'AB', ..."""
    letters = string.ascii_uppercase
    out = []
    for i in range(count):
        name = ""
        i += 1
        while i:
            i, r = divmod(i - 1, 26)
            name = letters[r] + name
        out.append(name)
    return out


def _how(members: list[int], ids: Sequence[ReportIdentity], ranked: bool) -> str:
    first = ids[members[0]]
    parts = [f"{len(members)} reports"]
    if ranked:
        variable = first.rank_variable
        ranks = [ids[m].rank for m in members]
        size = first.world_size
        text = f"{variable} {_rank_range([r for r in ranks if r is not None])}"
        if size is not None:
            text += f" of {SIZE_VARIABLES[variable or 'RANK']} {size}"
            if len(members) < size:
                text += f" ({size - len(members)} missing)"
        parts.append(text)
    else:
        parts.append("no rank recorded (ranks in file order)")
    launch = [name for name, _ in first.launch]
    if launch:
        parts.append("same " + ", ".join(launch))
    if first.program:
        # The script's name says which program; its directory, the same for all, not.
        command, _, script = first.program.rpartition(" ")
        parts.append(f"program {Path(script).name if command else script}")
    hosts = sorted({ids[m].host or "?" for m in members})
    parts.append(f"one host ({hosts[0]})" if len(hosts) == 1 else f"{len(hosts)} hosts")
    spans = [(ids[m].start_ns, ids[m].end_ns) for m in members]
    if all(a is not None and b is not None for a, b in spans):
        shared = min(b for _, b in spans) - max(a for a, _ in spans)  # type: ignore
        parts.append(f"sessions overlap {shared / 1e9:.1f} s")
    else:
        parts.append("sessions' times not recorded")
    return ", ".join(parts)


def _duplicates(ids: Sequence[ReportIdentity]) -> dict[int, int]:
    """Each report that is the same capture as an earlier one (ReportIdentity.capture)
    -> the first of them."""
    first: dict[tuple, int] = {}
    out: dict[int, int] = {}
    for p, identity in enumerate(ids):
        key = identity.capture if identity.error is None else None
        if key is not None:
            out_of = first.setdefault(key, p)
            if out_of != p:
                out[p] = out_of
    return out


def group(identities: Sequence[ReportIdentity]) -> Grouping:
    """The jobs among *identities* (positions as given): see the module docstring."""
    ids = list(identities)
    duplicates = _duplicates(ids)
    buckets: dict[tuple, list[int]] = {}
    for p, identity in enumerate(ids):
        if identity.error is not None or p in duplicates:
            continue
        key = (identity.program, identity.rank_variable, identity.launch,
               identity.world_size if identity.rank_variable else None)
        buckets.setdefault(key, []).append(p)
    found: list[tuple[list[int], bool]] = []
    for (_, variable, _, _), positions in buckets.items():
        for members in _clusters(positions, ids):
            if len(members) > 1:
                found.append((members, variable is not None))
    found.sort(key=lambda f: min(f[0]))
    jobs: list[JobGroup] = []
    for (members, ranked), name in zip(found, _names(len(found)), strict=True):
        if ranked:
            ranks = {m: ids[m].rank for m in members}
            variable = ids[members[0]].rank_variable
            source = f"{variable} recorded in each report's environment"
        else:
            ranks = {m: i for i, m in enumerate(sorted(members))}
            source = "file order (the reports record no rank)"
        order = sorted(members, key=lambda m: (ranks[m], m))
        jobs.append(JobGroup(name=name, members=order,
                             ranks={m: int(ranks[m]) for m in order},  # type: ignore
                             rank_source=source, how=_how(order, ids, ranked)))
    grouped = {m for j in jobs for m in j.members}
    return Grouping(identities=ids, jobs=jobs,
                    alone=[p for p in range(len(ids))
                           if p not in grouped and p not in duplicates],
                    duplicates=duplicates)
