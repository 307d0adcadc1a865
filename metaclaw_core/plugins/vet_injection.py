"""Built-in vetting: prompt-injection screening of every skill, whatever its source.

A skill is injected into every future prompt it fits, so a poisoned one is a persistent
injection (the upstream evolver had exactly this hole). Refused: instructions against the
model's rules, role or system-prompt smuggling, secret exfiltration, URLs to hosts not in
``vetting.allowed_url_hosts``, dangerous shell commands, and invisible characters.
"""

from __future__ import annotations

import re

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Skill

_I = re.IGNORECASE | re.MULTILINE

OVERRIDE = [
    re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass|circumvent)\b[^.\n]{0,40}?"
        r"\b(?:previous|prior|above|earlier|preceding|all|any|your|the|system|developer|safety)"
        r"\b[^.\n]{0,30}?\b(?:instructions?|rules?|prompts?|guidelines?|polic(?:y|ies)|"
        r"guardrails?|restrictions?|filters?|messages?|constraints?)\b",
        _I,
    ),
    re.compile(r"\byou are now\b|\bfrom now on,? you (?:are|will|must)\b", _I),
    re.compile(
        r"\b(?:developer|god|dan|unrestricted|jailbreak)\s+mode\b|\bjailbr(?:eak|oken)\b", _I
    ),
    re.compile(r"\bnew (?:system )?(?:prompt|instructions)\b", _I),
    re.compile(
        r"\b(?:do not|don't|never) (?:tell|inform|alert|notify|let) the user\b|"
        r"\bwithout (?:telling|informing|notifying) the user\b|\bsecretly\b",
        _I,
    ),
    re.compile(
        r"\b(?:reveal|print|repeat|output|show|dump|leak)\b[^.\n]{0,20}\b(?:your|the)\s+"
        r"(?:system prompt|hidden instructions|instructions above)",
        _I,
    ),
]
ROLE_TAGS = re.compile(
    r"<\|?(?:im_start|im_end|endoftext|system|eot_id|start_header_id)\|?>|</?system>|"
    r"\[/?INST\]|<<SYS>>|^\s*(?:system|assistant|developer)\s*:",
    _I,
)
SECRET = re.compile(
    r"\b(?:api[ _-]?keys?|secret[ _-]?keys?|secrets|passwords?|passwd|credentials?|"
    r"private[ _-]?keys?|ssh[ _-]?keys?|(?:access|auth|api|bearer|session|refresh)[ _-]?tokens?|"
    r"environment variables|env vars|cookies)\b|\.env\b|id_rsa|/etc/(?:passwd|shadow)",
    _I,
)
SEND = re.compile(
    r"\b(?:send|sends|post|upload|transmit|forward|e-?mail|exfiltrat\w*|leak|share|reveal|"
    r"disclose|include|append|embed|paste|print|output|echo|copy|write|read|cat)\b",
    _I,
)
NEGATED = re.compile(r"\b(?:never|not|no|don't|do not|must not|mustn't|avoid|refuse|without)\b", _I)
URL = re.compile(
    r"\b(?:https?|ftp|wss?|file|data|javascript):[^\s<>()\"']+|\bwww\.[^\s<>()\"']+|"
    r"\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:com|net|org|io|ru|cn|xyz|top|info|biz|"
    r"example|site|online|click|link)\b(?![.-]?[a-z0-9])",
    _I,
)
EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
SHELL = [
    re.compile(r"\b(?:curl|wget|nc|ncat|netcat|socat|telnet|scp|rsync|ftp)\s+[-\w$\"'/:.]", _I),
    re.compile(r"\|\s*(?:ba|z|k|da)?sh\b|\|\s*(?:python3?|perl|ruby|node)\b", _I),
    re.compile(r"\b(?:bash|sh|zsh|powershell|pwsh|cmd(?:\.exe)?)\s+(?:-c|/c|-enc\w*|-e)\b", _I),
    re.compile(r"\brm\s+-[a-z]*(?:rf|fr)\b|\brm\s+-[a-z]*r[a-z]*\s+/", _I),
    re.compile(r"\b(?:eval|exec)\s*\(|\bos\.system\b|\bsubprocess\.|\b__import__\b", _I),
    re.compile(r"\bchmod\s+(?:\+x|[0-7]{3,4})\b|\bsudo\s+\S|\bmkfifo\b|\bcrontab\s+-", _I),
    re.compile(r"\bbase64\s+(?:-d|--decode)\b|/dev/tcp/|\bdd\s+if=|\bnohup\b", _I),
    re.compile(r"\$\([^)]{2,}\)|`[^`]*\b(?:curl|wget|bash|sh|rm|nc|eval)\b[^`]*`", _I),
]
INVISIBLE = re.compile(
    "[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)


def _host_allowed(url: str, allowed: list[str]) -> bool:
    host = re.sub(r"^[a-z]+:(?://)?", "", url.lower()).split("/")[0].split(":")[0]
    host = host.removeprefix("www.")
    return any(host == a.lower() or host.endswith("." + a.lower()) for a in allowed)


def screen(text: str, allowed_hosts: list[str]) -> str | None:
    """Why ``text`` looks like a prompt injection, or None."""
    if INVISIBLE.search(text):
        return "contains invisible or direction-changing characters (text smuggling)"
    for pattern in OVERRIDE:
        m = pattern.search(text)
        if m:
            return f"tells the model to set aside its rules ({m.group(0)[:60]!r})"
    m = ROLE_TAGS.search(text)
    if m:
        return f"contains a role or system-prompt marker ({m.group(0).strip()[:30]!r})"
    for sentence in re.split(r"(?<=[.!?;])\s+|\n+", text):
        secret = SECRET.search(sentence)
        verb = SEND.search(sentence)
        if secret and verb and not NEGATED.search(sentence):
            return (
                f"asks to handle secrets ({secret.group(0)!r} with {verb.group(0)!r}): exfiltration"
            )
    m = EMAIL.search(text)
    if m:
        return f"contains an e-mail address ({m.group(0)[:60]!r}): a possible exfiltration target"
    for m in URL.finditer(text):
        if not _host_allowed(m.group(0), allowed_hosts):
            return (
                f"contains a link to {m.group(0)[:60]!r}; skills may only link to hosts in "
                "vetting.allowed_url_hosts"
            )
    for pattern in SHELL:
        m = pattern.search(text)
        if m:
            return f"contains a shell command that fetches, runs or destroys ({m.group(0)[:60]!r})"
    return None


@hookimpl
def metaclaw_vet_skill(skill: Skill, live: list[Skill], settings: Settings) -> str | None:
    if not settings.vetting.screen_injection:
        return None
    found = screen(
        f"{skill.name}\n{skill.description}\n{skill.category or ''}\n{skill.body}",
        settings.vetting.allowed_url_hosts,
    )
    return f"prompt injection: {found}" if found else None
