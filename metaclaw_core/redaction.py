"""Secret redaction: the patterns, and the functions capture, the reward transcript and
vetting use so secrets never reach the store, the spool, or an evolver.

Patterns, each behind a cheap literal trigger, applied to every message, tool call, output,
query and error before the trajectory is journaled: by :mod:`metaclaw_core.capture` while it
copies the call (the built-in plugin ``builtin:redact``, :mod:`metaclaw_core.plugins.redact`,
is what turns that on), and by that plugin's hook on the trajectory a host's own prepare
plugin sees. Replacements name the kind of secret (``[REDACTED:openai-key]``).
"""

from __future__ import annotations

import re

from metaclaw_core.models import Trajectory

PATTERNS: dict[str, str] = {
    "private-key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    "anthropic-key": r"\bsk-ant-[A-Za-z0-9_\-]{20,}",
    "openai-key": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
    "tinker-key": r"\btml-[A-Za-z0-9_\-]{16,}",
    "aws-access-key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github-token": r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
    "slack-token": r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    "google-api-key": r"\bAIza[0-9A-Za-z_\-]{35}",
    "huggingface-token": r"\bhf_[A-Za-z0-9]{30,}",
    "jwt": r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    "bearer-token": r"(?P<bearer_prefix>(?i:bearer)\s+)[A-Za-z0-9._~+/\-]{20,}=*",
    "assigned-secret": (
        r"(?P<assigned_prefix>(?i:password|passwd|secret|api[_-]?key|access[_-]?token"
        r"|auth[_-]?token)[\"']?\s{0,3}[:=]\s{0,3}[\"']?)[^\s\"',;]{6,}"
    ),
}
# Lower-case literals, one of which every match of the pattern contains. Checking them with
# `in` is far cheaper than running every pattern over every text (benchmarks/hot_path.py).
TRIGGERS: dict[str, tuple[str, ...]] = {
    "private-key": ("private key-----",),
    "anthropic-key": ("sk-ant-",),
    "openai-key": ("sk-",),
    "tinker-key": ("tml-",),
    "aws-access-key": ("akia", "asia"),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "slack-token": ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"),
    "google-api-key": ("aiza",),
    "huggingface-token": ("hf_",),
    "jwt": ("eyj",),
    "bearer-token": ("bearer",),
    "assigned-secret": ("passw", "secret", "key", "token"),
}
_COMPILED = {kind: re.compile(p) for kind, p in PATTERNS.items()}


# Conversations resend their history every turn: most texts were seen on an earlier call.
_SEEN: dict[str, tuple[str, int]] = {}
_SEEN_MAX = 4096


def redact_text(text: str) -> tuple[str, int]:
    """Return the text with secrets replaced, and how many were replaced."""
    if len(text) < 8:
        return text, 0
    hit = _SEEN.get(text)
    if hit is not None:
        return hit
    result = _redact(text)
    if len(_SEEN) >= _SEEN_MAX:
        _SEEN.clear()  # crude but O(1) and lock-free; the next calls refill it
    _SEEN[text] = result
    return result


def _redact(text: str) -> tuple[str, int]:
    lower = text.lower()
    count = 0
    for kind, triggers in TRIGGERS.items():
        if not any(t in lower for t in triggers):
            continue

        def sub(m: re.Match[str], kind: str = kind) -> str:
            nonlocal count
            count += 1
            groups = m.groupdict()
            prefix = groups.get("bearer_prefix") or groups.get("assigned_prefix") or ""
            return f"{prefix}[REDACTED:{kind}]"

        new = _COMPILED[kind].sub(sub, text)
        if new is not text and new != text:
            text = new
            lower = text.lower()
    return text, count


def find_secrets(text: str) -> list[tuple[str, str]]:
    """(kind, matched text) of every secret-looking span in ``text`` (for vetting)."""
    lower = text.lower()
    found: list[tuple[str, str]] = []
    for kind, triggers in TRIGGERS.items():
        if any(t in lower for t in triggers):
            found += [(kind, m.group(0)) for m in _COMPILED[kind].finditer(text)]
    return found


def redact_trajectory(t: Trajectory) -> int:
    """Redact every text field of ``t`` in place; return the number of secrets replaced."""
    total = 0
    for m in t.messages:
        m.content, n = redact_text(m.content)
        total += n
        for call in m.tool_calls:
            call.arguments, n = redact_text(call.arguments)
            total += n
    t.output.text, n = redact_text(t.output.text)
    total += n
    for call in t.output.tool_calls:
        call.arguments, n = redact_text(call.arguments)
        total += n
    t.query, n = redact_text(t.query)
    total += n
    if t.error:
        t.error, n = redact_text(t.error)
        total += n
    return total
