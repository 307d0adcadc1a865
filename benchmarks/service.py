"""Service benchmark: what `metaclaw serve` adds to an LLM call, in one run.

Run: .venv/bin/python benchmarks/service.py [--calls 300] [--streams 40]

A scripted OpenAI-compatible upstream (tests/support/scripted_openai.py, answering at once)
runs in this process; a real `metaclaw serve` subprocess proxies to it with 50 live skills.
The same keep-alive httpx client calls the upstream directly and through the proxy,
alternating, so both see the same machine load. Measured:

* non-streamed completions: latency p50/p99, direct vs proxied (cached query embedding,
  the steady state of a conversation) and proxied with a new query every call (one MiniLM
  embedding on a worker thread);
* streamed completions (10 chunks, 20 ms apart upstream): time to the first content chunk
  and to the last, direct vs proxied;
* ``POST /v1/inject`` alone (what the OpenClaw plugin waits for), cached and new queries;
* the coding-agent routes, in a second `metaclaw serve` pointed at a scripted Anthropic and a
  scripted Responses upstream (tests/support/scripted_anthropic.py, scripted_responses.py):
  ``/v1/messages`` (Claude Code) and ``/v1/responses`` (Codex), whole answers and streams
  (time to the first text delta and to the last event), direct vs proxied, same client.

Prints two markdown tables; paste them into docs/benchmarks.md ("## Service").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.scripted_anthropic import ScriptedAnthropic  # noqa: E402
from tests.support.scripted_http import ScriptedReply  # noqa: E402
from tests.support.scripted_openai import Reply, ScriptedOpenAI  # noqa: E402
from tests.support.scripted_responses import ScriptedResponses  # noqa: E402

SYSTEM = "You are a careful assistant for a travel agency. Answer briefly. " * 60  # ~4 KB
QUESTION = "Plan a three-day trip to Kyoto in autumn for two people"
TOPICS = ["trip planning", "SQL migrations", "unit conversion", "email drafting", "CI failures"]


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, p))


def start_service(home: Path, upstream: str, **extra_env: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METACLAW_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", METACLAW_HOME=str(home))
    env.update(extra_env)
    exe = Path(sys.executable).with_name("metaclaw")
    proc = subprocess.Popen(
        [str(exe), "serve", "--port", "0", "--upstream", upstream],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if m := re.search(r"serving on (http://\S+)", line):
            return proc, m.group(1)
    raise SystemExit("metaclaw serve did not start")


def seed(api: httpx.Client) -> None:
    skills = [
        {
            "name": f"rule-{i}",
            "description": f"How to handle {TOPICS[i % len(TOPICS)]}, case {i}",
            "body": f"Rule {i}: check the inputs, state assumptions, answer in short steps.",
        }
        for i in range(50)
    ]
    assert api.post("/v1/skills", json={"skills": skills}).status_code == 201
    while not api.get("/healthz").json()["ready"]:
        time.sleep(0.1)


def body(question: str, stream: bool = False) -> dict[str, object]:
    b: dict[str, object] = {
        "model": "scripted-model",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
    }
    if stream:
        b |= {"stream": True, "stream_options": {"include_usage": True}}
    return b


def timed(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def _chat_delta(line: str) -> bool:
    return '"content": "' in line and '"content": ""' not in line


def stream_times(
    client: httpx.Client,
    url: str,
    payload: dict[str, object],
    is_first: Callable[[str], bool] = _chat_delta,
) -> tuple[float, float]:
    t0 = time.perf_counter()
    first = None
    with client.stream("POST", url, json=payload) as r:
        for line in r.iter_lines():
            if first is None and is_first(line):
                first = time.perf_counter() - t0
    return first or float("nan"), time.perf_counter() - t0


def messages_body(stream: bool = False) -> dict[str, object]:
    """Claude Code's shape: system blocks with a cache breakpoint."""
    return {
        "model": "claude-scripted",
        "max_tokens": 200,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
        "stream": stream,
    }


