"""The injected block's text and its token budget (the engine fills the budget; the built-in
``metaclaw_render_injection`` plugin renders the block).

Skills are listed by name (not by score) so the same set always renders the same bytes; the
block goes at the end of the system prompt where it disturbs provider prompt caches least.
"""

from __future__ import annotations

from metaclaw_core.models import BLOCK_END, BLOCK_START, ScoredSkill
from metaclaw_core.skills.index import estimate_tokens

HEADING = (
    "Skills learned from earlier tasks. Follow the ones that apply to the current task; "
    "ignore the rest."
)


def render_skill(s: ScoredSkill) -> str:
    return f"## {s.skill.name}\n{s.skill.description}\n\n{s.skill.body.strip()}"


def choose_within_budget(skills: list[ScoredSkill], budget: int) -> list[ScoredSkill]:
    """Best-first greedy fill of the token budget (a skill that does not fit is skipped)."""
    chosen, used = [], estimate_tokens(HEADING) + 8
    for s in skills:
        cost = estimate_tokens(render_skill(s))
        if used + cost <= budget:
            chosen.append(s)
            used += cost
    return chosen


def render_block(skills: list[ScoredSkill]) -> str:
    if not skills:
        return ""
    parts = [BLOCK_START, HEADING, ""]
    for s in sorted(skills, key=lambda s: s.skill.name):
        parts += [render_skill(s), ""]
    parts.append(BLOCK_END)
    return "\n".join(parts)
