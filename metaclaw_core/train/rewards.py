"""Reward functions for GRPO samples: the score hook (judge, checks) or any callable.

A reward function gets the buffer trajectory whose prompt was sampled and one sampled
completion's text, and returns a reward in [-1, 1] or None (could not score: the sample is
left out of its group rather than given a wrong score).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from metaclaw_core.config import Settings
from metaclaw_core.models import ModelOutput, Trajectory, new_id, utcnow

log = logging.getLogger("metaclaw.train")

RewardFn = Callable[[Trajectory, str], float | None]


def completion_trajectory(prompt: Trajectory, text: str) -> Trajectory:
    """A trajectory for a GRPO sample: the prompt's messages, this completion as the output.

    It carries the prompt's generation (the skills that were injected into those messages)
    and ``metadata.grpo_of`` = the prompt trajectory's id. It is never stored.
    """
    return prompt.model_copy(
        update={
            "id": new_id(),
            "created_at": utcnow(),
            "output": ModelOutput(text=text),
            "rewards": [],
            "error": None,
            "outcome": "unknown",
            "metadata": {**prompt.metadata, "grpo_of": prompt.id},
        }
    )


def hook_reward(hook: Any, settings: Settings) -> RewardFn:
    """Score through ``metaclaw_score_trajectory`` (the judge or verifiable checks plugin)."""

    def score(prompt: Trajectory, text: str) -> float | None:
        traj = completion_trajectory(prompt, text)
        try:
            reward = hook.metaclaw_score_trajectory(trajectory=traj, settings=settings)
        except Exception as exc:
            log.warning("metaclaw: scoring a GRPO sample failed: %s", exc)
            return None
        return None if reward is None else float(reward.value)

    return score


ISO_8601_OFFSET = re.compile(
    r"\b(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?([+-]\d{2}:\d{2}|Z)?"
)


def iso_timestamp_reward(offset: str = "+08:00") -> RewardFn:
    """A verifiable check: does the answer contain an ISO 8601 timestamp with ``offset``?

    Shaped so a small model gets a gradient before it is right: a quarter each for a date
    (YYYY-MM-DD), a time (HH:MM), the offset text, and all of it as one timestamp
    (``2026-03-03T09:30:00+08:00``); mapped to [-1, 1]. Used by the benchmark and as an
    example of a verifiable check.
    """

    def score(prompt: Trajectory | None, text: str) -> float | None:
        parts = [
            re.search(r"\b\d{4}-\d{2}-\d{2}", text) is not None,
            re.search(r"\b\d{2}:\d{2}", text) is not None,
            offset in text,
            any(m.group(7) == offset for m in ISO_8601_OFFSET.finditer(text)),
        ]
        return 2.0 * (sum(parts) / len(parts)) - 1.0

    return score
