"""Many agents on one engine: ``before_call`` with 10 agents × 1k skills each against
1 agent × 1k, in the same run (the issue's hot-path target).

Run: .venv/bin/python benchmarks/agents.py [--agents 10] [--skills 1000] [--calls 1000]

Two engines on two real stores (embedded LanceDB in temp dirs): one with a single agent of
``--skills`` skills, one with ``--agents`` agents of ``--skills`` skills each (one generation
per agent). The skills get random unit vectors (embedding 10k texts would take minutes and
does not change the cost of a matrix-vector product); queries are the real all-MiniLM-L6-v2's.
Every query text is embedded once before the timing (so the forward pass, the same for both,
is not what is measured), and the calls alternate between the two engines, call by call, so
the machine's load falls on both alike:

* *new query*: each call is a (agent, query) pair not seen before, so no snapshot's answer
  cache helps: one matrix-vector product over the agent's 1k skills per call;
* *repeated task*: five tasks over and over (the answer cache of each agent's snapshot).

The many-agent engine's calls cycle over its agents. A first column times each agent's first
call: its snapshot was built with the library's read, off the hot path, so it costs what any
call costs. p99 is of all calls and, in brackets, of the calls the kernel did not preempt
(``getrusage`` involuntary switches, as in hot_path.py). Prints tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from hot_path import TASKS, Timer

from metaclaw_core import CallContext, Message, MetaClaw, Settings, Skill


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


def engine_with(home: Path, agents: list[str], n: int) -> MetaClaw:
    settings = Settings(home=home, load_entrypoints=False)
    settings.holdout.enabled = False
    settings.store.snapshot_cache_max_skills = 0
    settings.embedding.cache_size = 8192
    engine = MetaClaw(settings, capture=False, agent=agents[0])
    assert engine.wait_ready(180)
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
    return engine


def ctx(text: str, agent: str) -> CallContext:
    return CallContext(messages=[Message(role="user", content=text)], agent=agent)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--skills", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=1000)
    args = ap.parse_args()
    many = [f"a{i}" for i in range(args.agents)]
    queries = [f"{TASKS[k % len(TASKS)]} (case {k})" for k in range(args.calls)]
    with tempfile.TemporaryDirectory() as tmp:
        one = engine_with(Path(tmp) / "one", ["a0"], args.skills)
        ten = engine_with(Path(tmp) / "many", many, args.skills)
        for engine in (one, ten):  # every query text embedded once: the LRU serves it
            for q in [*queries, *TASKS]:
                engine.embedder.embed_query(q)
        first = Timer()
        for agent in many:
            inj = first(lambda a=agent: ten.before_call(ctx(TASKS[0], a)))
            assert inj.degraded is None, inj.degraded
            assert all(s.startswith(f"{agent}-") for s in inj.skill_names), inj.skill_names
        fresh = {"one": Timer(), "many": Timer()}
        for i, q in enumerate(queries):
            fresh["one"](lambda q=q: one.before_call(ctx(q, "a0")))
            agent = many[i % len(many)]
            inj = fresh["many"](lambda q=q, a=agent: ten.before_call(ctx(q, a)))
            assert all(s.startswith(f"{agent}-") for s in inj.skill_names)
        repeated = {"one": Timer(), "many": Timer()}
        for i in range(args.calls):
            task, agent = TASKS[i % len(TASKS)], many[i % len(many)]
            repeated["one"](lambda t=task: one.before_call(ctx(t, "a0")))
            repeated["many"](lambda t=task, a=agent: ten.before_call(ctx(t, a)))
        one.close()
        ten.close()
    print(
        f"# {platform.node()}: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; "
        f"{args.calls} calls per row; first call of each of {args.agents} agents: "
        f"p50 {first.p(50):.3f} ms, max {max(first.ms):.3f} ms"
    )
    print("| engine | calls | p50 (ms) | p99 (on CPU) (ms) |")
    print("|---|---|---:|---:|")
    for label, timers in (("new query", fresh), ("repeated task", repeated)):
        for who, timer in (
            (f"1 agent × {args.skills}", timers["one"]),
            (f"{args.agents} agents × {args.skills}", timers["many"]),
        ):
            cells = timer.summary().replace(" / ", " | ")  # p50 | p99 (p99 not preempted)
            print(f"| {who} | {label} | {cells} |")


if __name__ == "__main__":
    main()
