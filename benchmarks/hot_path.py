"""Hot-path benchmark: before_call / after_call latency, ingest throughput, top-k, RSS.

Run: .venv/bin/python benchmarks/hot_path.py [--sizes 100,1000,10000,100000] [--calls 2000]
     [--journal-releases-gil] [--model-ms 2]

It also times the randomised holdout (every retrieved skill under holdout vs none).

after_call is timed two ways. "Flood": before_call and after_call back to back with nothing
between them, so the capture writer's commits (every 512 captures) compete with the calls for
the GIL; no agent calls a model 10,000 times a second, this is the worst case. "Agent-paced":
a model call between them, as an agent makes it: a request over a loopback TCP socket to a
stand-in model in another process, which answers after --model-ms; the host thread waits in
recv() with the GIL released, and the writer commits in those waits, as it does in an agent.
2 ms is already far faster than any hosted or local model call.

Skills for the large libraries get random unit vectors (embedding 100k texts would take
half an hour here and does not change the cost of a matrix-vector product); queries are
embedded by the real all-MiniLM-L6-v2. Prints one table; paste it into docs/benchmarks.md.

On a shared machine a call is sometimes descheduled by the kernel for another process's
time slice (~4 ms here), which no code inside the call can avoid. Each timed call also reads
the thread's involuntary context switches (getrusage), and the p99 columns show the p99 of all
calls and, in brackets, of the calls that were not preempted. The load average is printed too.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    return float(np.percentile(np.asarray(xs), p)) if xs else float("nan")


class Timer:
    """Wall time of each call, and whether the kernel preempted the thread during it."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self.preempted: list[bool] = []

    def __call__(self, fn: Callable[[], Any]) -> Any:
        r0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
        t0 = time.perf_counter()
        out = fn()
        t1 = time.perf_counter()
        r1 = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
        self.ms.append((t1 - t0) * 1e3)
        self.preempted.append(r1 != r0)
        return out

    def p(self, q: float) -> float:
        return pct(self.ms, q)

    def p_on_cpu(self, q: float) -> float:
        return pct([m for m, pre in zip(self.ms, self.preempted, strict=True) if not pre], q)

    def share_preempted(self) -> float:
        return 100.0 * sum(self.preempted) / max(1, len(self.preempted))

    def summary(self, digits: int = 3) -> str:
        d = digits
        return f"{self.p(50):.{d}f} / {self.p(99):.{d}f} ({self.p_on_cpu(99):.{d}f})"


MODEL_STAND_IN = r"""
import socket, sys, time
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while conn.recv(64):
    time.sleep(float(sys.argv[1]))
    conn.sendall(b"done")
"""


class ModelStandIn:
    """A model in another process that answers each request after ``seconds`` (loopback)."""

    def __init__(self, seconds: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", MODEL_STAND_IN, str(seconds)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        port = int(self.proc.stdout.readline())
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self) -> bytes:
        self.sock.sendall(b"q")
        return self.sock.recv(64)

    def close(self) -> None:
        self.sock.close()
        self.proc.wait(10)


def reference_work() -> int:
    """About 10 µs of interpreter work touching fresh objects: a yardstick for the machine."""
    return len(sorted(f"item-{i}" for i in range(60)))


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


