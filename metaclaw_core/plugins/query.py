"""Built-in query extraction: the task text of a call, with envelopes removed.

Hosts wrap the user's words in envelopes (OpenClaw's ``[Mon 2026-11-30 02:55 UTC]`` stamp and
``Runtime: agent=… | session=…`` line, coding agents' tagged context sections such as
``<system-reminder>`` and ``<environment_context>``, tool dumps, our own block from earlier
turns). Embedding the envelope makes every turn look alike and retrieves the same skills
every time.
"""

from __future__ import annotations

import re

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import CallContext, strip_injection

_STAMP = re.compile(
    r"^\s*\[(?:[A-Z][a-z]{2} )?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?"
    r"(?: ?(?:UTC|GMT|Z|[+-]\d{2}:?\d{2}|[A-Z]{2,5}))?\]\s*"
)
_RUNTIME = re.compile(r"^\s*Runtime:\s.*$", re.MULTILINE)
# A host's context section: an element that opens at the start of a line and closes at the
# end of one (``<system-reminder>…</system-reminder>`` from Claude Code,
# ``<environment_context>…</environment_context>`` from Codex, ``<INSTRUCTIONS>``). Only
# machine-style tag names count (with ``-`` or ``_``, or all capitals), so a user's own
# ``<b>bold</b>`` line is kept.
_ENVELOPE = re.compile(
    r"^[ \t]*<(?P<tag>[A-Za-z][\w.:-]*)(?:\s[^>\n]*)?>.*?</(?P=tag)>[ \t]*$",
    re.DOTALL | re.MULTILINE,
)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\n(.*?)```", re.DOTALL)
_MAX_FENCE_CHARS = 400
# Messages a host adds after the user's own words (not the task): skip them.
_HOST_CONTEXT_PREFIXES = ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>",)
# A host's own prompt to go on after a retried model error or changed tools/permissions
# (OpenClaw 2026.9: "Continue the current task from the existing transcript, …"): the task
# is the user message before it.
_CONTINUATION_PREFIXES = ("Continue the current task",)


def _trim_fence(m: re.Match[str]) -> str:
    body = m.group(1)
    return body if len(body) <= _MAX_FENCE_CHARS else body[:_MAX_FENCE_CHARS]


def _host_section(m: re.Match[str]) -> str:
    tag = m.group("tag")
    machine = "-" in tag or "_" in tag or (len(tag) > 1 and tag.isupper())
    return "" if machine else m.group(0)


def clean_task_text(text: str, max_chars: int) -> str:
    """Strip envelopes and collapse whitespace; keep the first ``max_chars`` characters."""
    text = strip_injection(text)
    if "</" in text:
        text = _ENVELOPE.sub(_host_section, text)
    text = _STAMP.sub("", text, count=1)
    text = _RUNTIME.sub("", text)
    text = _FENCE.sub(_trim_fence, text)  # long dumps pasted in fences say little of the task
    text = " ".join(text.split())
    return text[:max_chars]


@hookimpl(trylast=True)
def metaclaw_extract_query(ctx: CallContext, settings: Settings) -> str:
    limit = settings.retrieval.max_query_chars
    task = clean_task_text(ctx.task, limit) if ctx.task else ""
    if task and not task.startswith(_CONTINUATION_PREFIXES):
        return task
    for msg in reversed(ctx.messages):
        if msg.role == "user":
            if msg.content.lstrip().startswith(_HOST_CONTEXT_PREFIXES):
                continue
            text = clean_task_text(msg.content, limit)
            if text and not text.startswith(_CONTINUATION_PREFIXES):
                return text
    return task  # only a continue prompt: better than nothing
