"""The slow loop with several agents: one buffer and one LoRA per (agent, base model), steps
shared fairly between them, and each caller served its own agent's policy."""

from __future__ import annotations

from typing import Any

import httpx

from metaclaw_core import MetaClaw, hookimpl
from metaclaw_core.service import create_app
from metaclaw_core.train.checkpoints import CheckpointLog
from metaclaw_core.train.runtime import SlowLoop
from tests.service.conftest import LiveServer
from tests.slowloop.conftest import (
    FakeBackend,
    answer_index_reward,
    capture_calls,
    train_settings,
)
from tests.slowloop.test_scheduler import ManualSignal


class BackendPerLane:
    """A new fake backend for every lane, over the base model the lane's settings name."""

    def __init__(self) -> None:
        self.made: list[FakeBackend] = []

    @hookimpl
    def metaclaw_training_backend(self, settings: Any) -> FakeBackend | None:
        if settings.train.backend != "fake":
            return None
        backend = FakeBackend(model_name=settings.train.base_model)
        self.made.append(backend)
        return backend


def calls(engine: MetaClaw, agent: str, texts: list[str]) -> list[str]:
    return capture_calls(engine, texts, agent=agent)


def test_one_lora_per_agent_trained_fairly_and_served_per_agent(
    make_engine: Any, settings: Any
) -> None:
    plugin = BackendPerLane()
    train_settings(settings, backend="fake", base_model="base-1", checkpoint_every=100)
    settings.train.agents = ["busy", "quiet"]
    settings.train.agent_base_models = {"quiet": "base-2"}
    settings.train.prompts_per_step = 1
    settings.schedule.poll_interval_s = 0.01
    engine = make_engine(settings, plugins=[plugin])
    busy = calls(engine, "busy", [f"busy task {i}" for i in range(6)])
    quiet = calls(engine, "quiet", ["quiet task 0", "quiet task 1"])
    calls(engine, "untrained", ["someone else"])
    loop = SlowLoop(
        engine,
        reward=answer_index_reward,
        signals=[ManualSignal("user", "away"), ManualSignal("agent", "away")],
    )
    try:
        assert [(lane.agent, lane.base_model) for lane in loop.lanes] == [
            ("busy", "base-1"),
            ("quiet", "base-2"),
        ]
        assert [b.model_name for b in plugin.made] == ["base-1", "base-2"]
        stats = loop.run(max_steps=6)
        assert stats.steps == 6
        by_agent = {lane.agent: lane for lane in loop.lanes}
        # fair: while both had data they alternated; the busy agent then used the rest
        assert by_agent["quiet"].steps == 2 and by_agent["busy"].steps == 4
        b_busy, b_quiet = (by_agent[a].backend for a in ("busy", "quiet"))
        assert isinstance(b_busy, FakeBackend) and isinstance(b_quiet, FakeBackend)
        assert b_busy.steps == 4 and b_quiet.steps == 2  # each LoRA trained on its own data
        assert by_agent["busy"].buffer.sizes().consumed == 4
        assert by_agent["quiet"].buffer.sizes().consumed == 2
        assert set(by_agent["quiet"].buffer.query_ids()) == set()
        assert set(by_agent["busy"].buffer.query_ids()) <= set(busy[4:] + busy)
        assert not set(by_agent["busy"].buffer.query_ids()) & set(quiet)
        loop.fair.checkpoint()
        saved = CheckpointLog(engine.store).history(kind="state")
        assert {(c.agent, c.model) for c in saved} == {("busy", "base-1"), ("quiet", "base-2")}
        assert all(c.name.startswith(f"agent-{c.agent}-step-") for c in saved)
        # the proxy serves each caller its own agent's policy
        live = LiveServer(create_app(engine, settings, policies=loop.policies)).start()
        try:
            for agent in ("busy", "quiet"):
                r = httpx.post(
                    f"{live.url}/agents/{agent}/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64},
                    timeout=30,
                )
                assert r.status_code == 200, r.text
                weights = r.json()["system_fingerprint"]
                assert weights.startswith(f"agent-{agent}-sampler-"), weights
        finally:
            live.stop()
        # replay validation of an agent's candidates answers with that agent's policy
        from metaclaw_core.evolve.validation import serving_policy

        assert engine.serving_policies == loop.policies
        for agent in ("busy", "quiet"):
            assert serving_policy(engine, agent) is loop.policies[agent]
        assert serving_policy(engine, "untrained") is engine.serving_policy
    finally:
        loop.close()
    assert engine.serving_policies == {} and engine.serving_policy is None
