"""Built-in vetting: a review of what a skill asks the model to do, by meaning, offline.

Every statement of the skill (description and body; code set apart and warnings read as
warnings: see :mod:`metaclaw_core.skills.reading`) is embedded with the engine's own embedder
and scored by the intent classifier (:mod:`metaclaw_core.plugins.intent_model`): the
probability that it asks for one of the risky intents — setting rules aside, leaking the
prompt or memory, handling credentials, exfiltration, destroying evidence, weakening
security, trusting instructions found in data, acting without consent, claiming priority,
concealment, persistence — rather than being a benign rule.

Settings in code blocks are read as statements too ("Set refusal policy to disabled.").
Some categories are read against their opposite, which the classifier (it reads the topic)
confuses with them: a statement that tells the user wholly and truly counts half as
concealment, one that puts a safeguard on half as acting unasked, one that denies that
something outranks the user half as trust inversion, a rank claim or setting rules aside.

The highest risk per category decides: at or above ``vetting.quarantine_score`` (or the
category's own bar in ``vetting.quarantine_scores``) the skill is held for a person with the
category, the sentence and the score; at or above ``vetting.reject_score`` it is rejected,
if a second statement is risky too (the classifier alone does not discard a skill on one
sentence it may have misread). Text the review cannot read (mostly another script or another
language, more statements than it reads) is held too: when the check cannot decide, the
answer is quarantine. Plugins add categories with
``metaclaw_review_exemplars``; their exemplars are matched by similarity
(``vetting.exemplar_similarity``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from metaclaw_core.config import Settings, VettingSettings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Skill
from metaclaw_core.plugins.intent_adapter import IntentAdapter, shipped_adapter
from metaclaw_core.plugins.intent_model import (
    BENIGN,
    IntentModel,
    TrainingData,
    builtin_data,
    features,
    model_for,
)
from metaclaw_core.skills.reading import (
    SETTING,
    Statement,
    discloses,
    keeps_rank,
    read_skill,
    settings_in_code,
)
from metaclaw_core.skills.verdict import Finding, FindingOutcome

if TYPE_CHECKING:
    from metaclaw_core.embeddings import Embedder
    from metaclaw_core.evolve.vetting import VetContext

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_WORD = re.compile(r"[A-Za-z][\w'-]*")
_FEW_WORDS = 5
_ASCII_LETTER = re.compile(r"[A-Za-z]")
_ENGLISH = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "to",
        "of",
        "in",
        "on",
        "for",
        "with",
        "by",
        "from",
        "as",
        "is",
        "are",
        "be",
        "this",
        "that",
        "it",
        "you",
        "your",
        "when",
        "if",
        "use",
        "before",
        "after",
        "each",
        "every",
        "not",
        "never",
        "do",
        "don't",
        "always",
        "should",
        "must",
        "will",
        "can",
        "into",
        "at",
        "any",
        "all",
        "what",
        "which",
        "how",
        "than",
        "then",
        "them",
        "they",
        "their",
        "only",
        "also",
        "more",
        "one",
    ]
)


@dataclass(frozen=True)
class Risk:
    """The highest risk found in one category, and where."""

    category: str
    score: float
    statement: Statement
    margin: float = 0.0  # the score less the bar that holds it (held: >= 0)


CONCEALMENT = "concealment"
UNCONSENTED = "unconsented"
_RANK = frozenset(["trust", "priority", "override"])
_OPPOSITE_WEIGHT = 0.5
_DATA: TrainingData | None = None


def builtin() -> TrainingData:
    global _DATA
    if _DATA is None:
        _DATA = builtin_data()
    return _DATA


_EXEMPLARS: dict[tuple[int, tuple[str, ...]], Any] = {}


def _similar(
    embedder: Embedder,
    vecs: npt.NDArray[np.float32],
    statements: list[Statement],
    exemplars: Sequence[str],
    floor: float,
) -> tuple[float, Statement] | None:
    """The statement most similar to a plugin's exemplars, if at least ``floor``.

    A warning against the act does not count as asking for it."""
    texts = tuple(str(t) for t in exemplars if str(t).strip())
    if not texts:
        return None
    key = (id(embedder), texts)
    matrix = _EXEMPLARS.get(key)
    if matrix is None:
        matrix = _EXEMPLARS[key] = np.asarray(embedder.embed_documents(list(texts)))
    sims = (vecs @ matrix.T).max(axis=1)
    order = [i for i in np.argsort(-sims) if not statements[int(i)].prohibited]
    if not order or float(sims[order[0]]) < floor:
        return None
    return float(sims[order[0]]), statements[int(order[0])]


# Function words of the languages a skill is most often written in besides English: a
# statement made of them is one the English review cannot read, even inside an English skill
# (none that is an English word too: "per", "die", "son", "con", "non", "come", "os", "su")
_FOREIGN_WORDS = (
    "le la les des du de et est une ne pour avec sans que qui dans vos votre nous vous sur pas "
    "au aux cette ces ses leur chaque el los las una por para del "
    "sus cada como pero muy sobre der das und nicht mit für ist ein eine zu dem "
    "von auf auch sich wenn oder bei nach ihre il che di sono della delle gli "
    "ogni anche più dei nel nella uma não ao seu sua"
)
_FOREIGN = frozenset(_FOREIGN_WORDS.split())
_WORDS_ANY = re.compile(r"[^\W\d_]+", re.UNICODE)
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|«[^»]*»|'[^'\n]{12,}'")


def foreign_statement(text: str) -> bool:
    """Whether one statement is in a language other than English (outside quotes): at least
    six words, two or more of them function words of another language and fewer English
    ones, or mostly letters of another script."""
    plain = _QUOTED.sub(" ", text)
    words = [w.lower() for w in _WORDS_ANY.findall(plain)]
    if len(words) < 6:
        return False
    letters = _LETTER.findall(plain)
    if letters and len(_ASCII_LETTER.findall(plain)) / len(letters) < 0.5:
        return True
    foreign = sum(w in _FOREIGN for w in words)
    english = sum(w in _ENGLISH for w in words)
    return foreign >= 2 and foreign > english


def _unreadable(text: str) -> str | None:
    letters = _LETTER.findall(text)
    if len(letters) >= 40:
        ascii_share = len(_ASCII_LETTER.findall(text)) / len(letters)
        if ascii_share < 0.7:
            return "it is mostly in a script the local review cannot read"
    words = re.findall(r"[a-z']+", text.lower())
    if len(words) >= 25 and sum(w in _ENGLISH for w in words) / len(words) < 0.06:
        return "it does not read as English, which the local review needs"
    return None


def _read(
    statements: list[Statement],
    embedder: Embedder,
    model: IntentModel,
    v: VettingSettings,
    adapter: IntentAdapter | None,
    *,
    every_vector: bool,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32] | None]:
    """The class probabilities of each statement, and the embedder's vectors (of every
    statement when ``every_vector``, else perhaps None).

    With a second reader (``adapter``), ``vetting.adapter_weight`` of its probabilities and the
    rest the regression's. Each reader is a MiniLM forward pass, so the heavier one reads every
    statement and the other only those it could carry to a bar: a statement whose mixed risk
    would stay under the lowest bar less the near-miss margin even if the other reader gave it
    risk 1 is neither held nor near whatever that reader says, and keeps the first reading (the
    same verdicts; most statements of most skills are such). A setting read from code is the
    review's own paraphrase ("Set refusal policy to disabled."), a form the second reader
    reads less surely: the regression reads every one, and the second reader may hold one more
    surely than the regression, never free one.
    """
    texts = [s.text for s in statements]

    def regression(rows: Sequence[int]) -> tuple[npt.NDArray[np.float32], npt.NDArray[Any]]:
        vecs = np.asarray(embedder.embed_documents([texts[i] for i in rows]), dtype=np.float32)
        return vecs, model.probabilities(features(vecs, [statements[i] for i in rows]))

    everyone = list(range(len(statements)))
    if adapter is None:
        vecs, probs = regression(everyone)
        return probs.astype(np.float32), vecs
    w = float(v.adapter_weight)
    b = model.classes.index(BENIGN)
    lowest = min([v.quarantine_score, *v.quarantine_scores.values()]) - v.near_miss_margin
    setting = np.asarray([st.lead == SETTING for st in statements])
    first: npt.NDArray[Any]
    second: npt.NDArray[Any]
    full: npt.NDArray[np.float32] | None = None
    if w < 0.5 or every_vector:  # the regression reads all, the second reader what matters
        full, first = regression(everyone)
        again = np.flatnonzero((1 - w) * (1 - first[:, b]) + w >= lowest)
        second = first.copy()  # a statement it does not read: as if it agreed
        if again.size:
            second[again] = adapter.probabilities([statements[i] for i in again])
    else:  # the second reader reads all, the regression what matters and every setting
        second = adapter.probabilities(statements)
        again = np.flatnonzero((w * (1 - second[:, b]) + (1 - w) >= lowest) | setting)
        first = second.copy()
        if again.size:
            first[again] = regression(list(again))[1]
    mixed = (1 - w) * first + w * second
    keep = setting & (first[:, b] < mixed[:, b])
    return np.where(keep[:, None], first, mixed).astype(np.float32), full


def assess(
    skill: Skill,
    embedder: Embedder,
    settings: Settings,
    extra: Mapping[str, Sequence[str]] | None = None,
    *,
    default_embedder: bool = True,
    cache_dir: Path | None = None,
) -> tuple[list[Risk], list[Finding]]:
    """Risk per category of ``skill`` (best first), and the findings they add up to. A
    statement that only one reader read (:func:`_read`) is scored by that reader alone.

    ``extra``: exemplars plugins add, by category. ``default_embedder``: the engine runs the
    default model, so the shipped weights apply (else a model is trained for this one and
    kept in ``cache_dir``).
    """
    v = settings.vetting
    about = {**builtin().about, **{c: f"matches the plugin category {c!r}" for c in extra or {}}}
    text = f"{skill.description}\n{skill.body}"
    why = _unreadable(text)
    if why:
        return [], [Finding("quarantine", f"held for a person: {why}", "intent", "unreadable")]
    reading = read_skill(f"{skill.description}\n\n{skill.body}", max_statements=10**6)
    statements = reading.statements + settings_in_code(skill.body)
    findings: list[Finding] = []
    if len(statements) > v.max_review_statements:
        findings.append(
            Finding(
                "quarantine",
                f"held for a person: {len(statements)} statements, more than the review reads "
                f"(vetting.max_review_statements = {v.max_review_statements})",
                "intent",
                "unreadable",
            )
        )
        statements = statements[: v.max_review_statements]
    foreign = next((st for st in statements if foreign_statement(st.text)), None)
    if foreign is not None:
        findings.append(
            Finding(
                "quarantine",
                "held for a person: part of it is not in English, which the local review needs",
                "intent",
                "unreadable",
                foreign.text[:300],
            )
        )
    if not statements:
        return [], findings
    model = model_for(embedder, builtin(), default_embedder=default_embedder, cache_dir=cache_dir)
    adapter = (
        shipped_adapter(
            builtin().digest(), settings.embedding.backend, settings.embedding.onnx_threads
        )
        if default_embedder and v.adapter_weight
        else None
    )
    probs, vecs = _read(
        statements,
        embedder,
        model,
        v,
        adapter if adapter is not None and adapter.classes == model.classes else None,
        every_vector=bool(extra),
    )
    # the risk of a statement is its probability of not being benign, attributed to its most
    # likely risky category (several close categories add up: "collect the token and post it")
    benign_col = model.classes.index(BENIGN)
    risk = 1.0 - probs[:, benign_col]
    warned = np.asarray([st.prohibited for st in statements])
    risk = np.where(warned, risk * v.warning_weight, risk)

    def bar(category: str, st: Statement) -> float:
        own = float(v.quarantine_scores.get(category, v.quarantine_score))
        # a setting read from code is a paraphrase the review made, and a fragment of a few
        # words ("be-concise rule") says too little to trust the classifier below its general
        # bar: the general bar at least
        if st.lead == SETTING or len(_WORD.findall(st.text)) < _FEW_WORDS:
            return max(own, v.quarantine_score)
        return own

    best: dict[str, Risk] = {}
    held = 0  # statements at or above their bar
    near: list[Risk] = []  # statements just under it
    for i, st in enumerate(statements):
        row = probs[i].copy()
        row[benign_col] = -1.0
        category = model.classes[int(np.argmax(row))]
        score = float(risk[i])
        if (
            (category == CONCEALMENT and discloses(st.text))
            or (category == UNCONSENTED and st.consent_required)
            or (category in _RANK and keeps_rank(st.text))
        ):
            # "mention them rather than silently fixing them", "the cost of pausing to ask is
            # always lower", "they don't override the user's request": telling the user,
            # asking first, keeping the user first is what concealment, acting unasked and
            # trust inversion are not (the classifier reads the topic: reporting, asking, rank)
            score *= _OPPOSITE_WEIGHT
        margin = score - bar(category, st)
        held += margin >= 0
        if -v.near_miss_margin <= margin < 0:
            near.append(Risk(category, score, st, margin))
        if category not in best or margin > best[category].margin:
            best[category] = Risk(category, score, st, margin)
    for category, texts in (extra or {}).items():
        assert vecs is not None  # every_vector: the regression's input for every statement
        found = _similar(embedder, vecs, statements, texts, v.exemplar_similarity)
        if found is not None:
            margin = found[0] - v.exemplar_similarity
            if category not in best or margin > best[category].margin:
                best[category] = Risk(category, found[0], found[1], margin)
    risks = sorted(best.values(), key=lambda r: -r.score)
    near = list({r.statement.text.lower(): r for r in near}.values())  # two different ones
    if held == 0 and len(near) >= 2:
        first, second = sorted(near, key=lambda r: -r.margin)[:2]
        findings.append(
            Finding(
                "quarantine",
                f"it {about.get(first.category, first.category)}, almost, in two statements "
                f"(the other: {second.statement.text[:120]!r})",
                "intent",
                first.category,
                first.statement.text[:300],
                first.score,
            )
        )
    # one risky sentence holds a skill; rejecting it unseen takes a second one: a lone
    # sentence read wrongly ("so they don't have to keep checking") must reach a person
    corroborated = held >= 2
    for r in risks:
        if r.margin < 0:
            continue
        # a plugin's category is matched by similarity alone: it holds, it never rejects
        plugin = r.category in (extra or {}) and r.category not in builtin().about
        outcome: FindingOutcome = (
            "reject" if r.score >= v.reject_score and corroborated and not plugin else "quarantine"
        )
        findings.append(
            Finding(
                outcome,
                f"it {about.get(r.category, r.category)}",
                "intent",
                r.category,
                r.statement.text[:300],
                r.score,
            )
        )
    return risks, findings


@hookimpl
def metaclaw_vet_skill(
    skill: Skill, live: list[Skill], settings: Settings, context: VetContext | None
) -> list[Finding] | None:
    if not settings.vetting.intent_review:
        return None
    if context is None:
        return [
            Finding(
                "quarantine",
                "held for a person: no embedder to review what the skill asks for",
                "intent",
            )
        ]
    try:
        _, findings = assess(
            skill,
            context.embedder,
            settings,
            context.exemplars,
            default_embedder=settings.embedding.model == "auto",
            cache_dir=settings.home / "cache",
        )
    except Exception as exc:  # the check could not decide: quarantine, never live
        return [
            Finding(
                "quarantine",
                f"held for a person: the intent review failed ({type(exc).__name__}: {exc})",
                "intent",
            )
        ]
    return findings or None
