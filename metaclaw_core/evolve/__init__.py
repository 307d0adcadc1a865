"""The fast loop's learning: the support set, the skill evolver, vetting context, lifecycle."""

from metaclaw_core.evolve.evolver import (
    Candidate,
    EvolutionReport,
    SkillEvolver,
    merge_bodies,
    slugify,
)
from metaclaw_core.evolve.lifecycle import SkillStats, retire_unhelpful, skill_stats
from metaclaw_core.evolve.loop import FastLoop
from metaclaw_core.evolve.support import Failure, SupportSet, is_failure
from metaclaw_core.evolve.vetting import VetContext

__all__ = [
    "Candidate",
    "EvolutionReport",
    "Failure",
    "FastLoop",
    "SkillEvolver",
    "SkillStats",
    "SupportSet",
    "VetContext",
    "is_failure",
    "merge_bodies",
    "retire_unhelpful",
    "skill_stats",
    "slugify",
]
