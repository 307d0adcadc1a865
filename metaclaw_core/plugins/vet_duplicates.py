"""Built-in vetting: a learned skill may not be a near-duplicate of a live one.

Similarity is the cosine of the skills' embeddings (``vetting.duplicate_similarity``). The
evolver merges or drops near-duplicates before vetting (``vetting.duplicates``); this check
is the guard for every other way in (pending approvals, plugins, the API). Skills a person
adds are theirs to overlap: only ``vetting.learned_sources`` are checked.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Skill

if TYPE_CHECKING:
    from metaclaw_core.evolve.vetting import VetContext


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


@hookimpl
def metaclaw_vet_skill(
    skill: Skill, live: list[Skill], settings: Settings, context: VetContext | None
) -> str | None:
    v = settings.vetting
    if skill.source not in v.learned_sources:
        return None
    body = _norm(skill.body)
    description = _norm(skill.description)
    for other in live:
        if other.name != skill.name and _norm(other.body) == body:
            return f"duplicates live skill {other.name!r} word for word"
        if other.name != skill.name and description and _norm(other.description) == description:
            return f"has the same description as live skill {other.name!r}"
    if context is None:
        return None
    near = context.closest(skill, live, k=1, min_similarity=v.duplicate_similarity)
    if near:
        return (
            f"near-duplicate of live skill {near[0].skill.name!r} (similarity "
            f"{near[0].score:.2f}); update that skill instead"
        )
    return None
