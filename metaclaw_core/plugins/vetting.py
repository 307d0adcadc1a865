"""Built-in vetting: checks every skill must pass before it can go live.

Deeper checks (near-duplicates, conflicts, prompt-injection screening) are further plugins
of the same hook.
"""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Skill
from metaclaw_core.plugins.redact import redact_text
from metaclaw_core.plugins.render import BLOCK_END, BLOCK_START


@hookimpl(trylast=True)
def metaclaw_vet_skill(skill: Skill, live: list[Skill], settings: Settings) -> str | None:
    text = f"{skill.description}\n{skill.body}"
    if BLOCK_START in text or BLOCK_END in text:
        return "contains the metaclaw block markers (it could break out of the injected block)"
    if redact_text(text)[1]:
        return "contains what looks like a secret (API key, token or password)"
    return None
