"""The tinker backend with the real Tinker SDK (0.38) against a fake Tinker server on
127.0.0.1: a full GRPO step, a checkpoint, resume from it, and publishing to serving."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metaclaw_core.train import CheckpointLog, GrpoTrainer, QueryBuffer
from metaclaw_core.train.backend import SamplingParams
from metaclaw_core.train.policy import PolicyServer
from metaclaw_core.train.tinker_backend import TinkerBackend
from metaclaw_core.train.tokenize import ByteTokenizer
from tests.slowloop.conftest import capture_calls, train_settings
from tests.slowloop.fake_tinker import FakeTinkerServer

pytest.importorskip("tinker", reason="the tinker SDK is not installed (metaclaw-core[tinker])")


@pytest.fixture
def tinker_server() -> Iterator[FakeTinkerServer]:
    with FakeTinkerServer() as server:
        yield server


def _backend(server: FakeTinkerServer) -> TinkerBackend:
    return TinkerBackend(
        "Fake/Model-1B",
        lora_rank=8,
        tokenizer=ByteTokenizer(),
        base_url=server.base_url,
        api_key="tml-fake-key",
    )


def _trainer(engine: Any, backend: TinkerBackend, policy: PolicyServer | None) -> GrpoTrainer:
    settings = train_settings(engine.settings, checkpoint_every=1)

    def reward(prompt: Any, text: str) -> float:
        return 1.0 if text.endswith(("s0", "s2")) else 0.0  # the fake names each sample

    return GrpoTrainer(
        backend,
        QueryBuffer(engine.store, engine.library.current_generation),
        reward,
        settings.train,
        checkpoints=CheckpointLog(engine.store),
        policy=policy,
    )


def test_full_step_checkpoint_resume_and_publish(
    make_engine: Any, settings: Any, tinker_server: FakeTinkerServer
) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["plan the week", "summarise the log", "draft the reply"])
    policy = PolicyServer()
    backend = _backend(tinker_server)
    trainer = _trainer(engine, backend, policy)

    # Start: a LoRA training client on the base model; the base weights are published.
    assert trainer.resume() == 0
    assert policy.current().label == "sampler-base"
    msgs = [{"role": "user", "content": "hi"}]
    assert policy.complete(msgs, SamplingParams(max_tokens=16)).texts == ["w0 s0"]

    report = trainer.step()
    assert report.status == "trained", report
    assert (report.groups_kept, report.datums) == (2, 8)
    state = tinker_server.state
    [model] = state.models.values()
    assert model.rank == 8 and model.steps == 1
    [fwd] = model.fwd_bwd
    assert fwd["loss_fn"] == "importance_sampling" and not fwd["forward_only"]
    for d in fwd["data"]:
        n = len(d["model_input"])
        assert len(d["target_tokens"]) == len(d["logprobs"]) == len(d["advantages"]) == n
        sampled = [a for a in d["advantages"] if a != 0.0]
        assert sampled and set(sampled) <= {0.5, -0.5}
        assert d["logprobs"][-1] == -0.5  # the sampler's logprobs travel with the datum
    # forward_backward and optim_step went out back to back, before any result was polled.
    calls = state.calls
    i = calls.index("forward_backward")
    j = calls.index("optim_step", i)
    # The SDK may poll the forward_backward future once before optim_step goes out (timing);
    # the fake answers every first poll with try_again, so no result had arrived by then.
    assert calls[i + 1 : j].count("retrieve_future") <= 1, calls[i : j + 1]
    assert state.optim[0]["adam_params"]["learning_rate"] == engine.settings.train.learning_rate

    # Checkpoint (every step here) and publish: serving answers from the new weights.
    assert report.checkpoint == f"tinker://{model.model_id}/weights/step-000001"
    assert report.published == f"tinker://{model.model_id}/sampler_weights/sampler-000001"
    assert policy.current().label == "sampler-000001"
    assert policy.complete(msgs, SamplingParams(max_tokens=16)).texts == ["w1 s0"]
    backend.close()

    # Restart: a new backend resumes from the newest checkpoint with its optimiser state.
    policy2 = PolicyServer()
    backend2 = _backend(tinker_server)
    trainer2 = _trainer(engine, backend2, policy2)
    assert trainer2.resume() == 1
    assert "load_weights" in state.calls
    resumed = [m for m in state.models.values() if m is not model]
    assert [m.steps for m in resumed] == [1]
    assert policy2.complete(msgs, SamplingParams(max_tokens=16)).texts == ["w1 s0"]
    report2 = trainer2.step()
    assert report2.status == "trained" and report2.step == 2
    assert resumed[0].steps == 2
    assert policy2.complete(msgs, SamplingParams(max_tokens=16)).texts == ["w2 s0"]
    history = CheckpointLog(engine.store).history(backend="tinker", kind="state")
    assert [c.step for c in history] == [1, 2]
    backend2.close()


def test_a_missing_base_model_is_a_clear_error() -> None:
    from metaclaw_core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.base_model"):
        TinkerBackend("auto")
