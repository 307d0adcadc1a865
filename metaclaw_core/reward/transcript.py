"""A trajectory as bounded, redacted text: what the judge and the evolver are shown.

Secrets are redacted again here (capture redaction can be switched off, and feedback texts
never went through it); the injected skills block is dropped from the system prompt (the
judge should judge the answer, the evolver sees the skill names instead).
"""

from __future__ import annotations

from metaclaw_core.models import Message, Trajectory, strip_injection
from metaclaw_core.redaction import redact_text

SYSTEM_CHARS = 600


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters; a cut is marked so the reader knows text is missing."""
    text = text.strip()
    if len(text) <= limit:
        return text
    if limit < 40:
        return text[:limit]
    head = int(limit * 0.7)
    tail = limit - head - 20
    return f"{text[:head]} […cut {len(text) - head - tail} chars…] {text[-tail:]}"


def safe(text: str) -> str:
    return redact_text(text)[0]


def _message_line(m: Message, limit: int) -> str:
    parts = [m.content]
    parts += [f"(tool call {c.name}({c.arguments}))" for c in m.tool_calls]
    body = " ".join(p for p in parts if p)
    return f"[{m.role}] {clip(safe(body), limit)}"


def render_transcript(t: Trajectory, max_chars: int, *, include_answer: bool = True) -> str:
    """Task, the latest turns that fit, the answer and the error, within ``max_chars``."""
    per_message = max(120, max_chars // 6)
    head: list[str] = []
    if t.query:
        head.append(f"Task: {clip(safe(t.query), min(600, per_message * 2))}")
    system = next((m for m in t.messages if m.role == "system"), None)
    if system is not None and strip_injection(system.content).strip():
        head.append(
            f"System prompt (start): {clip(safe(strip_injection(system.content)), SYSTEM_CHARS)}"
        )
    if t.injected_skills:
        head.append(f"Skills injected into this call: {', '.join(t.injected_skills)}")
    tail: list[str] = []
    if include_answer:
        out = t.output.text
        calls = " ".join(f"(tool call {c.name}({c.arguments}))" for c in t.output.tool_calls)
        answer = " ".join(p for p in (out, calls) if p) or "(empty)"
        tail.append(f"Answer: {clip(safe(answer), per_message * 2)}")
    if t.error:
        tail.append(f"Error reported by the host: {clip(safe(t.error), 400)}")
    budget = max_chars - sum(len(x) + 1 for x in head + tail)
    turns: list[str] = []
    for m in reversed([m for m in t.messages if m.role != "system"]):
        line = _message_line(m, per_message)
        if budget - len(line) - 1 < 0:
            if not turns:
                turns.append(line[: max(budget, 80)])
            break
        turns.append(line)
        budget -= len(line) + 1
    turns.reverse()
    convo = ["Conversation (latest turns):", *turns] if turns else []
    return "\n".join([*head, *convo, *tail])[: max_chars + 200]
