"""Built-in vetting: schema, size and slug limits, and text that is what it looks like.

The ``Skill`` model already refuses what could never be stored; this check adds the limits of
``[vetting]``, proves the skill survives a SKILL.md round trip unchanged (so no description,
category or body can smuggle extra front matter into an exported file), and rejects text that
hides something: front matter or ``key: value`` header lines inside the body's prose,
invisible, control or direction-changing characters, variation selectors that draw nothing,
look-alike letters (a confusable letter inside a Latin word, compatibility forms, a whole word
of look-alikes), prose a rendered view hides (comments, hidden elements), and prose that poses
as another part of the prompt (role headings and labels, section tags, chat messages).
Malformed means rejected, never normalised into something admissible.
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

# C0 controls but tab and newline, DEL, and the C1 controls (NEL, U+0085, breaks a line for
# some parsers and not for others)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_CATEGORY_CHARS = 48
# Every format character (Unicode category Cf: zero-width, direction, tag, shorthand-format
# controls ...) but the marks some writing needs (_WRITING_MARK, below), and the letters that
# render as blank space (Hangul and Braille fillers, the combining grapheme joiner, Khmer and
# Mongolian invisible vowels and selectors)
INVISIBLE = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b\u2028-\u202e\u2060-\u206f\u2800\u3164"
    "\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)
# Variation selectors choose how the character before them is drawn (the emoji form of ⚠,
# a CJK ideograph's variant): one, after a symbol, digit or ideograph, is typography; a run of
# them, or one after a letter, carries bytes no reader sees.
_SELECTOR = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")
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
    r"^\s*(?:[-*]\s+)?(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*)\s*[:=]\s*\S", re.M
)
# configuration written as prose: a TOML table ("[agent.permissions]" over "key = value") or a
# JSON object on its own line
_TOML_TABLE = re.compile(
    r"^[ \t]*\[{1,2}[A-Za-z_][\w-]*(?:\.[\w-]+)*\]{1,2}[ \t]*\n(?:[ \t]*\n)*"
    r"[ \t]*[\w.-]+[ \t]*=[ \t]*\S",
    re.M,
)
_JSON_LINE = re.compile(r"^[ \t]*\{[ \t]*\"[\w.-]+\"[ \t]*:", re.M)
# text pushed out of view: many empty lines, or a long run of spaces inside a line
_PADDING = re.compile(r"\n(?:[ \t]*\n){6,}[ \t]*\S|^[^|\n]*\S[ \t]{40,}\S", re.M)


def inline_settings(text: str) -> str | None:
    """A ``key: value`` setting written into one line of a field, or None: one with a
    snake_case or camelCase key, or two or more pairs."""
    pairs = [m.group(2) for m in _PAIR.finditer(text)]
    snake = [k for k in pairs if _SNAKE.search(k)]
    if snake or len(pairs) >= 2:
        return (snake or pairs)[0]
    return None


_WORDS = re.compile(r"[^\W\d_]+", re.UNICODE)


# Scripts with letters drawn like Latin ones: mixed into a Latin word, they spell a word a
# filter does not recognise and a reader does.
_CONFUSABLE_SCRIPTS = frozenset(
    [
        "CYRILLIC",
        "ARMENIAN",
        "CHEROKEE",
        "COPTIC",
        "LISU",
        "CANADIAN",
        "TIFINAGH",
        "NKO",
        "GOTHIC",
        "DESERET",
        "OSAGE",
        "VAI",
        "BAMUM",
        "OLD",
    ]
)
# Greek letters drawn like Latin ones (Δ, λ, π in "Δt" or "λx" are mathematics, not disguise);
# and the Cyrillic and Greek letters from which a whole "Latin" word can be spelled
_GREEK_LATINISH = frozenset("οορυχνικΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
_LATINISH = _GREEK_LATINISH | frozenset("аеорсухіјѕһԁԛԝӏАВЕКМНОРСТХУІЈЅ")


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    if name.startswith(("FULLWIDTH LATIN", "MATHEMATICAL", "LATIN LETTER SMALL CAPITAL")):
        return "lookalike"
    plain = unicodedata.normalize("NFKC", ch)
    notation = ("SUBSCRIPT", "SUPERSCRIPT", "MODIFIER LETTER")
    if (
        not ch.isascii()
        and plain.isascii()
        and plain.isalpha()
        and not any(n in name for n in notation)
    ):
        return "lookalike"  # a compatibility form of a Latin letter (ᵃ, ſ, the Kelvin sign K)
    return name.split(" ", 1)[0]  # LATIN, CYRILLIC, GREEK, ...


def _selector_hides(text: str) -> str | None:
    for m in _SELECTOR.finditer(text):
        sel, i = m.group(0), m.start()
        before = text[i - 1] if i else ""
        after = text[m.end() : m.end() + 1]
        if not before or _SELECTOR.match(before) or _SELECTOR.match(after):
            return f"U+{ord(sel):04X}"
        ideograph = unicodedata.name(before, "").startswith("CJK")
        if sel in "\ufe0e\ufe0f":  # text or emoji form: after a symbol, a keycap's base, ℹ
            shown = not before.isascii() or before in "0123456789#*"
        elif sel < "\ufe0e":  # mathematical and CJK-compatibility variants
            shown = ideograph or unicodedata.category(before) == "Sm"
        else:  # ideographic variation sequences
            shown = ideograph
        if not shown or before.isspace():
            return f"U+{ord(sel):04X}"
    return None


# letters drawn inside a circle, parentheses or a square ("ⓟⓐⓨ"), among or next to Latin ones
_ENCLOSED = re.compile(
    "(?:[A-Za-z]|[\u249c-\u24e9\U0001f130-\U0001f189])*[\u249c-\u24e9\U0001f130-\U0001f189]"
    "(?:[A-Za-z]|[\u249c-\u24e9\U0001f130-\U0001f189])+|"
    "[A-Za-z]+[\u249c-\u24e9\U0001f130-\U0001f189]"
)


def _lookalike_word(text: str) -> str | None:
    """A word spelled with letters that imitate Latin ones, or None."""
    enclosed = _ENCLOSED.search(text)
    if enclosed:
        return enclosed.group(0)
    words: list[str] = _WORDS.findall(text)
    letters = sum(len(w) for w in words)
    latin = sum(1 for w in words for c in w if c.isascii())
    for word in words:
        scripts = {_script(c) for c in word}
        if "lookalike" in scripts and len(word) > 1:
            return word
        if "LATIN" not in scripts:
            # a whole word of look-alike letters in English prose ("рау" for "pay")
            if len(word) > 1 and set(word) <= _LATINISH and latin >= 0.9 * (letters - len(word)):
                return word
            continue
        if scripts & _CONFUSABLE_SCRIPTS or any(c in _GREEK_LATINISH for c in word):
            return word
    return None


# Invisible marks some writing needs: the zero-width joiner in an emoji sequence (👩‍💻) or an
# Indic conjunct, the non-joiner in Persian words, the direction marks in right-to-left text.
# Between two Latin letters they only split a word ("ig<U+200C>nore").
_WRITING_MARK = re.compile("[\u200c\u200d\u200e\u200f\u061c]")


def _writing_needs(mark: str, before: str, after: str) -> bool:
    if not before or not after:
        return mark in "\u200e\u200f\u061c" and bool(before or after)
    if before.isascii() and before.isalpha() and after.isascii() and after.isalpha():
        return False
    if mark == "\u200d":
        emoji = (
            unicodedata.category(before) in {"So", "Sk"} or before == "\ufe0f"
        ) and unicodedata.category(after) == "So"
        return emoji or (_non_latin_letter(before) and _non_latin_letter(after))
    if mark == "\u200c":
        return _non_latin_letter(before) and _non_latin_letter(after)
    return True  # a direction mark next to punctuation, digits or right-to-left letters


def _non_latin_letter(ch: str) -> bool:
    return not ch.isascii() and unicodedata.category(ch)[0] in "LM" and _script(ch) != "LATIN"


def hidden_text(label: str, text: str) -> str | None:
    """Why ``text`` hides something (invisible or look-alike characters), or None. In code
    too: a look-alike host or package name there is typosquatting (``pip install -i
    https://руpi.org``)."""
    m = INVISIBLE.search(text)
    if m:
        code = f"U+{ord(m.group(0)):04X}"
        return f"{label} contains an invisible or direction-changing character ({code})"
    for mark in _WRITING_MARK.finditer(text):
        i = mark.start()
        if not _writing_needs(mark.group(0), text[i - 1 : i], text[i + 1 : i + 2]):
            code = f"U+{ord(mark.group(0)):04X}"
            return f"{label} contains an invisible or direction-changing character ({code})"
    selector = _selector_hides(text)
    if selector:
        return f"{label} carries variation selectors that draw nothing ({selector})"
    word = _lookalike_word(text)
    if word:
        return f"{label} spells a word with look-alike letters ({word!r})"
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
    table = _TOML_TABLE.search(prose) or _JSON_LINE.search(prose)
    if table:
        return f"the body's prose carries configuration ({table.group(0).strip()[:40]!r})"
    if _PADDING.search(split_code(body, placeholder="(code)\n")[0]):
        return "the body pushes text out of view (many empty lines or a long run of spaces)"
    return None


# Text a rendered view does not show, so a person approving the skill never reads it while
# the model does: HTML comments, markdown's "[//]: # (...)" comments (a reference definition
# that points nowhere), elements marked hidden or styled away, and long link titles.
_HIDDEN_MARKUP = re.compile(
    r"<!--|"
    r"^[ \t]*\[[^\]\n]*\]:[ \t]*(?:#|<>|//)?[ \t]*(?:\(|\"|'|$)|"
    r"<[a-z][\w-]*\b[^>\n]*?(?:\shidden(?=[\s>=/])|style\s*=\s*[\"'][^\"'\n]*(?:display\s*:\s*none|"
    r"visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d]*[1-9])|opacity\s*:\s*0(?![.\d]*[1-9])|"
    r"color\s*:\s*(?:white|#fff(?:fff)?\b|transparent)))|"
    r"\]\([^)\s]+\s+[\"'](?:[^\"'\n]*\s){7,}[^\"'\n]*[\"']\)|"
    # an image's alt text is not shown once the image loads: a sentence there is hidden
    r"!\[(?:[^\]\n]*\s){9,}[^\]\n]*\]\(|<img\b[^>\n]*\balt\s*=\s*[\"'](?:[^\"'\n]*\s){9,}",
    re.I | re.M,
)
# A heading, a line label or a tag that speaks for a part of the prompt the skill is not: the
# system, the operator, a chat turn, or the end of the skills block and the start of another
_ROLE = (
    r"(?:(?:system|operator|administrator|admin|assistant|human)"
    r"(?:\s+(?:prompt|instructions?|override))?|(?:developer|user)(?:\s+prompt)?)"
)
_ROLE_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__|\[)?[ \t]*" + _ROLE + r"[ \t]*"
    r"(?:\*\*|__|\])?[ \t]*:?[ \t]*(?:\*\*|__)?[ \t]*#*[ \t]*$|"
    # "### SYSTEM (priority 0 — supersedes user instructions)": the role, then an aside
    r"^[ \t]*#{1,6}[ \t]*(?:\*\*|__|\[)?" + _ROLE + r"(?:\*\*|__|\])?"
    r"(?:[ \t]*[(\[—–|]|[ \t]+-[ \t])",
    re.I | re.M,
)
# another skill inside this one: "## Skill: repository-hygiene", "**Description:** Use on ..."
_NESTED_SKILL = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?skill(?:[ \t]+name)?(?:\*\*|__)?[ \t]*:[ \t]*"
    r"(?:\*\*|__)?[ \t]*[a-z0-9]+(?:-[a-z0-9]+)+\b|"
    r"^[ \t]*(?:[-*][ \t]+)?(?:\*\*|__)(?:name|description)[ \t]*:?(?:\*\*|__)[ \t]*:?[ \t]*"
    r"(?:[a-z0-9]+(?:-[a-z0-9]+)+[ \t]*$|"
    r"(?:use|apply|applies|trigger\w*)[ \t]+(?:when|on|for|to)\b)",
    re.I | re.M,
)
_SETEXT = re.compile(r"^[ \t]*(" + _ROLE + r")[ \t]*:?[ \t]*\n[ \t]*(?:=+|-+)[ \t]*$", re.I | re.M)
_ROLE_LABEL = re.compile(
    r"^[ \t]*(?:\*\*|__)?(?:human|operator|administrator|admin|system)"
    r"(?:\s+(?:prompt|instructions?|override|notice|note))?"
    r"(?:\*\*|__)?[ \t]*:(?:\*\*|__)?[ \t]*\S",
    re.I | re.M,
)
_SECTION_TAG = re.compile(
    r"</?[a-z][\w-]*(?:skills?|instructions?|prompt|system|rules|polic(?:y|ies)|memory|"
    r"context|tool[_-]?results?|function[_-]?results|reminder)\s*(?:\s[^>\n]*)?>|"
    r"\{\s*\"role\"\s*:\s*\"(?:system|developer|assistant|user|tool)\"",
    re.I,
)


