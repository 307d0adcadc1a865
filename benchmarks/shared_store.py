"""Local disk versus an S3 server (SeaweedFS on loopback): hot path and capture throughput.

Run: .venv/bin/python benchmarks/shared_store.py [--captures 5000]
The hot path must not get slower on object storage: it never makes a store round trip.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from metaclaw_core import CallContext, Message, MetaClaw, Settings, Skill
from tests.support.s3 import seaweedfs

TASKS = [
    "Write the date and time of the meeting in the log",
    "Delete the temporary files in the build folder",
    "Write a SQL query that lists last week's orders",
]
SKILLS = [
    Skill(name=f"rule-{i}", description=f"When task kind {i} comes up", body=f"Do thing {i} well.")
    for i in range(100)
]


def measure(settings: Settings, captures: int) -> dict[str, float]:
    engine = MetaClaw(settings)
    engine.wait_ready(120)
    engine.add_skills(SKILLS)
    ctxs = [CallContext(messages=[Message(role="user", content=t)]) for t in TASKS]
    for c in ctxs:
        engine.before_call(c)
    before, after = [], []
    for i in range(2000):
        c = CallContext(messages=ctxs[i % 3].messages)
        t0 = time.perf_counter()
        inj = engine.before_call(c)
        t1 = time.perf_counter()
        engine.after_call(c, "ok", injection=inj)
        before.append((t1 - t0) * 1e3)
        after.append((time.perf_counter() - t1) * 1e3)
    engine.flush(300)
    t0 = time.perf_counter()
    for i in range(captures):
        engine.after_call(CallContext(messages=ctxs[i % 3].messages), "ok")
    engine.flush(600)
    elapsed = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(20):
        engine.library.refresh()
        engine.library.current_generation()
    poll_ms = (time.perf_counter() - t0) / 20 * 1e3
    engine.close()
    return {
        "before_p50": float(np.percentile(before, 50)),
        "before_p99": float(np.percentile(before, 99)),
        "after_p50": float(np.percentile(after, 50)),
        "after_p99": float(np.percentile(after, 99)),
        "ingest_per_s": captures / elapsed,
        "poll_ms": poll_ms,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--captures", type=int, default=5000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        local = Settings(home=Path(tmp) / "local", load_entrypoints=False)
        res_local = measure(local, args.captures)
        with seaweedfs(Path(tmp) / "weed") as s3:
            remote = Settings(home=Path(tmp) / "s3", load_entrypoints=False)
            remote.store.uri = f"s3://{s3.bucket}/bench"
            remote.store.storage_options = s3.storage_options()
            res_s3 = measure(remote, args.captures)
    print(
        f"# shared store, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} cores; 100 skills; {args.captures:,} captures"
    )
    print("| metric | local disk | S3 (SeaweedFS, loopback) | S3 / local |")
    print("|---|---:|---:|---:|")
    for key, label in [
        ("before_p50", "before_call p50 (ms)"),
        ("before_p99", "before_call p99 (ms)"),
        ("after_p50", "after_call p50 (ms)"),
        ("after_p99", "after_call p99 (ms)"),
        ("ingest_per_s", "capture throughput to the store (/s)"),
        ("poll_ms", "generation poll (refresh + read) (ms)"),
    ]:
        a, b = res_local[key], res_s3[key]
        print(f"| {label} | {a:.3f} | {b:.3f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
