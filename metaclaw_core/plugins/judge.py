"""Built-in reward source: the PRM judge (m LLM votes, majority), when ``judge.base_url`` is set.

It answers last (``trylast``): a verifiable check that applies to a trajectory wins over it.
"""

from __future__ import annotations

import random
import threading

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Reward, Trajectory
from metaclaw_core.reward.judge import PRMJudge

_JUDGES: dict[tuple[str, str | None], PRMJudge] = {}
_LOCK = threading.Lock()


def judge_for(settings: Settings) -> PRMJudge:
    """One judge (one HTTP client) per distinct judge configuration."""
    key = (settings.judge.model_dump_json(), settings.judge.resolved_api_key())
    with _LOCK:
        judge = _JUDGES.get(key)
        if judge is None:
            if len(_JUDGES) >= 16:
                _JUDGES.clear()
            judge = _JUDGES[key] = PRMJudge(settings.judge.model_copy())
        return judge


@hookimpl(trylast=True)
def metaclaw_score_trajectory(trajectory: Trajectory, settings: Settings) -> Reward | None:
    s = settings.judge
    if not (s.enabled and s.base_url):
        return None
    if s.sample_rate < 1.0 and random.random() >= s.sample_rate:
        return None
    return judge_for(settings).score(trajectory)
