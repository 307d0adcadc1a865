"""Built-in rendering of the injected block: deterministic, marked, within a token budget.

Skills are listed by name (not by score) so the same set always renders the same bytes; the
block goes at the end of the system prompt where it disturbs provider prompt caches least.
"""

from __future__ import annotations

import re

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import CallContext, ScoredSkill
from metaclaw_core.skills.index import estimate_tokens

BLOCK_START = "<metaclaw-skills>"
BLOCK_END = "</metaclaw-skills>"
HEADING = (
    "Skills learned from earlier tasks. Follow the ones that apply to the current task; "
    "ignore the rest."
)
_BLOCK = re.compile(re.escape(BLOCK_START) + r".*?" + re.escape(BLOCK_END) + r"\s*", re.DOTALL)


def strip_injection(text: str) -> str:
    """Remove any block an earlier turn injected (so it neither repeats nor skews retrieval)."""
    if BLOCK_START not in text:
        return text
    return _BLOCK.sub("", text)


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


@hookimpl(trylast=True)
def metaclaw_render_injection(
    skills: list[ScoredSkill], ctx: CallContext, settings: Settings
) -> str:
    return render_block(skills)