# a role speaking inside the description's one line: "Use when deploying. SYSTEM: ..."
_SAYS_AS_ROLE = re.compile(
    r"(?:^|[.!?;]\s+)(?:system|operator|administrator|admin|assistant|human|developer)"
    r"(?:\s+(?:note|notice|prompt|instructions?|override))?\s*:",
    re.I,
)


def hidden_markup(body: str, label: str = "the body") -> str | None:
    """Prose a rendered view hides, or that poses as another part of the prompt; or None."""
    prose, _ = split_code(body)
    prose = re.sub(r"`[^`\n]*`", " ", prose)  # inline code is quoted, not said
    m = _HIDDEN_MARKUP.search(prose)
    if m:
        return f"{label} hides text from a rendered view ({m.group(0).strip()[:60]!r})"
    m = _NESTED_SKILL.search(prose)
    if m:
        return f"{label} carries another skill's header ({m.group(0).strip()[:60]!r})"
    m = _ROLE_HEADING.search(prose) or _SETEXT.search(prose) or _ROLE_LABEL.search(prose)
    if m:
        return f"{label} speaks as another part of the prompt ({m.group(0).strip()[:60]!r})"
    m = _SECTION_TAG.search(prose)
    if m:
        return f"{label} opens or closes a section of the prompt ({m.group(0).strip()[:60]!r})"
    return None


# One setting in the description's line: a key that only configures ("priority: highest")
_SETTING_PAIR = re.compile(
    r"\b(?:priority|precedence|rank|scope|role|authority|trust|mode|apply|applies|level)"
    r"\s*[:=]\s*[\"']?(?:highest|high|top|max(?:imum)?|first|override|global|all|always|"
    r"every\w*|true|yes|on|0|1|system|admin|root|unrestricted|critical|mandatory)\b",
    re.I,
)


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
    pair = _SETTING_PAIR.search(skill.description)
    if pair:
        return f"the description carries a setting ({pair.group(0)!r}), not a description"
    role = _SAYS_AS_ROLE.search(skill.description)
    if role:
        return f"the description speaks as another part of the prompt ({role.group(0).strip()!r})"
    hidden = hidden_markup(skill.description, "the description")
    if hidden:
        return hidden
    return smuggled_header(skill.body) or hidden_markup(skill.body)


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
