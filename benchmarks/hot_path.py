"""Hot-path benchmark: before_call / after_call latency, ingest throughput, top-k, RSS.

Run: .venv/bin/python benchmarks/hot_path.py [--sizes 100,1000,10000,100000] [--calls 2000]

Skills for the large libraries get random unit vectors (embedding 100k texts would take
half an hour here and does not change the cost of a matrix-vector product); queries are
embedded by the real all-MiniLM-L6-v2. Prints one table; paste it into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import psutil

from metaclaw_core import CallContext, Message, MetaClaw, Settings, Skill
from metaclaw_core.skills.index import SkillSnapshot

TASKS = [
    "Write the date and time of the meeting in the log",
    "Delete the temporary files in the build folder",
    "Write a SQL query that lists last week's orders",
    "Draft a polite email to the customer about the delay",
    "Summarise the failing tests in the CI report",
]
SYSTEM = "You are a careful assistant. " * 20


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def synthetic_snapshot(n: int, dim: int, generation: int) -> SkillSnapshot:
    rng = np.random.default_rng(n)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    skills = [
        Skill.model_construct(
            name=f"skill-{i}",
            description=f"Synthetic skill {i} for the benchmark",
            body=f"Rule {i}: do the right thing in situation {i}. " * 3,
            category=None,
            source="bench",
            provenance=[],
            status="active",
            generation_added=generation,
            generation_retired=None,
        )
        for i in range(n)
    ]
    return SkillSnapshot.build(generation, skills, vecs)


def ctx(text: str, i: int) -> CallContext:
    return CallContext(
        session_id=f"bench-{i % 8}",
        framework="bench",
        model="m",
        messages=[
            Message(role="system", content=SYSTEM),
            Message(role="user", content=text),
            Message(role="assistant", content="Sure, I will look into it. " * 10),
            Message(role="user", content=f"{text} (follow-up)"),
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--ingest", type=int, default=20000)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    proc = psutil.Process()

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), load_entrypoints=False)
        settings.retrieval.min_similarity = -1.0  # always inject: measure the full path
        engine = MetaClaw(settings)
        assert engine.wait_ready(120), "embedder failed to load"
        dim = engine.embedder.dimension()
        emb = engine.embedder

        # Embedding cost alone (the floor of a new query).
        t_embed = []
        for i in range(200):
            t0 = time.perf_counter()
            emb._encode([f"{TASKS[i % len(TASKS)]} variant {i}"])  # type: ignore[attr-defined]
            t_embed.append((time.perf_counter() - t0) * 1e3)

        print(
            f"# hot path, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
            f"{os.cpu_count()} cores, python {platform.python_version()}"
        )
        print(
            f"query embedding alone (MiniLM, 1 text): p50 {pct(t_embed, 50):.2f} ms, "
            f"p99 {pct(t_embed, 99):.2f} ms"
        )
        print()
        print(
            "| skills | before_call cached p50 / p99 (ms) | before_call new query p50 / p99 (ms) "
            "| new - embed p50 (ms) | top-k only p50 (ms) | after_call p50 / p99 (ms) | RSS (MB) |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            snap = synthetic_snapshot(n, dim, generation=1000 + n)
            engine._snapshot = snap  # swap by reference, exactly as a generation change does
            for t in TASKS:
                engine.before_call(ctx(t, 0))
            cached, fresh, after, topk = [], [], [], []
            for i in range(args.calls):
                c = ctx(TASKS[i % len(TASKS)], i)
                t0 = time.perf_counter()
                inj = engine.before_call(c)
                t1 = time.perf_counter()
                engine.after_call(c, "done", injection=inj)
                t2 = time.perf_counter()
                cached.append((t1 - t0) * 1e3)
                after.append((t2 - t1) * 1e3)
            for i in range(min(200, args.calls)):
                c = ctx(f"{TASKS[i % len(TASKS)]} new wording {n}-{i}", i)
                t0 = time.perf_counter()
                engine.before_call(c)
                fresh.append((time.perf_counter() - t0) * 1e3)
            q = emb.embed_query(TASKS[0])
            for _ in range(200):
                t0 = time.perf_counter()
                snap.top_k(q, 5, -1.0)
                topk.append((time.perf_counter() - t0) * 1e3)
            engine.flush(120)
            rss = proc.memory_info().rss / 2**20
            print(
                f"| {n:,} | {pct(cached, 50):.3f} / {pct(cached, 99):.3f} "
                f"| {pct(fresh, 50):.2f} / {pct(fresh, 99):.2f} "
                f"| {pct(fresh, 50) - pct(t_embed, 50):.2f} | {pct(topk, 50):.3f} "
                f"| {pct(after, 50):.3f} / {pct(after, 99):.3f} | {rss:.0f} |"
            )

        # Ingest: how many acknowledged trajectories per second reach LanceDB.
        engine._snapshot = synthetic_snapshot(100, dim, generation=1)
        contexts = [ctx(TASKS[i % len(TASKS)], i) for i in range(args.ingest)]
        injections = [engine.before_call(c) for c in contexts]
        start_count = engine.trajectories.count()
        t0 = time.perf_counter()
        for c, inj in zip(contexts, injections, strict=True):
            engine.after_call(c, "done", injection=inj)
        t_ack = time.perf_counter() - t0
        assert engine.flush(600)
        t_all = time.perf_counter() - t0
        stored = engine.trajectories.count() - start_count
        print()
        print(
            f"ingest: {args.ingest:,} trajectories acknowledged in {t_ack:.2f} s "
            f"({args.ingest / t_ack:,.0f}/s), all {stored:,} in LanceDB after {t_all:.2f} s "
            f"({stored / t_all:,.0f}/s end to end)"
        )
        print(f"writer stats: {dict(engine.writer.stats) if engine.writer else {}}")
        print(f"peak RSS: {proc.memory_info().rss / 2**20:.0f} MB")
        _ = statistics  # keep import for readers extending the script
        engine.close()


if __name__ == "__main__":
    main()
