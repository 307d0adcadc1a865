"""Start-up benchmark: import time, CLI times, `metaclaw serve` to /readyz, RSS, and new-query
embedding latency, for every installed embedder side by side in one run.

Run: .venv/bin/python benchmarks/startup.py [--runs 5] [--queries 300] [--skills 36]

Every import and CLI figure is a fresh interpreter (``python -c`` / ``python -m``), timed from
spawn to exit: min and median of --runs. ``serve`` is ``metaclaw serve --port 0`` on a home
seeded with --skills skills, once per embedding backend: the time until it prints that it
listens (``/healthz`` answers), until ``/readyz`` answers 200, and until the first
``/v1/inject`` returns skills; then the server's resident memory (RSS, psutil). Query
embedding: --queries distinct new queries (the LRU never hits), one at a time, in this
process, after a warm-up. The load average is printed: on a shared machine every number is
noisier and slower than on a quiet one. Prints markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's metaclaw_core, whatever is installed

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

PY = sys.executable


def installed_backends() -> list[str]:
    """The embedding backends this environment can run, numpy first."""
    from importlib.util import find_spec

    out = ["numpy"]
    if find_spec("onnxruntime") and find_spec("onnx"):
        out.append("onnx")
    if find_spec("sentence_transformers"):
        out.append("sentence-transformers")
    return out


BACKENDS = installed_backends()
TASKS = [
    "Write the date and time of the meeting in the log",
    "Delete the temporary files in the build folder",
    "Write a SQL query that lists last week's orders",
    "Draft a polite email to the customer about the delay",
    "Summarise the failing tests in the CI report",
    "Book a table for four on Friday evening",
]


def env(home: Path | None = None, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("METACLAW_")}
    e["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *(str(ROOT / "integrations" / n) for n in ("langchain",))]
    )
    if home is not None:
        e["METACLAW_HOME"] = str(home)
    e.update(extra)
    return e


def timed(argv: list[str], runs: int, home: Path | None = None) -> tuple[float, float]:
    """(min, median) wall seconds of ``argv`` run to completion ``runs`` times."""
    took: list[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env(home), check=True, capture_output=True, timeout=120)
        took.append(time.perf_counter() - t0)
    return min(took), statistics.median(took)


def seed_home(home: Path, n: int) -> None:
    """A store with ``n`` live skills (made here), as the issue's 36-skill measurement had."""
    code = (
        "from metaclaw_core import MetaClaw, Settings, Skill\n"
        f"skills = [Skill(name=f'skill-{{i}}', description=f'Use when task family {{i}} comes "
        f"up: ' + t, body='Do it carefully and say what you did.') for i, t in "
        f"enumerate({TASKS!r} * {n})][:{n}]\n"
        "with MetaClaw(Settings(load_entrypoints=False)) as e:\n"
        "    assert e.wait_ready(120)\n"
        "    e.add_skills(skills, reason='benchmark seed')\n"
    )
    subprocess.run([PY, "-c", code], env=env(home), check=True, timeout=300)


