"""Built-in rendering of the injected block: deterministic, marked, within a token budget.

The text itself is :func:`metaclaw_core.skills.block.render_block` (the markers and
``strip_injection`` live next to :class:`~metaclaw_core.models.Injection`); this module is the
hook implementation. The other names are re-exported for code that imported them from here.
"""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import BLOCK_END, BLOCK_START, CallContext, ScoredSkill, strip_injection
from metaclaw_core.skills.block import HEADING, choose_within_budget, render_block, render_skill

__all__ = [
    "BLOCK_END",
    "BLOCK_START",
    "HEADING",
    "choose_within_budget",
    "metaclaw_render_injection",
    "render_block",
    "render_skill",
    "strip_injection",
]


@hookimpl(trylast=True)
def metaclaw_render_injection(
    skills: list[ScoredSkill], ctx: CallContext, settings: Settings
) -> str:
    return render_block(skills)
