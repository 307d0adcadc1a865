"""``full`` mode's model: the slow loop's policy, served on loopback, trained between days.

The agent talks to the trained policy exactly as ``metaclaw serve`` clients do (the
OpenAI-compatible :func:`metaclaw_core.train.serving.policy_app`), on an ephemeral
127.0.0.1 port. GRPO samples are scored by :class:`BenchCheck`: a multiple-choice round's
question in the prompt → the paper's score of the sample's ``\\bbox{…}``; anything else has
no verifiable score here (None: the judge or other checks may score it).
"""

from __future__ import annotations

from metaclaw_core.bench.scoring import score_multi_choice
from metaclaw_core.bench.suite import Round, Suite
from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Reward, Trajectory


class BenchCheck:
    """A verifiable check for samples of the suite's multiple-choice rounds."""

    def __init__(self, suite: Suite) -> None:
        self.rounds: list[Round] = [
            r for d in suite.days for r in d.rounds if r.type == "multi_choice"
        ]

    def round_of(self, trajectory: Trajectory) -> Round | None:
        users = [m for m in trajectory.messages if m.role == "user"]
        text = users[-1].content if users else ""
        return next((r for r in self.rounds if r.question in text), None)

    @hookimpl
    def metaclaw_score_trajectory(
        self, trajectory: Trajectory, settings: Settings
    ) -> Reward | None:
        if trajectory.output.tool_calls:
            return None  # a step on the way, not the answer
        rnd = self.round_of(trajectory)
        if rnd is None:
            return None
        score = score_multi_choice(rnd, trajectory.output.text)
        return Reward(
            trajectory_id=trajectory.id,
            value=round(2.0 * score.score - 1.0, 6),
            source="check",
            detail=f"bench {rnd.id}: {score.detail}",
        )


class ReplayCheck(BenchCheck):
    """The same check for replay validation only (``metadata.replay_of``): with
    ``bench run --validate`` a candidate's replays are scored by the suite, while live calls
    keep the reward the run gives them (the round's score)."""

    @hookimpl
    def metaclaw_score_trajectory(
        self, trajectory: Trajectory, settings: Settings
    ) -> Reward | None:
        if "replay_of" not in trajectory.metadata:
            return None
        return super().metaclaw_score_trajectory(trajectory, settings)
