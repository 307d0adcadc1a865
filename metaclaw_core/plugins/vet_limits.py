"""Built-in vetting: schema, size and slug limits, and front-matter-safe text.

The ``Skill`` model already refuses what could never be stored; this check adds the limits of
``[vetting]`` and proves the skill survives a SKILL.md round trip unchanged (so no
description, category or body can smuggle extra front matter into an exported file).
"""

from __future__ import annotations

import re

from metaclaw_core.config import Settings
from metaclaw_core.errors import SkillFormatError
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import SKILL_NAME_RE, Skill
from metaclaw_core.skills.skillmd import dump_skill_md, parse_skill_md

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_CATEGORY_CHARS = 48


def check_limits(skill: Skill, settings: Settings) -> str | None:
    v = settings.vetting
    if not SKILL_NAME_RE.match(skill.name or ""):
        return "name is not a slug (lowercase letters, digits and '-')"
    if len(skill.name) > v.max_name_chars:
        return f"name is longer than {v.max_name_chars} characters (vetting.max_name_chars)"
    if len(skill.description) > v.max_description_chars:
        return (
            f"description is longer than {v.max_description_chars} characters "
            "(vetting.max_description_chars)"
        )
    if len(skill.body) > v.max_body_chars:
        return f"body is longer than {v.max_body_chars} characters (vetting.max_body_chars)"
    if skill.category is not None and (
        len(skill.category) > MAX_CATEGORY_CHARS or "\n" in skill.category
    ):
        return f"category must be one line of at most {MAX_CATEGORY_CHARS} characters"
    for label, text in (
        ("description", skill.description),
        ("body", skill.body),
        ("category", skill.category or ""),
    ):
        if _CONTROL.search(text):
            return f"{label} contains control characters"
    return None


def check_front_matter(skill: Skill) -> str | None:
    try:
        back = parse_skill_md(dump_skill_md(skill), path=f"<{skill.name}>")
    except SkillFormatError as exc:
        return f"does not survive a SKILL.md round trip ({exc})"
    if (back.name, back.description, back.body, back.category) != (
        skill.name,
        skill.description,
        skill.body.strip(),
        skill.category,
    ):
        return "does not survive a SKILL.md round trip unchanged (front-matter injection?)"
    return None


@hookimpl(trylast=True)
def metaclaw_vet_skill(skill: Skill, live: list[Skill], settings: Settings) -> str | None:
    return check_limits(skill, settings) or check_front_matter(skill)
