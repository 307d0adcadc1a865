"""Serving the trained policy: atomic weight swaps under load, through the real service app.

1,000 OpenAI-compatible requests (plain and streamed) go through `metaclaw serve`'s proxy
(uvicorn on 127.0.0.1) to the in-process policy while new weights are published ten times:
none fails, each answer comes entirely from one set of weights, and a retired sampler is
closed only after its last request.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Any

import httpx

from metaclaw_core.service import create_app
from metaclaw_core.train.policy import PolicyServer
from metaclaw_core.train.tokenize import ByteTokenizer
from tests.service.conftest import LiveServer
from tests.slowloop.conftest import FakeSampler

REQUESTS = 1000
SWAPS = 10
CONCURRENCY = 24


def test_handles_pin_weights_for_the_whole_request() -> None:
    policy = PolicyServer(ByteTokenizer())
    first = FakeSampler("v-a")
    policy.publish(first)
    with policy.lease() as held:
        second = FakeSampler("v-b")
        policy.publish(second)
        assert held.sampler is first and not first.closed  # still in use
        assert policy.current().sampler is second  # new requests get the new weights
    assert first.closed  # closed when its last request ended


async def _one(client: httpx.AsyncClient, i: int) -> tuple[int, str, str]:
    body: dict[str, Any] = {
        "model": "metaclaw-policy",
        "messages": [{"role": "user", "content": f"request {i}"}],
        "max_tokens": 40,
    }
    if i % 5 == 0:
        body["stream"] = True
        async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            raw = (await resp.aread()).decode()
            if resp.status_code != 200:
                return resp.status_code, raw, ""
        events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
        return 200, text, events[-1]["system_fingerprint"]
    resp = await client.post("/v1/chat/completions", json=body)
    if resp.status_code != 200:
        return resp.status_code, resp.text, ""
    data = resp.json()
    return 200, data["choices"][0]["message"]["content"], data["system_fingerprint"]


def test_thousand_proxy_requests_across_weight_swaps_none_fail(
    make_engine: Any, settings: Any
) -> None:
    settings.service.max_request_bytes = 1 << 20
    engine = make_engine(settings)
    policy = PolicyServer(ByteTokenizer())
    samplers = [FakeSampler("base", delay_s=0.002)]
    policy.publish(samplers[0])
    server = LiveServer(create_app(engine, settings, policy=policy)).start()
    done = Counter[str]()
    lock = threading.Lock()

    async def publisher() -> None:
        for n in range(SWAPS):
            while done["n"] < (n + 1) * REQUESTS // (SWAPS + 1):
                await asyncio.sleep(0.002)
            sampler = FakeSampler(f"step-{n + 1}", delay_s=0.002)
            samplers.append(sampler)
            policy.publish(sampler)

    async def main() -> list[tuple[int, str, str]]:
        limits = httpx.Limits(max_connections=CONCURRENCY)
        async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=limits) as client:
            sem = asyncio.Semaphore(CONCURRENCY)

            async def guarded(i: int) -> tuple[int, str, str]:
                async with sem:
                    out = await _one(client, i)
                with lock:
                    done["n"] += 1
                return out

            pub = asyncio.create_task(publisher())
            results = await asyncio.gather(*(guarded(i) for i in range(REQUESTS)))
            await pub
            return list(results)

    try:
        results = asyncio.run(main())
    finally:
        server.stop()
    failures = [r for r in results if r[0] != 200]
    assert failures == [], failures[:3]
    served = Counter()
    for _, text, fingerprint in results:
        label = fingerprint.split("@")[0]
        assert text == f"answer 0 from {label}"  # one answer, one set of weights
        served[label] += 1
    assert len(served) >= SWAPS  # requests really straddled the swaps
    assert sum(s.used_after_close for s in samplers) == 0
    assert all(s.closed for s in samplers[:-1])  # every retired sampler was released
    assert not samplers[-1].closed
    assert policy.publishes == SWAPS + 1
    assert engine.flush(30)
    assert engine.trajectories.count() == REQUESTS  # the proxy captured every call


def test_policy_not_ready_is_a_clear_503(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    server = LiveServer(create_app(engine, settings, policy=PolicyServer())).start()
    try:
        resp = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            timeout=10,
        )
    finally:
        server.stop()
    assert resp.status_code == 503
    assert "no weights yet" in resp.text
