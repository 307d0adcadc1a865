"""Built-in vetting: a learned skill may not contradict the live skills closest to it.

A heuristic, not an oracle: the rules of the candidate and of each close live skill
(``vetting.conflict_similarity``) are split into sentences; two sentences about the same
things (at least two shared content words, half of the shorter one) with opposite polarity
("always confirm before deleting" / "never ask before deleting") are a conflict. Polarity is
that of a rule, not of a description: "never", "don't", "must not", "avoid", a sentence that
opens with "No ..." negate; "isn't", "no offset", "missing" describe what a text lacks
("missing the T separator, and no timezone offset" states an error, it does not forbid the
offset). Replace it with an LLM-backed check by registering another ``metaclaw_vet_skill``
plugin.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Skill

if TYPE_CHECKING:
    from metaclaw_core.evolve.vetting import VetContext

_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n+|,\s+(?:but|and then)\s+")
_WORD = re.compile(r"[a-z0-9']+")
# Words that negate a rule wherever they stand.
_NEGATIONS = frozenset(
    [
        "never",
        "don't",
        "dont",
        "mustn't",
        "shouldn't",
        "can't",
        "cannot",
        "avoid",
        "without",
        "stop",
        "refrain",
        "skip",
        "nor",
        "neither",
        "forbid",
        "forbidden",
    ]
)
# "not" negates a rule after these ("do not", "must not"); after "is", "does" it describes.
_RULE_AUXILIARIES = frozenset(["do", "must", "should", "may", "shall", "will", "to", "can"])
# Words that can negate (or be counted as negating) but are stripped from the content words.
_NEGATING = _NEGATIONS | {"not", "no"}
_FUNCTION = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "as",
        "is",
        "are",
        "be",
        "been",
        "being",
        "must",
        "should",
        "always",
        "do",
        "does",
        "did",
        "please",
        "when",
        "if",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "you",
        "your",
        "we",
        "our",
        "they",
        "them",
        "their",
        "i",
        "me",
        "my",
        "can",
        "will",
        "would",
        "could",
        "may",
        "might",
        "then",
        "than",
        "so",
        "any",
        "all",
        "every",
        "each",
        "before",
        "after",
        "first",
        "only",
        "just",
        "also",
        "more",
        "most",
        "less",
        "very",
        "use",
        "using",
        "make",
        "sure",
        "ask",
    ]
)
_SUFFIXES = ("ations", "ation", "ions", "ion", "ings", "ing", "edly", "ed", "es", "s", "ly", "e")
MIN_SHARED = 2


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _negates(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` negates the sentence as a rule (see the module's docstring)."""
    w = words[i]
    if w in _NEGATIONS:
        return True
    if w == "not":
        return i > 0 and words[i - 1] in _RULE_AUXILIARIES
    if w == "no":
        return i == 0
    return False


def directives(text: str) -> list[tuple[str, bool, frozenset[str]]]:
    """(sentence, negated, content stems) for each sentence of ``text``."""
    out = []
    for sentence in _SPLIT.split(text):
        words = _WORD.findall(sentence.lower())
        if not words:
            continue
        negated = sum(1 for i, w in enumerate(words) if _negates(words, i)) % 2 == 1
        content = frozenset(
            _stem(w)
            for w in words
            if w not in _NEGATING and not w.endswith("n't") and w not in _FUNCTION and len(w) > 2
        )
        if content:
            out.append((sentence.strip(), negated, content))
    return out


def find_conflict(a: str, b: str) -> tuple[str, str] | None:
    """The first pair of sentences of ``a`` and ``b`` that say opposite things, if any."""
    for sa, na, ca in directives(a):
        for sb, nb, cb in directives(b):
            if na == nb:
                continue
            shared = len(ca & cb)
            if shared >= MIN_SHARED and shared * 2 >= min(len(ca), len(cb)):
                return sa, sb
    return None


@hookimpl
def metaclaw_vet_skill(
    skill: Skill, live: list[Skill], settings: Settings, context: VetContext | None
) -> str | None:
    v = settings.vetting
    if skill.source not in v.learned_sources or context is None:
        return None
    for near in context.closest(skill, live, k=3, min_similarity=v.conflict_similarity):
        found = find_conflict(skill.body, near.skill.body)
        if found:
            return (
                f"conflicts with live skill {near.skill.name!r}: {found[0][:120]!r} contradicts "
                f"{found[1][:120]!r}; retire or update {near.skill.name!r} first"
            )
    return None
