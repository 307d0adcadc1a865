"""Built-in reward source: the verifiable check command of ``rewards.check_command``."""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Reward, Trajectory
from metaclaw_core.reward.checks import CommandCheck


@hookimpl
def metaclaw_score_trajectory(trajectory: Trajectory, settings: Settings) -> Reward | None:
    command = settings.rewards.check_command
    if not command:
        return None
    check = CommandCheck(command, timeout_s=settings.rewards.check_timeout_s)
    return check.score(trajectory)