def serve(home: Path, backend: str) -> dict[str, float]:
    """Start `metaclaw serve`; time listening, /readyz 200 and the first skills; RSS."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [PY, "-m", "metaclaw_core.cli", "serve", "--port", "0"],
        env=env(home, METACLAW_EMBEDDING__BACKEND=backend, METACLAW_LOAD_ENTRYPOINTS="false"),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    out: dict[str, float] = {}
    try:
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:
            if m := re.search(r"serving on (http://\S+)", line):
                url = m.group(1)
                out["listening_s"] = time.perf_counter() - t0
                break
        assert url, "metaclaw serve did not start"
        threading.Thread(target=lambda: [None for _ in proc.stderr or []], daemon=True).start()
        with httpx.Client(base_url=url, timeout=30) as http:
            while http.get("/readyz").status_code != 200:
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError("never ready")
                time.sleep(0.01)
            out["readyz_s"] = time.perf_counter() - t0
            r = http.post("/v1/inject", json={"task": TASKS[0]}).json()
            out["first_skills_s"] = time.perf_counter() - t0
            out["skills_injected"] = float(len(r["skills"]))
            for task in TASKS[1:]:  # a few calls, as an agent's first minute would make
                http.post("/v1/inject", json={"task": task})
        out["rss_mb"] = psutil.Process(proc.pid).memory_info().rss / 2**20
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def query_texts(n: int) -> list[str]:
    return [f"{TASKS[i % len(TASKS)]} (ticket {i})" for i in range(n)]


# the texts every backend's vectors are compared on (with the shortest ones)
COSINE_TEXTS = ["", "a", "ok", "hello", "9:30", *TASKS, *query_texts(40)]


def query_latency(backend: str, n: int, cache_dir: Path) -> dict[str, Any]:
    """p50/p99 ms of embedding ``n`` distinct new queries, the load time, the vectors."""
    from metaclaw_core.config import EmbeddingSettings
    from metaclaw_core.embeddings import make_embedder

    settings = EmbeddingSettings(backend=backend, cache_size=0)  # type: ignore[arg-type]
    emb: Any = make_embedder(settings, cache_dir=cache_dir)
    t0 = time.perf_counter()
    assert emb.wait_ready(300), emb.load_error
    load = time.perf_counter() - t0
    for task in TASKS:
        emb.embed_query(task)  # warm-up
    took: list[float] = []
    for text in query_texts(n):
        t = time.perf_counter()
        emb.embed_query(text)
        took.append((time.perf_counter() - t) * 1000)
    docs = [f"{TASKS[i % len(TASKS)]}: step {i} of the runbook" for i in range(64)]
    t = time.perf_counter()
    emb.embed_documents(docs)
    per_doc = (time.perf_counter() - t) * 1000 / len(docs)
    return {
        "load_s": load,
        "p50_ms": float(np.percentile(took, 50)),
        "p99_ms": float(np.percentile(took, 99)),
        "batch_ms_per_doc": per_doc,
        "vectors": np.stack([emb.embed_query(t) for t in COSINE_TEXTS]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--skills", type=int, default=36)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}; {os.cpu_count()} cores", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        seed_home(home, args.skills)
        rows = [
            ("`import metaclaw_core`", [PY, "-c", "import metaclaw_core"]),
            (
                "`from metaclaw_core import MetaClaw`",
                [PY, "-c", "from metaclaw_core import MetaClaw"],
            ),
            ("`import langchain.agents` (the host alone)", [PY, "-c", "import langchain.agents"]),
            ("`import metaclaw_langchain`", [PY, "-c", "import metaclaw_langchain"]),
            ("`metaclaw --help`", [PY, "-m", "metaclaw_core.cli", "--help"]),
            (
                "`from metaclaw_core import MetaClaw` + `MetaClaw(capture=False)`",
                [
                    PY,
                    "-c",
                    "from metaclaw_core import MetaClaw, Settings\n"
                    "s = Settings(load_entrypoints=False)\ns.embedding.preload = False\n"
                    "MetaClaw(s, capture=False).close()",
                ],
            ),
            ("`metaclaw status --json`", [PY, "-m", "metaclaw_core.cli", "status", "--json"]),
            (
                "`metaclaw status --json --read-store` (through LanceDB)",
                [PY, "-m", "metaclaw_core.cli", "status", "--json", "--read-store"],
            ),
        ]
        print("\n| command (fresh interpreter) | min s | median s |\n|---|---|---|")
        baseline = timed([PY, "-c", "pass"], args.runs)
        print(
            f"| `python -c pass` (the interpreter itself) | {baseline[0]:.2f} | {baseline[1]:.2f} |"
        )
        for label, argv in rows:
            lo, med = timed(argv, args.runs, home)
            print(f"| {label} | {lo:.2f} | {med:.2f} |", flush=True)

        print(
            f"\n| `metaclaw serve` ({args.skills} skills) | listening s | /readyz 200 s "
            "| first skills s | RSS MB |\n|---|---|---|---|---|"
        )
        # the onnx backend twice: its first start builds the graph, a restart reads it
        starts = [(b, b) for b in BACKENDS if b != "onnx"]
        if "onnx" in BACKENDS:
            starts[1:1] = [("onnx", "onnx (first start)"), ("onnx", "onnx (restart)")]
        for backend, label in starts:
            s = serve(home, backend)
            assert s["skills_injected"] > 0, "the first inject after /readyz got no skills"
            print(
                f"| {label} | {s['listening_s']:.2f} | {s['readyz_s']:.2f} | "
                f"{s['first_skills_s']:.2f} | {s['rss_mb']:.0f} |",
                flush=True,
            )

    print(
        "\n| embedder | load s | new query p50 ms | p99 ms | batch of 64, ms/doc "
        "| min cosine vs numpy |\n|---|---|---|---|---|---|"
    )
    reference = None
    with tempfile.TemporaryDirectory() as cache:
        for backend in BACKENDS:
            # the onnx backend's first load builds its graph: load it once before timing
            if backend == "onnx":
                query_latency(backend, 1, Path(cache))
            q = query_latency(backend, args.queries, Path(cache))
            if reference is None:
                reference = q["vectors"]
            cos = float((q["vectors"] * reference).sum(axis=1).min())
            print(
                f"| {backend} | {q['load_s']:.2f} | {q['p50_ms']:.2f} | {q['p99_ms']:.2f} | "
                f"{q['batch_ms_per_doc']:.2f} | {cos:.5f} |",
                flush=True,
            )
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
