"""GRPO: group-relative advantages, dropped zero-variance groups, datum layout, the step,
checkpoints every k steps and resume from the last one."""

from __future__ import annotations

from typing import Any

import pytest

from metaclaw_core import Reward, Trajectory, hookimpl
from metaclaw_core.train import (
    CheckpointLog,
    GrpoGroup,
    GrpoTrainer,
    QueryBuffer,
    SampledCompletion,
    centred_advantages,
    grpo_datum,
    hook_reward,
)
from metaclaw_core.train.policy import PolicyServer
from metaclaw_core.train.rewards import iso_timestamp_reward
from tests.slowloop.conftest import FakeBackend, answer_index_reward, capture_calls, train_settings


def test_advantages_are_centred_within_the_group() -> None:
    assert centred_advantages([1.0, 0.0, 1.0, 0.0]) == [0.5, -0.5, 0.5, -0.5]
    assert centred_advantages([2.0, 4.0], normalize=True) == [-1.0, 1.0]
    assert centred_advantages([0.3, 0.3, 0.3]) == [0.0, 0.0, 0.0]


def test_datum_layout_matches_tinker_recipe() -> None:
    prompt = [11, 12, 13]
    c = SampledCompletion(tokens=[21, 22], logprobs=[-0.1, -0.2])
    d = grpo_datum(prompt, c, 0.5)
    assert d.model_input == [11, 12, 13, 21]  # prompt + sampled[:-1]
    assert d.target_tokens == [0, 0, 21, 22]  # [0]*(P-1) + sampled
    assert d.logprobs == [0.0, 0.0, -0.1, -0.2]
    assert d.advantages == [0.0, 0.0, 0.5, 0.5]


def _group(rewards: list[float | None]) -> GrpoGroup:
    comps = [SampledCompletion([1, 2], [-1.0, -1.0]) for _ in rewards]
    return GrpoGroup("t", 0, [5, 6], comps, ["x"] * len(rewards), rewards)


def test_zero_variance_groups_carry_no_signal() -> None:
    assert not _group([1.0, 1.0, 1.0, 1.0]).has_signal(1e-6)
    assert not _group([1.0, None, None, None]).has_signal(1e-6)  # one scored sample
    mixed = _group([1.0, 0.0, None, 1.0])
    assert mixed.has_signal(1e-6)
    assert len(mixed.datums()) == 3  # the unscored sample is left out


def _trainer(engine: Any, backend: FakeBackend, **kw: Any) -> GrpoTrainer:
    settings = train_settings(engine.settings, **kw.pop("settings", {}))
    return GrpoTrainer(
        backend,
        QueryBuffer(engine.store, engine.library.current_generation),
        kw.pop("reward", answer_index_reward),
        settings.train,
        checkpoints=CheckpointLog(engine.store),
        **kw,
    )


def test_a_step_trains_on_groups_and_submits_optim_before_waiting(
    make_engine: Any, settings: Any
) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["task one", "task two", "task three"])
    backend = FakeBackend(step_delay_s=0.05)
    trainer = _trainer(engine, backend)
    report = trainer.step()
    assert report.status == "trained" and report.step == 1
    assert (report.prompts, report.groups_kept, report.datums) == (2, 2, 8)
    # forward_backward and optim_step are submitted back to back, results awaited after.
    assert backend.events[1:5] == ["fwd_bwd:submit", "optim:submit", "fwd_bwd:done", "optim:done"]
    batch = backend.batches[0]
    for d in batch:
        sampled = [a for a in d.advantages if a != 0.0]
        assert sampled and all(a in (0.5, -0.5) for a in sampled)
    # The two prompts trained on left the buffer; the third is still there.
    assert trainer.buffer.sizes().query == 1
    assert trainer.buffer.sizes().consumed == 2


def test_uniform_rewards_train_nothing_but_consume_the_prompts(
    make_engine: Any, settings: Any
) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["a", "b"])
    backend = FakeBackend()
    trainer = _trainer(engine, backend, reward=lambda t, text: 1.0)
    report = trainer.step()
    assert report.status == "no-signal" and report.groups_dropped == 2
    assert backend.batches == [] and trainer.step_count == 0
    assert trainer.buffer.sizes().query == 0


def test_no_reward_source_keeps_the_prompts(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["a"])
    trainer = _trainer(engine, FakeBackend(), reward=hook_reward(engine.hook, engine.settings))
    assert trainer.step().status == "unscored"
    assert trainer.buffer.sizes().query == 1


def test_unscorable_old_prompts_do_not_block_newer_ones(make_engine: Any, settings: Any) -> None:
    """A verifiable check scores some prompts only (the bench's scores multiple-choice answers,
    not tool-call steps): the two oldest come back unscored, stay in the buffer, and the next
    step takes the newer prompt instead of the same two again."""
    engine = make_engine(settings)
    capture_calls(engine, ["a tool step", "a file round", "1 question"])

    def only_questions(prompt: Trajectory, text: str) -> float | None:
        users = [m.content for m in prompt.messages if m.role == "user"]
        return answer_index_reward(prompt, text) if "question" in users[-1] else None

    backend = FakeBackend()
    trainer = _trainer(engine, backend, reward=only_questions)
    first = trainer.step()
    assert first.status == "unscored" and first.prompts == 2
    second = trainer.step()
    assert second.status == "trained" and second.prompts == 1
    assert trainer.step().status == "empty"  # nothing new: the unscored two are not retried
    assert trainer.buffer.sizes().query == 2  # ... but kept for a scorer that may come later
    fresh = _trainer(engine, FakeBackend(), reward=only_questions)  # e.g. after a restart
    assert fresh.step().prompts == 2


