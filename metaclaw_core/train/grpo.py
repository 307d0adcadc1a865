"""GRPO over the query buffer: groups, group-relative advantages, datums, one training step.

For each prompt taken from the query buffer the trainer samples G completions from the current
policy and scores each. Advantages are the rewards centred *within the group* (optionally
divided by its standard deviation); a group whose rewards do not vary carries no signal and
is dropped (upstream MetaClaw normalised over a whole batch of single samples, so a uniform
batch trained on nothing and a mixed one trained on noise). The kept samples become datums
laid out as Tinker expects; ``forward_backward`` and ``optim_step`` are submitted back to back
and awaited together.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.config import TrainSettings
from metaclaw_core.models import Trajectory
from metaclaw_core.train.backend import (
    AdamConfig,
    SampledCompletion,
    SamplingParams,
    TrainDatum,
    TrainingBackend,
)
from metaclaw_core.train.buffer import QueryBuffer
from metaclaw_core.train.checkpoints import CheckpointLog
from metaclaw_core.train.policy import PolicyServer
from metaclaw_core.train.rewards import RewardFn
from metaclaw_core.train.tokenize import chat_messages

log = logging.getLogger("metaclaw.train")

StepStatus = Literal["trained", "empty", "no-signal", "unscored", "stale"]


def centred_advantages(rewards: list[float], *, normalize: bool = False) -> list[float]:
    """Rewards minus the group mean (divided by the group's std when ``normalize``)."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    centred = [r - mean for r in rewards]
    if normalize:
        std = reward_std(rewards)
        if std > 0:
            centred = [c / std for c in centred]
    return centred


def reward_std(rewards: list[float]) -> float:
    if len(rewards) < 2:
        return 0.0
    mean = sum(rewards) / len(rewards)
    return math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))


def grpo_datum(prompt: list[int], completion: SampledCompletion, advantage: float) -> TrainDatum:
    """One datum in Tinker's layout (see :class:`TrainDatum`)."""
    sampled = list(completion.tokens)
    if not prompt or not sampled:
        raise ValueError("a GRPO datum needs a non-empty prompt and completion")
    if len(completion.logprobs) != len(sampled):
        raise ValueError(
            f"sampler returned {len(completion.logprobs)} logprobs for {len(sampled)} tokens"
        )
    pad = len(prompt) - 1
    return TrainDatum(
        model_input=[*prompt, *sampled[:-1]],
        target_tokens=[0] * pad + sampled,
        logprobs=[0.0] * pad + [float(x) for x in completion.logprobs],
        advantages=[0.0] * pad + [float(advantage)] * len(sampled),
    )


@dataclass
class GrpoGroup:
    """G completions of one prompt from the query buffer, with their rewards."""

    trajectory_id: str
    generation: int
    prompt: list[int]
    completions: list[SampledCompletion]
    texts: list[str]
    rewards: list[float | None]

    @property
    def scored(self) -> list[tuple[SampledCompletion, float]]:
        return [
            (c, r)
            for c, r in zip(self.completions, self.rewards, strict=True)
            if r is not None and c.tokens
        ]

    def spread(self) -> float:
        return reward_std([r for _, r in self.scored])

    def has_signal(self, min_std: float) -> bool:
        return len(self.scored) >= 2 and self.spread() > min_std

    def datums(self, *, normalize: bool = False) -> list[TrainDatum]:
        scored = self.scored
        advantages = centred_advantages([r for _, r in scored], normalize=normalize)
        return [
            grpo_datum(self.prompt, c, a)
            for (c, _), a in zip(scored, advantages, strict=True)
            if a != 0.0
        ]


@dataclass
class StepReport:
    """What one GRPO step did."""

    step: int
    status: StepStatus
    generation: int
    prompts: int = 0
    groups_kept: int = 0
    groups_dropped: int = 0
    datums: int = 0
    mean_reward: float | None = None
    rewards: list[float] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    checkpoint: str | None = None
    published: str | None = None