def new_queries(
    engine: MetaClaw, emb: Any, n: int, count: int
) -> tuple[Timer, Timer, list[float], list[float]]:
    """New-query calls against the embedding floor, in alternating blocks so both see the same
    machine (each block's calls follow calls of their own kind). The model's own time inside
    each call is timed too: "beyond its embedding" is the rest of the call (retrieval,
    rendering), which stays readable when the embedding time swings on a loaded machine."""
    fresh, embed = Timer(), Timer()
    inside: list[float] = []
    beyond: list[float] = []
    encode = emb._encode

    def timed_encode(texts: list[str]) -> Any:
        t0 = time.perf_counter()
        try:
            return encode(texts)
        finally:
            inside.append((time.perf_counter() - t0) * 1e3)

    block = 10
    for b in range(count // block):
        calls = [ctx(f"{TASKS[i % len(TASKS)]} new wording {n}-{b}-{i}", i) for i in range(block)]
        for c in calls:
            # The very text the call will embed (the model is called directly: no cache), so
            # the two blocks embed the same number of tokens.
            text = engine._extract_query(c)
            embed(lambda text=text: encode([text]))
        emb._encode = timed_encode
        try:
            for c in calls:
                k = len(inside)
                fresh(lambda c=c: engine.before_call(c))
                beyond.append(fresh.ms[-1] - sum(inside[k:]))
        finally:
            emb._encode = encode
    return fresh, embed, inside, beyond


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--fresh", type=int, default=200, help="new-query calls per size")
    ap.add_argument("--ingest", type=int, default=20000)
    ap.add_argument(
        "--model-ms",
        type=float,
        default=2.0,
        help="agent-paced after_call: the simulated model call between before/after (ms)",
    )
    ap.add_argument(
        "--journal-releases-gil",
        action="store_true",
        help="store.journal_holds_gil off: the journal write releases the GIL (os.write)",
    )
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    proc = psutil.Process()

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), load_entrypoints=False)
        settings.retrieval.min_similarity = -1.0  # always inject: measure the full path
        settings.store.journal_holds_gil = not args.journal_releases_gil
        engine = MetaClaw(settings)
        assert engine.wait_ready(120), "embedder failed to load"
        model = ModelStandIn(args.model_ms / 1e3)
        dim = engine.embedder.dimension()
        emb = engine.embedder

        print(
            f"# hot path, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
            f"{os.cpu_count()} cores, python {platform.python_version()}, "
            f"load average at start {os.getloadavg()[0]:.2f}"
        )
        print()
        print(
            "| skills | before_call cached p50 / p99 (p99 not preempted) (ms) "
            "| new query p50 / p99 (ms) | its embedding p50 (ms) | embedding alone p50 (ms) "
            "| new - embedding alone p50 (ms) | beyond its embedding p50 / p99 (ms) "
            "| top-k only p50 / p99 (ms) "
            "| after_call flood p50 / p99 (p99 not preempted) (ms) "
            f"| after_call agent-paced ({args.model_ms:g} ms model call) p50 / p99 "
            "(p99 not preempted) (ms) | calls preempted (%) | RSS (MB) |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            snap = synthetic_snapshot(n, dim, generation=1000 + n)
            engine._snapshot = snap  # swap by reference, exactly as a generation change does
            for t in TASKS:
                engine.before_call(ctx(t, 0))
            engine.flush(120)
            cached, after = Timer(), Timer()
            for i in range(args.calls):
                c = ctx(TASKS[i % len(TASKS)], i)
                inj = cached(lambda c=c: engine.before_call(c))
                after(lambda c=c, inj=inj: engine.after_call(c, "done", injection=inj))
            engine.flush(120)
            paced = Timer()
            for i in range(args.calls):
                c = ctx(TASKS[i % len(TASKS)], i)
                inj = engine.before_call(c)
                answer = model.call().decode()
                paced(lambda c=c, inj=inj, a=answer: engine.after_call(c, a, injection=inj))
            fresh, embed, inside, beyond = new_queries(engine, emb, n, args.fresh)
            # Top-k alone, each query vector new to the snapshot (no remembered answer).
            rng = np.random.default_rng(7)
            qs = rng.normal(size=(200, dim)).astype(np.float32)
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)
            topk = Timer()
            for q in qs:
                topk(lambda q=q, snap=snap: snap.top_k(q, 5, -1.0))
            engine.flush(120)
            rss = proc.memory_info().rss / 2**20
            share = (cached.share_preempted() + after.share_preempted()) / 2
            print(
                f"| {n:,} | {cached.summary()} | {fresh.p(50):.2f} / {fresh.p(99):.2f} "
                f"| {pct(inside, 50):.2f} | {embed.p(50):.2f} | {fresh.p(50) - embed.p(50):+.2f} "
                f"| {pct(beyond, 50):.2f} / {pct(beyond, 99):.2f} "
                f"| {topk.p(50):.3f} / {topk.p(99):.3f} | {after.summary()} | {paced.summary()} "
                f"| {share:.1f} | {rss:.0f} |"
            )

        # The machine's own cold-start cost: a fixed piece of plain Python (no MetaClaw),
        # timed right after the same model call and back to back, interleaved.
        warm, cold = Timer(), Timer()
        for _ in range(args.calls):
            model.call()
            cold(reference_work)
            warm(reference_work)
        print()
        print(
            f"reference (fixed plain-Python work, no MetaClaw): back to back p50 / p99 "
            f"{warm.p(50) * 1e3:.1f} / {warm.p(99) * 1e3:.1f} µs, right after the model call "
            f"{cold.p(50) * 1e3:.1f} / {cold.p(99) * 1e3:.1f} µs "
            f"(x{cold.p(50) / warm.p(50):.1f} at p50)"
        )

        # The randomised holdout: every injected skill of these calls under holdout (the
        # worst case: five draws per call, and the arms carried to the capture), against none.
        snap = synthetic_snapshot(1000, dim, generation=3)
        engine._snapshot = snap
        plain_b, plain_a, held_b, held_a = Timer(), Timer(), Timer(), Timer()
        settings.holdout.calls = 10**9
        for i in range(args.calls):
            c = ctx(TASKS[i % len(TASKS)], i)
            engine.holdout._active = {}
            inj = plain_b(lambda c=c: engine.before_call(c))
            plain_a(lambda c=c, inj=inj: engine.after_call(c, "done", injection=inj))
            c = ctx(TASKS[i % len(TASKS)], i)
            engine.holdout._active = {name: i for name in snap.names}
            inj = held_b(lambda c=c: engine.before_call(c))
            held_a(lambda c=c, inj=inj: engine.after_call(c, "done", injection=inj))
        engine.holdout._active = {}
        engine.holdout._pending.clear()  # synthetic skills: nothing to write
        engine.flush(120)
        print()
        print(
            f"holdout (1,000 skills, all 5 retrieved under holdout, {args.calls} calls): "
            f"before_call {plain_b.p(50):.3f} → {held_b.p(50):.3f} ms p50, "
            f"{plain_b.p(99):.3f} → {held_b.p(99):.3f} ms p99; after_call "
            f"{plain_a.p(50):.3f} → {held_a.p(50):.3f} ms p50, "
            f"{plain_a.p(99):.3f} → {held_a.p(99):.3f} ms p99"
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
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
        engine.close()
        model.close()


if __name__ == "__main__":
    main()
