"""Building a trajectory from a call: copy what the model saw, cap what is too big."""

from __future__ import annotations

from metaclaw_core.config import CaptureSettings
from metaclaw_core.models import Message, ModelOutput, ToolCall

TRUNCATION_MARK = "…[truncated {n} chars]"


def _cap(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    cut = len(text) - limit
    return text[:limit] + TRUNCATION_MARK.format(n=cut), True


def _copy_calls(calls: list[ToolCall], limit: int) -> tuple[list[ToolCall], bool]:
    out, cut = [], False
    for c in calls:
        args, was = _cap(c.arguments, limit)
        cut |= was
        out.append(ToolCall.model_construct(id=c.id, name=c.name, arguments=args))
    return out, cut


def copy_messages(
    messages: list[Message], caps: CaptureSettings
) -> tuple[list[Message], dict[str, int]]:
    """Fresh copies (redaction must not touch the host's objects), capped to the limits.

    Returns the copies and a dict describing what was cut (empty when nothing was).
    """
    cut: dict[str, int] = {}
    msgs = messages
    if len(msgs) > caps.max_messages:
        # Keep a leading system prompt and the most recent turns.
        head = msgs[:1] if msgs and msgs[0].role == "system" else []
        tail = msgs[-(caps.max_messages - len(head)) :]
        cut["dropped_messages"] = len(msgs) - len(head) - len(tail)
        msgs = head + tail
    out: list[Message] = []
    total = 0
    for m in msgs:
        content, was = _cap(m.content, caps.max_message_chars)
        calls, calls_cut = _copy_calls(m.tool_calls, caps.max_message_chars)
        if was or calls_cut:
            cut["capped_messages"] = cut.get("capped_messages", 0) + 1
        total += len(content)
        out.append(
            Message.model_construct(
                role=m.role,
                content=content,
                name=m.name,
                tool_calls=calls,
                tool_call_id=m.tool_call_id,
            )
        )
    if total > caps.max_total_chars:
        # Shorten the oldest non-system messages first: the latest turns say most.
        for i, m in enumerate(out):
            if total <= caps.max_total_chars:
                break
            if m.role == "system" and i == 0:
                continue
            keep = max(0, len(m.content) - (total - caps.max_total_chars))
            new, was = _cap(m.content, keep)
            if was:
                total -= len(m.content) - len(new)
                m.content = new
                cut["shortened_for_total"] = cut.get("shortened_for_total", 0) + 1
    return out, cut


def copy_output(
    output: ModelOutput | str | None, caps: CaptureSettings
) -> tuple[ModelOutput, bool]:
    if output is None:
        return ModelOutput(), False
    if isinstance(output, str):
        text, was = _cap(output, caps.max_message_chars)
        return ModelOutput.model_construct(
            text=text, tool_calls=[], finish_reason=None, usage={}
        ), was
    text, was = _cap(output.text, caps.max_message_chars)
    calls, calls_cut = _copy_calls(output.tool_calls, caps.max_message_chars)
    return (
        ModelOutput.model_construct(
            text=text,
            tool_calls=calls,
            finish_reason=output.finish_reason,
            usage=dict(output.usage),
        ),
        was or calls_cut,
    )