def responses_body(stream: bool = False) -> dict[str, object]:
    """Codex's shape: the prompt as a leading developer item, no instructions."""
    return {
        "model": "scripted-model",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": SYSTEM}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": QUESTION}],
            },
        ],
        "stream": stream,
        "store": False,
    }


def agent_routes(calls: int, streams: int) -> dict[str, dict[str, list[float]]]:
    """/v1/messages and /v1/responses, direct vs proxied, in a second `metaclaw serve`."""
    answer = ScriptedReply("Day 1: Higashiyama. Day 2: Arashiyama. Day 3: Fushimi Inari.")
    spaced = ScriptedReply(" ".join(f"w{i}" for i in range(10)), chunk_delay_s=0.02)
    out: dict[str, dict[str, list[float]]] = {}
    with (
        ScriptedAnthropic() as anthropic_up,
        ScriptedResponses() as responses_up,
        tempfile.TemporaryDirectory() as tmp,
    ):
        proc, url = start_service(
            Path(tmp) / "home",
            responses_up.base_url,
            METACLAW_PROXY__ANTHROPIC_BASE_URL=anthropic_up.url,
        )
        try:
            with httpx.Client(timeout=60) as c, httpx.Client(base_url=url, timeout=60) as api:
                seed(api)
                routes = {
                    "messages": (
                        anthropic_up,
                        f"{anthropic_up.url}/v1/messages",
                        f"{url}/v1/messages",
                        messages_body,
                        lambda line: '"text_delta"' in line,
                    ),
                    "responses": (
                        responses_up,
                        f"{responses_up.base_url}/responses",
                        f"{url}/v1/responses",
                        responses_body,
                        lambda line: '"response.output_text.delta"' in line,
                    ),
                }
                for name, (up, direct, proxied, make, is_first) in routes.items():
                    up.default = answer
                    rows: dict[str, list[float]] = {
                        k: [] for k in ("direct", "proxy", "first_direct", "first_proxy")
                    }
                    rows |= {"last_direct": [], "last_proxy": []}
                    for _ in range(30):
                        c.post(direct, json=make())
                        c.post(proxied, json=make())
                    for _ in range(calls):
                        rows["direct"].append(timed(lambda: c.post(direct, json=make())))  # noqa: B023
                        rows["proxy"].append(timed(lambda: c.post(proxied, json=make())))  # noqa: B023
                    assert "<metaclaw-skills>" in up.posts()[-1].body.decode(), "no injection?"
                    up.default = spaced
                    for _ in range(streams):
                        for where, target in (("direct", direct), ("proxy", proxied)):
                            f, last = stream_times(c, target, make(stream=True), is_first)
                            rows[f"first_{where}"].append(f)
                            rows[f"last_{where}"].append(last)
                    out[name] = rows
        finally:
            proc.terminate()
            proc.wait(30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--streams", type=int, default=40)
    args = ap.parse_args()

    answer = Reply("Day 1: Higashiyama. Day 2: Arashiyama. Day 3: Fushimi Inari.")
    with ScriptedOpenAI(default=answer) as upstream, tempfile.TemporaryDirectory() as tmp:
        proc, url = start_service(Path(tmp) / "home", upstream.base_url)
        try:
            with httpx.Client(timeout=60) as c, httpx.Client(base_url=url, timeout=60) as api:
                seed(api)
                direct = f"{upstream.base_url}/chat/completions"
                proxied = f"{url}/v1/chat/completions"
                for _ in range(30):  # warm both paths (connections, caches)
                    c.post(direct, json=body(QUESTION))
                    c.post(proxied, json=body(QUESTION))
                rows: dict[str, list[float]] = {
                    "direct": [],
                    "proxy": [],
                    "proxy_new": [],
                    "inject": [],
                    "inject_new": [],
                }
                for i in range(args.calls):
                    rows["direct"].append(timed(lambda: c.post(direct, json=body(QUESTION))))
                    rows["proxy"].append(timed(lambda: c.post(proxied, json=body(QUESTION))))
                    fresh = f"{QUESTION} (variant {i}-{time.time_ns()})"
                    new_body, new_task = body(fresh), {"task": fresh + " again"}
                    rows["proxy_new"].append(timed(lambda: c.post(proxied, json=new_body)))  # noqa: B023
                    rows["inject"].append(
                        timed(lambda: api.post("/v1/inject", json={"task": QUESTION}))
                    )
                    rows["inject_new"].append(
                        timed(lambda: api.post("/v1/inject", json=new_task))  # noqa: B023
                    )
                sent = upstream.chat_requests()[-2].json
                assert "<metaclaw-skills>" in sent["messages"][0]["content"], "no injection?"

                upstream.default = Reply(" ".join(f"w{i}" for i in range(10)), chunk_delay_s=0.02)
                firsts: dict[str, list[float]] = {"direct": [], "proxy": []}
                lasts: dict[str, list[float]] = {"direct": [], "proxy": []}
                for _ in range(args.streams):
                    for name, target in (("direct", direct), ("proxy", proxied)):
                        f, last = stream_times(c, target, body(QUESTION, stream=True))
                        firsts[name].append(f)
                        lasts[name].append(last)
                status = api.get("/v1/status").json()
        finally:
            proc.terminate()
            proc.wait(30)

    def line(label: str, xs: list[float], base: list[float] | None = None) -> str:
        extra = ""
        if base is not None:
            extra = f" | +{pct(xs, 50) - pct(base, 50):.2f} / +{pct(xs, 99) - pct(base, 99):.2f}"
        else:
            extra = " | "
        return f"| {label} | {pct(xs, 50):.2f} | {pct(xs, 99):.2f}{extra} |"

    print(
        f"Service benchmark, {date.today().isoformat()}, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{args.calls} calls per row, {args.streams} streams; "
        f"{status['engine']['live_skills']} live skills, {len(SYSTEM) / 1000:.1f} KB system prompt."
    )
    print()
    print("| what (ms) | p50 | p99 | added by the proxy p50 / p99 |")
    print("|---|---|---|---|")
    print(line("completion, direct to upstream", rows["direct"]))
    print(line("completion via proxy, repeated query", rows["proxy"], rows["direct"]))
    print(line("completion via proxy, new query each call", rows["proxy_new"], rows["direct"]))
    print(line("stream first chunk, direct", firsts["direct"]))
    print(line("stream first chunk via proxy", firsts["proxy"], firsts["direct"]))
    print(line("stream last chunk, direct (10 × 20 ms upstream)", lasts["direct"]))
    print(line("stream last chunk via proxy", lasts["proxy"], lasts["direct"]))
    print(line("POST /v1/inject, repeated query", rows["inject"]))
    print(line("POST /v1/inject, new query", rows["inject_new"]))
    print()
    agents = agent_routes(args.calls, args.streams)
    print("| route, what (ms) | p50 | p99 | added by the proxy p50 / p99 |")
    print("|---|---|---|---|")
    for name, label in (("messages", "/v1/messages"), ("responses", "/v1/responses")):
        r = agents[name]
        print(line(f"{label} answer, direct", r["direct"]))
        print(line(f"{label} answer via proxy", r["proxy"], r["direct"]))
        print(line(f"{label} stream first text, direct", r["first_direct"]))
        print(line(f"{label} stream first text via proxy", r["first_proxy"], r["first_direct"]))
        print(line(f"{label} stream last event, direct (10 × 20 ms)", r["last_direct"]))
        print(line(f"{label} stream last event via proxy", r["last_proxy"], r["last_direct"]))
    print()
    print(json.dumps({"injected": True, "generation": status["engine"]["generation"]}))


if __name__ == "__main__":
    main()
