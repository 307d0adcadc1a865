"""Built-in vetting: schema, size and slug limits, and text that is what it looks like.

The ``Skill`` model already refuses what could never be stored; this check adds the limits of
``[vetting]``, proves the skill survives a SKILL.md round trip unchanged (so no description,
category or body can smuggle extra front matter into an exported file), and rejects text that
hides something: front matter or ``key: value`` header lines inside the body's prose,
invisible or direction-changing characters, and look-alike letters (a Cyrillic or Greek letter
inside a Latin word, full-width or mathematical letters). Malformed means rejected, never
normalised into something admissible.
"""

from __future__ import annotations

import re
import unicodedata

from metaclaw_core.config import Settings
from metaclaw_core.errors import SkillFormatError
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import SKILL_NAME_RE, Skill
from metaclaw_core.skills.reading import split_code
from metaclaw_core.skills.skillmd import dump_skill_md, parse_skill_md
from metaclaw_core.skills.verdict import Finding

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_CATEGORY_CHARS = 48
INVISIBLE = re.compile(
    "[\u00ad\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\ufff9-\ufffb\U000e0000-\U000e007f]"
)
_FRONT_KEY = re.compile(
    r"^\s*(?:name|description|category|priority|role|metadata|version|tags|license|"
    r"source|status|system|instructions)\s*:",
    re.M,
)
_RULER = re.compile(r"^\s*-{3,}\s*$", re.M)
# Settings inline in a one-line field: "always_apply: true; scope: all_users; rank: top", or
# a JSON object: {"scope": "global", "confirm_actions": false}
_PAIR = re.compile(
    r"(?<![\w/.:-])([\"']?)([A-Za-z][\w-]*)\1\s*[:=]\s*(?=[\w\[\]\"'(*/{<-])(?!//)", re.ASCII
)
_SNAKE = re.compile(r"[a-z0-9]_[a-z0-9]|^[a-z]+[A-Z]")
# a prose line that is a setting with a snake_case or camelCase key ("approval_mode: never")
_SETTING_LINE = re.compile(
    r"^\s*(?:[-*]\s+)?(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*)\s*:\s*\S", re.M
)


def inline_settings(text: str) -> str | None:
    """A ``key: value`` setting written into one line of a field, or None: one with a
    snake_case or camelCase key, or two or more pairs."""
    pairs = [m.group(2) for m in _PAIR.finditer(text)]
    snake = [k for k in pairs if _SNAKE.search(k)]
    if snake or len(pairs) >= 2:
        return (snake or pairs)[0]
    return None


_WORDS = re.compile(r"[^\W\d_]+", re.UNICODE)


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    if name.startswith(("FULLWIDTH LATIN", "MATHEMATICAL")):
        return "lookalike"
    return name.split(" ", 1)[0]  # LATIN, CYRILLIC, GREEK, ...


def hidden_text(label: str, text: str) -> str | None:
    """Why ``text`` hides something (invisible or look-alike characters), or None."""
    m = INVISIBLE.search(text)
    if m:
        code = f"U+{ord(m.group(0)):04X}"
        return f"{label} contains an invisible or direction-changing character ({code})"
    for word in _WORDS.findall(text):
        scripts = {_script(c) for c in word}
        if "lookalike" in scripts:
            return f"{label} contains full-width or mathematical look-alike letters ({word!r})"
        if "LATIN" in scripts and scripts & {"CYRILLIC", "GREEK"}:
            return f"{label} mixes Latin with Cyrillic or Greek letters in one word ({word!r})"
    return None


def smuggled_header(body: str) -> str | None:
    """Front matter or header lines in the body's prose (code blocks are examples)."""
    prose, _ = split_code(body)
    key = _FRONT_KEY.search(prose) or _SETTING_LINE.search(prose)
    if key:
        return f"the body has a front-matter line outside code ({key.group(0).strip()!r})"
    for ruler in _RULER.finditer(prose):
        after = prose[ruler.end() :].lstrip("\n").splitlines()[:1]
        if after and re.match(r"^\s*[\w-]+\s*:\s*\S", after[0]):
            return "the body opens a front-matter block ('---' then 'key: value')"
    return None


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
        ("name", skill.name),
        ("description", skill.description),
        ("body", skill.body),
        ("category", skill.category or ""),
    ):
        if _CONTROL.search(text):
            return f"{label} contains control characters"
        hidden = hidden_text(label, text)
        if hidden:
            return hidden
    if _FRONT_KEY.search(skill.description) or "---" in skill.description:
        return "the description carries front matter ('key:' or '---')"
    key = inline_settings(skill.description)
    if key:
        return f"the description carries settings ('{key}: ...'), not a description"
    return smuggled_header(skill.body)


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
def metaclaw_vet_skill(skill: Skill, live: list[Skill], settings: Settings) -> Finding | None:
    why = check_limits(skill, settings) or check_front_matter(skill)
    return Finding("reject", why, "structure", "structure") if why else None
