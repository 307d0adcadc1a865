"""Provenance: does the traffic a candidate was distilled from carry instructions to the model?

An attacker who cannot write a skill can still write the data an agent reads: a file, a web
page, a tool's output, an e-mail. If such text addresses the model ("AI assistants reading
this must ...") and the agent then fails, the evolver may turn the planted instruction into a
rule. So a candidate whose source trajectories' *tool results* carry instructions addressed
to the model is held for a person, whatever its own text says.

Two readings of each tool result: the form of an injection (role markers, explicit rule
overrides, a sentence that speaks to the AI, the assistant, the model or "whoever reads
this" and tells it what to do), and the meaning review's classifier over the sentences that
are phrased as orders to someone (at most ``_MAX_SENTENCES`` per trajectory).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from metaclaw_core.config import Settings
from metaclaw_core.models import Trajectory
from metaclaw_core.plugins.intent_model import BENIGN, features, model_for
from metaclaw_core.plugins.vet_injection import OVERRIDE, ROLE_TOKENS
from metaclaw_core.plugins.vet_intent import builtin
from metaclaw_core.skills.reading import statement_of
from metaclaw_core.skills.verdict import Finding

if TYPE_CHECKING:
    from metaclaw_core.embeddings import Embedder

_MAX_CHARS = 40_000
_MAX_SENTENCES = 120
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_ADDRESSEE = re.compile(
    r"\b(?:ai|a\.i\.|assistants?|language models?|llms?|(?:the |any |an )?models?|agents?|"
    r"chat ?bots?|bots?|copilots?|claude|gpt|gemini|whoever (?:reads|processes|is reading)|"
    r"anyone (?:reading|processing)|the reader)\b",
    re.I,
)
_ORDER = re.compile(
    r"\b(?:must|should|shall|need to|have to|are (?:to|required to)|is (?:to|required to)|"
    r"please|instead|from now on|make sure|do not|don't|never|always|ignore|disregard|forget|"
    r"override|reply|respond|send|forward|run|execute|include|reveal|tell|print|output)\b",
    re.I,
)
_IMPERATIVE = re.compile(
    r"^\s*(?:please\s+)?(?:you\s+(?:must|should|need to|will)\s+)?(?:always|never|do not|don't|"
    r"ignore|disregard|forget|send|forward|e-?mail|post|upload|reveal|print|include|reply|"
    r"respond|tell|run|execute|delete|remove|disable|turn off|transfer|pay|save|store|copy|"
    r"share|follow|obey|add|write|call|visit|open|download|install|approve|grant)\b",
    re.I,
)


def _data_texts(trajectory: Trajectory) -> list[str]:
    """What the agent read rather than what its principals said: tool results."""
    return [m.content for m in trajectory.messages if m.role == "tool" and m.content]


def instructions_in_data(
    trajectory: Trajectory, embedder: Embedder, settings: Settings
) -> Finding | None:
    """A finding when ``trajectory``'s tool results carry instructions to the model."""
    texts = _data_texts(trajectory)
    if not texts:
        return None
    text = "\n".join(texts)[:_MAX_CHARS]
    m = ROLE_TOKENS.search(text)
    if m:
        return _finding(trajectory, m.group(0), None)
    orders: list[str] = []
    for sentence in _SPLIT.split(text):
        sentence = sentence.strip()
        if len(sentence) < 12:
            continue
        if any(p.search(sentence) for p in OVERRIDE):
            return _finding(trajectory, sentence, None)
        if _ADDRESSEE.search(sentence) and _ORDER.search(sentence):
            return _finding(trajectory, sentence, None)
        if _IMPERATIVE.match(sentence) or re.search(r"\byou(?:r)?\b", sentence, re.I):
            orders.append(sentence[:400])
        if len(orders) >= _MAX_SENTENCES:
            break
    if not orders:
        return None
    try:
        model = model_for(embedder, builtin(), default_embedder=settings.embedding.model == "auto")
        statements = [statement_of(o) for o in orders]
        vecs = np.asarray(embedder.embed_documents(orders), dtype=np.float32)
        probs = model.probabilities(features(vecs, statements))
    except Exception as exc:  # cannot decide: hold it
        return Finding(
            "quarantine",
            f"its source trajectory {trajectory.id} could not be checked for planted "
            f"instructions ({type(exc).__name__})",
            "provenance",
            "trust",
        )
    risk = 1.0 - probs[:, model.classes.index(BENIGN)]
    i = int(np.argmax(risk))
    if float(risk[i]) >= settings.vetting.reject_score:
        return _finding(trajectory, orders[i], float(risk[i]))
    return None


def _finding(trajectory: Trajectory, sentence: str, score: float | None) -> Finding:
    return Finding(
        "quarantine",
        f"distilled from trajectory {trajectory.id}, whose tool results carry instructions "
        "addressed to the model (a planted instruction could have become this rule)",
        "provenance",
        "trust",
        sentence.strip()[:300],
        score,
    )
