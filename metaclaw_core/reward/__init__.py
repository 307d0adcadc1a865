"""Reward sources: the PRM judge, verifiable checks; explicit feedback is ``MetaClaw.feedback``."""

from metaclaw_core.reward.checks import CallableCheck, CommandCheck
from metaclaw_core.reward.judge import JudgeVote, Judgment, PRMJudge, majority_vote, parse_vote

__all__ = [
    "CallableCheck",
    "CommandCheck",
    "JudgeVote",
    "Judgment",
    "PRMJudge",
    "majority_vote",
    "parse_vote",
]
