"""Building a trajectory record from a call: copy, cap, redact and serialise, in one pass.

``after_call`` runs inside the host's agent right after the model answered, on caches that
went cold while it waited, so what counts is how many objects the call touches. This builds
plain dicts, redacts as it copies, and serialises the journal line in one orjson call: no
pydantic object on the hot path (docs/benchmarks.md, "The lean capture", compares it with the
standard json encoder and pydantic's dumps). The :class:`Trajectory` is built later, off the
hot path, from the line (:attr:`EncodedTrajectory.trajectory`).

When the host registers its own ``metaclaw_prepare_trajectory``, the engine builds that
Trajectory on the hot path after all (already redacted), calls the plugins, and re-encodes
what they left: plugins see the documented contract.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from metaclaw_core.config import CaptureSettings
from metaclaw_core.embeddings import Vector
from metaclaw_core.models import Message, ModelOutput, ToolCall
from metaclaw_core.redaction import redact_text
from metaclaw_core.store.records import EncodedTrajectory, encode_parts

TRUNCATION_MARK = "…[truncated {n} chars]"


def _cap(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    cut = len(text) - limit
    return text[:limit] + TRUNCATION_MARK.format(n=cut), True


class _Copier:
    """Caps and redacts the strings of one call, counting what it changed."""

    __slots__ = ("capped", "limit", "redact", "redacted")

    def __init__(self, limit: int, redact: bool) -> None:
        self.limit = limit
        self.redact = redact
        self.redacted = 0
        self.capped = False

    def text(self, value: str) -> str:
        if len(value) > self.limit:
            value, _ = _cap(value, self.limit)
            self.capped = True
        if self.redact:
            value, n = redact_text(value)
            self.redacted += n
        return value

    def calls(self, calls: list[ToolCall]) -> list[dict[str, Any]]:
        return [{"id": c.id, "name": c.name, "arguments": self.text(c.arguments)} for c in calls]


def message_dicts(
    messages: list[Message], caps: CaptureSettings, copier: _Copier
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Plain copies of the messages (the host's objects are never touched), capped to the
    limits and redacted. Returns them and what was cut (empty when nothing was)."""
    cut: dict[str, int] = {}
    msgs = messages
    if len(msgs) > caps.max_messages:
        # Keep a leading system prompt and the most recent turns.
        head = msgs[:1] if msgs and msgs[0].role == "system" else []
        tail = msgs[-(caps.max_messages - len(head)) :]
        cut["dropped_messages"] = len(msgs) - len(head) - len(tail)
        msgs = head + tail
    out: list[dict[str, Any]] = []
    total = 0
    capped = 0
    for m in msgs:
        copier.capped = False
        content = copier.text(m.content)
        calls = copier.calls(m.tool_calls) if m.tool_calls else []
        capped += copier.capped
        total += len(content)
        out.append(
            {
                "role": m.role,
                "content": content,
                "name": m.name,
                "tool_calls": calls,
                "tool_call_id": m.tool_call_id,
            }
        )
    if capped:
        cut["capped_messages"] = capped
    if total > caps.max_total_chars:
        # Shorten the oldest non-system messages first: the latest turns say most.
        for i, d in enumerate(out):
            if total <= caps.max_total_chars:
                break
            if d["role"] == "system" and i == 0:
                continue
            text = d["content"]
            new, was = _cap(text, max(0, len(text) - (total - caps.max_total_chars)))
            if was:
                total -= len(text) - len(new)
                d["content"] = new
                cut["shortened_for_total"] = cut.get("shortened_for_total", 0) + 1
    return out, cut


def output_dict(output: ModelOutput | str | None, copier: _Copier) -> dict[str, Any]:
    if output is None:
        output = ""
    if isinstance(output, str):
        return {"text": copier.text(output), "tool_calls": [], "finish_reason": None, "usage": {}}
    return {
        "text": copier.text(output.text),
        "tool_calls": copier.calls(output.tool_calls) if output.tool_calls else [],
        "finish_reason": output.finish_reason,
        "usage": dict(output.usage),
    }


def encode_call(
    *,
    trajectory_id: str,
    created_at: datetime,
    messages: list[Message],
    output: ModelOutput | str | None,
    fields: dict[str, Any],
    metadata: dict[str, Any],
    vector: Vector | None,
    caps: CaptureSettings,
    redact: bool,
    embedder: str | None = None,
    repair: bool = True,
) -> EncodedTrajectory:
    """The journal record of one call.

    ``fields`` are the trajectory's scalar fields (session_id, framework, model,
    injected_skills, generation, query, latency_ms, error, outcome); ``query`` and ``error``
    are redacted here like the messages. A string that cannot be written as UTF-8 (a lone
    surrogate, from bytes decoded with ``surrogateescape``) is replaced, and metadata JSON
    cannot hold is written as text; the record then says so in ``metadata["sanitized"]``,
    rather than the call being lost.
    """
    try:
        copier = _Copier(caps.max_message_chars, redact)
        msgs, cut = message_dicts(messages, caps, copier)
        copier.capped = False
        out = output_dict(output, copier)
        if copier.capped:
            cut["capped_output"] = 1
        head = fields  # the caller's fresh dict, taken over
        head["id"] = trajectory_id
        head["created_at"] = created_at
        head["truncated"] = bool(cut)
        if redact:
            head["query"] = copier.text(head.get("query") or "")
            if head.get("error"):
                head["error"] = copier.text(head["error"])
        meta = dict(metadata)
        if cut:
            meta["truncated"] = cut
        if copier.redacted:
            meta["redacted"] = meta.get("redacted", 0) + copier.redacted
        return encode_parts(head, msgs, out, meta, vector, embedder)
    except (UnicodeEncodeError, orjson.JSONEncodeError):
        if not repair:
            raise
    clean = _sanitize
    return encode_call(
        trajectory_id=trajectory_id,
        created_at=created_at,
        messages=[Message.model_validate(clean(m.model_dump())) for m in messages],
        output=(
            ModelOutput.model_validate(clean(output.model_dump()))
            if isinstance(output, ModelOutput)
            else clean(output)
        ),
        fields=clean(fields),
        metadata={**clean(metadata), "sanitized": True},
        vector=vector,
        caps=caps,
        redact=redact,
        embedder=embedder,
        repair=False,
    )


def _sanitize(obj: Any) -> Any:
    """``obj`` made writable: lone surrogates replaced, and what JSON-by-orjson cannot hold
    (integers beyond 64 bits, keys that are not strings or numbers) written as text."""
    if isinstance(obj, str):
        return obj.encode("utf-8", "replace").decode("utf-8")
    if isinstance(obj, dict):
        return {
            (_sanitize(k) if isinstance(k, str) else str(k)): _sanitize(v) for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [_sanitize(v) for v in obj]
    if isinstance(obj, int) and not isinstance(obj, bool) and not -(2**63) <= obj < 2**64:
        return str(obj)
    return obj
