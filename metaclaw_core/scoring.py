"""How a trajectory scores: the one rule the support set, the skill statistics and the
dashboard use.

* Its **reward** is the mean of the rewards it received (None when it has none).
* Its **score** is its reward, or :data:`ERROR_SCORE` (-1) when the host reported an error
  and nobody scored it; a trajectory without either is unscored (None) and does not count.
* It is a **failure** when the host reported an error or its reward is at most 0.
"""

from __future__ import annotations

from collections.abc import Iterable

ERROR_SCORE = -1.0


def mean_reward(values: Iterable[float]) -> float | None:
    """The mean of ``values``; None when there are none."""
    total, n = 0.0, 0
    for v in values:
        total += v
        n += 1
    return total / n if n else None


def trajectory_score(values: Iterable[float], error: str | None) -> float | None:
    """The reward, else :data:`ERROR_SCORE` for a host-reported error, else None."""
    reward = mean_reward(values)
    if reward is not None:
        return reward
    return ERROR_SCORE if error else None


def is_failure(values: Iterable[float], error: str | None) -> bool:
    """A host-reported error, or a reward of at most 0."""
    if error:
        return True
    reward = mean_reward(values)
    return reward is not None and reward <= 0