class GrpoTrainer:
    """Runs GRPO steps for one backend; checkpoints every k steps, resumes from the last.

    Args:
        backend: the training backend (started by :meth:`resume`).
        buffer: the query buffer prompts come from.
        reward: scores one sampled completion of a buffer trajectory.
        settings: ``train`` settings (group size, lengths, optimiser, cadences).
        checkpoints: where checkpoints and published samplers are recorded.
        policy: the serving policy to publish new weights to (None: do not publish).
    """

    def __init__(
        self,
        backend: TrainingBackend,
        buffer: QueryBuffer,
        reward: RewardFn,
        settings: TrainSettings,
        *,
        checkpoints: CheckpointLog,
        policy: PolicyServer | None = None,
        on_step: Callable[[StepReport], None] | None = None,
    ) -> None:
        self.backend = backend
        self.buffer = buffer
        self.reward = reward
        self.settings = settings
        self.checkpoints = checkpoints
        self.policy = policy
        self.on_step = on_step
        self.step_count = 0
        self._last_checkpoint_step = 0
        self._last_publish_step = -1
        self._checkpoint_due = False
        self._publish_due = False
        self._started = False
        self._lock = threading.Lock()
        # Prompts whose samples nothing could score, by generation: kept in the buffer (a
        # scorer may come later, e.g. after a restart with the judge on) but not taken again
        # by this trainer, so unscorable old prompts cannot block the newer ones for good.
        self._unscored: tuple[int, set[str]] = (-1, set())

    @property
    def agent(self) -> str:
        """Whose LoRA this trains: its buffer's agent."""
        return str(getattr(self.buffer, "agent", DEFAULT_AGENT))

    @property
    def _prefix(self) -> str:
        # another agent's checkpoints get their own names (the default's keep theirs)
        return "" if self.agent == DEFAULT_AGENT else f"agent-{self.agent}-"

    # -- lifecycle -----------------------------------------------------------------------
    def resume(self) -> int:
        """Start the backend from the newest checkpoint (if any); return the step reached."""
        with self._lock:
            if self._started:
                return self.step_count
            last = self.checkpoints.latest(
                backend=self.backend.name,
                model=self.backend.model_name,
                kind="state",
                agent=self.agent,
            )
            self.backend.start(resume_from=last.path if last else None)
            self.step_count = last.step if last else 0
            self._last_checkpoint_step = self.step_count
            self._started = True
            if last is not None:
                log.info(
                    "metaclaw: resumed %s at step %d from %s",
                    self.backend.name,
                    last.step,
                    last.path,
                )
            if self.policy is not None:
                self._publish()
            return self.step_count

    def adam(self) -> AdamConfig:
        s = self.settings
        return AdamConfig(
            learning_rate=s.learning_rate,
            beta1=s.adam_beta1,
            beta2=s.adam_beta2,
            eps=s.adam_eps,
            weight_decay=s.weight_decay,
            grad_clip_norm=s.grad_clip_norm,
        )

    def sampling_params(self) -> SamplingParams:
        s = self.settings
        return SamplingParams(
            max_tokens=s.max_new_tokens, temperature=s.temperature, top_p=s.top_p, seed=s.seed
        )

    # -- one step ------------------------------------------------------------------------
    def sample_group(self, trajectory: Trajectory) -> GrpoGroup | None:
        """G completions of one buffer trajectory's prompt, scored."""
        tok = self.backend.tokenizer
        prompt = tok.encode_chat(chat_messages(trajectory.messages))
        if not prompt:
            return None
        prompt = prompt[-self.settings.max_prompt_tokens :]
        sampler = self.backend.training_sampler()
        completions = sampler.sample(prompt, self.settings.group_size, self.sampling_params())
        texts = [tok.decode(c.tokens) for c in completions]
        rewards = [self.reward(trajectory, t) for t in texts]
        return GrpoGroup(
            trajectory_id=trajectory.id,
            generation=trajectory.generation,
            prompt=prompt,
            completions=completions,
            texts=texts,
            rewards=rewards,
        )

    def step(self) -> StepReport:
        """Take prompts, sample and score groups, train on the groups with signal."""
        self.resume()
        with self._lock:
            report = self._step()
        if self.on_step is not None:
            self.on_step(report)
        return report

    def _step(self) -> StepReport:
        started = time.perf_counter()
        s = self.settings
        generation = self.buffer.generation()
        if self._unscored[0] != generation:
            self._unscored = (generation, set())
        batch = self.buffer.take(s.prompts_per_step, skip=self._unscored[1])
        report = StepReport(step=self.step_count, status="empty", generation=generation)
        if not batch:
            return report
        groups = [g for g in (self.sample_group(t) for t in batch) if g is not None]
        report.prompts = len(batch)
        report.rewards = [r for g in groups for r in g.rewards if r is not None]
        if report.rewards:
            report.mean_reward = sum(report.rewards) / len(report.rewards)
        if groups and not report.rewards:
            # Nothing could score these samples: keep the prompts for when something can,
            # and take the next ones on the following step.
            self._unscored[1].update(t.id for t in batch)
            report.status = "unscored"
            report.seconds = time.perf_counter() - started
            log.warning(
                "metaclaw: no reward for any GRPO sample; register a metaclaw_score_trajectory "
                "plugin (the judge or a verifiable check) or pass reward= to the trainer"
            )
            return report
        if self.buffer.generation() != generation:
            # The library changed while we sampled: these prompts are support data now.
            report.status = "stale"
            report.seconds = time.perf_counter() - started
            return report
        kept = [g for g in groups if g.has_signal(s.min_group_std)]
        report.groups_kept = len(kept)
        report.groups_dropped = len(groups) - len(kept)
        data = [d for g in kept for d in g.datums(normalize=s.normalize_advantages)]
        report.datums = len(data)
        if data:
            fwd_bwd = self.backend.forward_backward(data, s.loss_fn)
            optim = self.backend.optim_step(self.adam())  # submitted before waiting
            report.metrics = {**fwd_bwd.result().values, **optim.result().values}
            self.step_count += 1
            report.step = self.step_count
            report.status = "trained"
        else:
            report.status = "no-signal"
        # The optimizer step has consumed these prompts: record that before saving or
        # publishing, which can fail (a failure there must not train on them twice).
        self.buffer.mark_consumed(batch, step=self.step_count, backend=self.backend.name)
        if data:
            # a checkpoint or a publish that failed is tried again after the next step
            if self._checkpoint_due or self.step_count % s.checkpoint_every == 0:
                self._checkpoint_due = True
                report.checkpoint = self._checkpoint(report.mean_reward)
                self._checkpoint_due = False
            if self.policy is not None and (
                self._publish_due or self.step_count % s.publish_every == 0
            ):
                self._publish_due = True
                report.published = self._publish(report.mean_reward)
                self._publish_due = False
        report.seconds = time.perf_counter() - started
        log.info(
            "metaclaw: GRPO step %d %s: %d prompts, %d/%d groups kept, mean reward %s (%.1fs)",
            report.step,
            report.status,
            report.prompts,
            report.groups_kept,
            len(groups),
            "-" if report.mean_reward is None else f"{report.mean_reward:+.3f}",
            report.seconds,
        )
        return report

    # -- checkpoints and publishing ------------------------------------------------------
    def checkpoint(self) -> str | None:
        """Save a resumable checkpoint if anything was trained since the last one."""
        with self._lock:
            if not self._started or self.step_count == self._last_checkpoint_step:
                return None
            return self._checkpoint(None)

    def _checkpoint(self, reward: float | None) -> str:
        name = f"{self._prefix}step-{self.step_count:06d}"
        path = self.backend.save_state(name)
        self.checkpoints.record(
            backend=self.backend.name,
            model=self.backend.model_name,
            kind="state",
            name=name,
            path=path,
            step=self.step_count,
            generation=self.buffer.generation(),
            reward=reward,
            agent=self.agent,
        )
        self._last_checkpoint_step = self.step_count
        return path

    def _publish(self, reward: float | None = None) -> str | None:
        if self.policy is None or self._last_publish_step == self.step_count:
            return None
        name = (
            f"{self._prefix}sampler-{self.step_count:06d}"
            if self.step_count
            else f"{self._prefix}sampler-base"
        )
        sampler, path = self.backend.publish(name)
        if self.policy.tokenizer is None:
            self.policy.tokenizer = self.backend.tokenizer
        self.policy.publish(sampler)
        self.checkpoints.record(
            backend=self.backend.name,
            model=self.backend.model_name,
            kind="sampler",
            name=name,
            path=path,
            step=self.step_count,
            generation=self.buffer.generation(),
            reward=reward,
            agent=self.agent,
        )
        self._last_publish_step = self.step_count
        return path

    def close(self) -> None:
        """Checkpoint what is unsaved and release the backend."""
        try:
            self.checkpoint()
        finally:
            self.backend.close()
