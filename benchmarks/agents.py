"""Many agents on one engine: ``before_call`` with 10 agents × 1k skills each against
1 agent × 1k, in the same run (the issue's hot-path target).

Run: .venv/bin/python benchmarks/agents.py [--agents 10] [--skills 1000] [--calls 2000]

Every agent's skills are written to a real store (embedded LanceDB in a temp dir), one
generation per agent; the skills get random unit vectors (embedding 10k texts would take
minutes and does not change the cost of a matrix-vector product); queries are embedded by
the real all-MiniLM-L6-v2. The calls cycle over the agents and over a few distinct tasks,
so after the first round each query vector comes from the LRU (as in hot_path.py's repeated
task rows); a separate column times each agent's *first* call (query vector already in the
LRU): its snapshot was built with the library's read, off the hot path, so it costs what any
other call costs. Prints one table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from metaclaw_core import CallContext, Message, MetaClaw, Settings, Skill

TASKS = [
    "Write the date and time of the meeting in the log",
    "Delete the temporary files in the build folder",
    "Write a SQL query that lists last week's orders",
    "Draft a polite email to the customer about the delay",
    "Summarise the failing tests in the CI report",
]


class RandomDocuments:
    """The engine's embedder for queries; random unit vectors for the benchmark's skills."""

    def __init__(self, inner: Any, seed: int) -> None:
        self.inner = inner
        self.rng = np.random.default_rng(seed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_documents(self, texts: list[str]) -> Any:
        v = self.rng.normal(size=(len(texts), self.inner.dimension())).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def fill(engine: MetaClaw, agents: list[str], n: int) -> None:
    fake = RandomDocuments(engine.embedder, seed=len(agents))
    for agent in agents:
        lib = engine.library_of(agent)
        lib.embedder = fake
        skills = [
            Skill(
                name=f"{agent}-skill-{i}",
                description=f"Synthetic skill {i} of {agent} for the benchmark",
                body=f"Rule {i}: do the right thing in situation {i}. " * 3,
                source="bench",
            )
            for i in range(n)
        ]
        lib.apply(added=skills, reason="bench", vet=False)
    engine.refresh_snapshot()


def run(home: Path, agents: list[str], n: int, calls: int) -> dict[str, Any]:
    settings = Settings(home=home, load_entrypoints=False)
    settings.holdout.enabled = False
    settings.store.snapshot_cache_max_skills = 0
    engine = MetaClaw(settings, capture=False, agent=agents[0])
    assert engine.wait_ready(180)
    fill(engine, agents, n)
    for task in TASKS:  # warm the query LRU: the first-call column is the snapshot's cost
        engine.before_call(CallContext(messages=[Message(role="user", content=task)]))
    first: list[float] = []
    for agent in agents:  # each agent's first call builds its snapshot (in memory)
        c = CallContext(messages=[Message(role="user", content=TASKS[0])], agent=agent)
        t = time.perf_counter()
        inj = engine.before_call(c)
        first.append((time.perf_counter() - t) * 1000)
        assert inj.degraded is None, inj.degraded
        assert all(s.startswith(f"{agent}-") for s in inj.skill_names), inj.skill_names
    times: list[float] = []
    for i in range(calls):
        c = CallContext(
            messages=[Message(role="user", content=TASKS[i % len(TASKS)])],
            agent=agents[i % len(agents)],
        )
        t = time.perf_counter()
        engine.before_call(c)
        times.append((time.perf_counter() - t) * 1000)
    engine.close()
    return {
        "agents": len(agents),
        "skills": n,
        "first_p50": pct(first, 50),
        "first_max": max(first),
        "p50": pct(times, 50),
        "p99": pct(times, 99),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--skills", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(run(Path(tmp) / "one", ["a0"], args.skills, args.calls))
        many = [f"a{i}" for i in range(args.agents)]
        rows.append(run(Path(tmp) / "many", many, args.skills, args.calls))
    print(f"# {platform.node()} {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
    print("| agents × skills | first call per agent p50 / max (ms) | before_call p50 | p99 |")
    print("|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['agents']} × {r['skills']} | {r['first_p50']:.2f} / {r['first_max']:.2f} "
            f"| {r['p50']:.3f} ms | {r['p99']:.3f} ms |"
        )


if __name__ == "__main__":
    main()
