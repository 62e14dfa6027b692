"""tests/corpus/truth_host.py: its interval arithmetic against a brute-force count, the
Python-sample payload decoder on a hand-built payload (no capture at hand exports the
payloads: a default export leaves binaryData NULL), and a report without host evidence
(a hand-built SQLite file: every real capture has more tables than this edge case)."""

from __future__ import annotations

import json
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import truth_host as th  # noqa: E402


def random_intervals(rng, n: int) -> np.ndarray:
    a = rng.integers(0, 1000, n)
    return np.stack([a, a + rng.integers(1, 60, n)], axis=1).astype(np.int64)


def covered(iv: np.ndarray) -> np.ndarray:
    grid = np.zeros(1200, dtype=bool)
    for s, e in iv:
        grid[s:e] = True
    return grid


def test_interval_helpers_match_a_brute_force_count():
    rng = np.random.default_rng(44)
    for _ in range(50):
        a, b = random_intervals(rng, 30), random_intervals(rng, 20)
        ua, ub = th.union(a), th.union(b)
        assert (covered(ua) == covered(a)).all()
        assert (ua[1:, 0] > ua[:-1, 1]).all()          # disjoint and sorted
        both = covered(a) & covered(b)
        assert th.intersect_ns(ua, ub) == both.sum()
        assert (covered(th.intersect(ua, ub)) == both).all()
        t = rng.integers(0, 1100, 200)
        assert (th.inside(ua, t) == covered(a)[t]).all()
        idle = th.idle_of(ua, 100, 900)
        assert (covered(idle)[100:900] == ~covered(a)[100:900]).all()


def test_python_sample_payload_decodes_with_the_layout_of_the_schema_tables():
    # the entries nsys 2025.3 writes for 'Python Periodic Sampling' (copied from the
    # MNIST capture's NVTX_PAYLOAD_SCHEMA_ENTRIES), in an in-memory database
    db = sqlite3.connect(":memory:")
    db.executescript("""
        create table NVTX_PAYLOAD_SCHEMAS (domainId, schemaId, name, type, flags,
            numEntries, payloadSize, alignTo);
        create table NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId, schemaId, idx, flags, type,
            name, description, arrayOrUnionDetail, offset);
        insert into NVTX_PAYLOAD_SCHEMAS values
            (1, 4294967298, 'Python Periodic Sampling', 2, null, 4, null, null),
            (1, 4294967296, null, 1, null, 3, 24, null);
        insert into NVTX_PAYLOAD_SCHEMA_ENTRIES values
            (1, 4294967298, 0, null, 18, 'Thread state ID', null, null, null),
            (1, 4294967298, 1, null, 4294967297, 'Thread state', null, null, 8),
            (1, 4294967298, 2, null, 16, 'Frames count', null, null, 12),
            (1, 4294967298, 3, 48, 4294967296, 'Frames', null, 2, 16),
            (1, 4294967296, 0, null, 80, 'Function', null, null, null),
            (1, 4294967296, 1, null, 80, 'File', null, null, 8),
            (1, 4294967296, 2, null, 15, 'Line', null, null, 16);
    """)
    r = th.HostReport.__new__(th.HostReport)
    r.db, r.tables = db, {"NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES"}
    layout = th.sampling_layout(r, 1)
    strings = {7: "augment", 8: "/app/train.py", 9: "<module>"}
    payload = struct.pack("<QII", 1, 1, 2) + struct.pack("<QQi4x", 7, 8, 42) \
        + struct.pack("<QQi4x", 9, 8, 3)
    assert th.decode_sample(payload, layout, strings) == [
        ("augment", "/app/train.py", 42), ("<module>", "/app/train.py", 3)]
    assert th.decode_sample(th.payload_bytes(payload.hex()), layout, strings)[0][2] == 42
    assert th.decode_sample(payload[:30], layout, strings) is None   # truncated


def test_a_report_without_host_evidence_names_what_is_missing(tmp_path):
    path = tmp_path / "bare.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        create table StringIds (id integer primary key, value text);
        create table CUPTI_ACTIVITY_KIND_KERNEL (start int, end int, deviceId int);
        insert into CUPTI_ACTIVITY_KIND_KERNEL values (0, 100, 0), (300, 1000, 0);
    """)
    db.commit()
    db.close()
    run = subprocess.run([sys.executable, str(HERE / "truth_host.py"), str(path),
                          "--json"], capture_output=True, text=True, check=True)
    d = json.loads(run.stdout)
    # the middle 80% of 0..1000 is 100..900, idle 100..300
    assert d["idle"]["intervals"] == 1 and d["idle"]["pct"] == 25.0
    assert "COMPOSITE_EVENTS" in d["cpu_samples"]["missing"]
    assert "NVTX_EVENTS" in d["gil"]["missing"]
    assert "NVTX_EVENTS" in d["python_samples"]["missing"]
    bad = subprocess.run([sys.executable, str(HERE / "truth_host.py"),
                          str(tmp_path / "none.sqlite")], capture_output=True, text=True)
    assert bad.returncode == 2 and "no such file" in bad.stderr
