"""The skill library: storage with generations, SKILL.md files, and the in-memory index."""

from metaclaw_core.skills.index import SkillSnapshot
from metaclaw_core.skills.library import SkillLibrary
from metaclaw_core.skills.skillmd import dump_skill_md, parse_skill_md

__all__ = ["SkillLibrary", "SkillSnapshot", "dump_skill_md", "parse_skill_md"]
