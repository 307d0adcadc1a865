"""The fast loop's learning: the support set, the skill evolver, vetting context, lifecycle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaclaw_core.lazy import lazy_exports

if TYPE_CHECKING:
    from metaclaw_core.evolve.evolver import SkillEvolver, merge_bodies, slugify
    from metaclaw_core.evolve.lifecycle import SkillStats, retire_unhelpful, skill_stats
    from metaclaw_core.evolve.loop import FastLoop
    from metaclaw_core.evolve.report import Candidate, EvolutionReport
    from metaclaw_core.evolve.support import Failure, SupportSet, is_failure
    from metaclaw_core.skills.vetting import VetContext

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

__getattr__ = lazy_exports(
    __name__,
    {
        "Candidate": "metaclaw_core.evolve.report",
        "EvolutionReport": "metaclaw_core.evolve.report",
        "SkillEvolver": "metaclaw_core.evolve.evolver",
        "merge_bodies": "metaclaw_core.evolve.evolver",
        "slugify": "metaclaw_core.evolve.evolver",
        "SkillStats": "metaclaw_core.evolve.lifecycle",
        "retire_unhelpful": "metaclaw_core.evolve.lifecycle",
        "skill_stats": "metaclaw_core.evolve.lifecycle",
        "FastLoop": "metaclaw_core.evolve.loop",
        "Failure": "metaclaw_core.evolve.support",
        "SupportSet": "metaclaw_core.evolve.support",
        "is_failure": "metaclaw_core.evolve.support",
        "VetContext": "metaclaw_core.skills.vetting",
    },
)