def test_rewards_come_from_the_score_hook(make_engine: Any, settings: Any) -> None:
    class Judge:
        def __init__(self) -> None:
            self.seen: list[Trajectory] = []

        @hookimpl
        def metaclaw_score_trajectory(self, trajectory: Trajectory, settings: Any) -> Reward:
            self.seen.append(trajectory)
            good = " 1 " in f" {trajectory.output.text} "
            return Reward(trajectory_id=trajectory.id, value=1.0 if good else -1.0, source="judge")

    judge = Judge()
    engine = make_engine(settings, plugins=[judge])
    [tid] = capture_calls(engine, ["score me"])
    trainer = _trainer(engine, FakeBackend(), reward=hook_reward(engine.hook, engine.settings))
    report = trainer.step()
    assert report.status == "trained"
    assert sorted(report.rewards) == [-1.0, -1.0, -1.0, 1.0]
    grpo = [t for t in judge.seen if "grpo_of" in t.metadata]  # the engine may score captures too
    assert len(grpo) == 4
    assert all(t.metadata["grpo_of"] == tid and t.generation == 0 for t in grpo)


def test_checkpoints_every_k_steps_and_resumes_from_the_last(
    make_engine: Any, settings: Any
) -> None:
    engine = make_engine(settings)
    capture_calls(engine, [f"task {i}" for i in range(10)])
    backend = FakeBackend()
    trainer = _trainer(engine, backend, settings={"checkpoint_every": 2})
    for _ in range(3):
        assert trainer.step().status == "trained"
    saves = [e for e in backend.events if e.startswith("save:")]
    assert saves == ["save:step-000002"]
    assert trainer.checkpoint() == "fake://step-000003"  # on pause: what is unsaved
    assert trainer.checkpoint() is None  # nothing new since
    # A new process: a fresh backend object sharing the saved states.
    again = FakeBackend(saved=backend.saved)
    resumed = _trainer(engine, again)
    assert resumed.resume() == 3
    assert again.resumed_from == "fake://step-000003" and again.steps == 3
    assert resumed.step().step == 4


def test_a_step_publishes_new_weights_to_the_policy(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["a", "b"])
    backend = FakeBackend()
    policy = PolicyServer()
    trainer = _trainer(engine, backend, policy=policy)
    trainer.resume()
    assert policy.current().label == "sampler-base"
    base = policy.current()
    report = trainer.step()
    assert report.published == "fake://sampler-000001"
    assert policy.current().label == "sampler-000001" and policy.current().version == 2
    assert base.closed  # no request held it
    published = [c.name for c in CheckpointLog(engine.store).history(kind="sampler")]
    assert published == ["sampler-base", "sampler-000001"]


def test_a_failed_publish_does_not_train_on_the_prompts_twice_and_is_tried_again(
    make_engine: Any, settings: Any
) -> None:
    class FlakyPublish(FakeBackend):
        fails = 1

        def publish(self, name: str) -> Any:
            if self.fails and name != "sampler-base":
                self.fails -= 1
                raise RuntimeError("sampler service unavailable")
            return super().publish(name)

    engine = make_engine(settings)
    capture_calls(engine, ["a", "b"])
    backend = FlakyPublish()
    policy = PolicyServer()
    trainer = _trainer(engine, backend, policy=policy)
    trainer.resume()
    with pytest.raises(RuntimeError, match="unavailable"):
        trainer.step()
    # the optimizer step happened: its prompts are consumed, not left to be trained on again
    assert trainer.step_count == 1
    assert trainer.buffer.sizes().query == 0 and trainer.buffer.sizes().consumed == 2
    assert policy.current().label == "sampler-base"
    capture_calls(engine, ["c", "d"])
    report = trainer.step()
    assert report.status == "trained" and report.step == 2
    assert report.published == "fake://sampler-000002"
    assert policy.current().label == "sampler-000002"
    assert len(backend.batches) == 2  # each prompt trained on once


def test_samples_of_an_old_generation_are_not_trained_on(make_engine: Any, settings: Any) -> None:
    engine = make_engine(settings)
    capture_calls(engine, ["a", "b"])
    backend = FakeBackend()

    def reward_that_changes_the_library(prompt: Trajectory, text: str) -> float:
        if not engine.library.live():
            engine.add_skills(
                __import__("metaclaw_core").Skill(name="new-rule", description="d", body="b")
            )
        return answer_index_reward(prompt, text)

    trainer = _trainer(engine, backend, reward=reward_that_changes_the_library)
    assert trainer.step().status == "stale"
    assert backend.batches == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The time is 2026-03-03T09:30:00+08:00.", 1.0),
        ("2026-03-03 09:30", 0.0),
        ("no idea", -1.0),
    ],
)
def test_iso_timestamp_check(text: str, expected: float) -> None:
    assert iso_timestamp_reward()(None, text) == expected
