"""Built-in vetting: checks every skill must pass before it can go live.

The block markers could break out of the injected block; a real secret in a skill would be
injected into every prompt it fits. Deeper checks (structure, patterns, meaning, duplicates,
conflicts) are further plugins of the same hook.
"""

from __future__ import annotations

import base64
import binascii
import re

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import BLOCK_END, BLOCK_START, Skill
from metaclaw_core.redaction import find_secrets
from metaclaw_core.skills.verdict import Finding

# "password = os.environ[...]", "api_key: <your key>", "token=${TOKEN}",
# "DB_PASSWORD=op://vault/item/password", a file path ("NOPASSWD: /usr/bin/systemctl" in a
# sudoers line): a reference or a placeholder, not a secret
_NOT_A_VALUE = re.compile(
    r"[\[\](){}<>$%]|\benv\b|environ|getenv|secret[s]?\.|vault|example|changeme|placeholder|"
    r"your[_-]|xxx|\*\*\*|\.\.\.|redacted|dummy|sample|local|dev|test|"
    r"^[a-z][\w+.-]*://|^~?/",
    re.I,
)


# Samples that vendors publish in their documentation: AWS's keys end in "EXAMPLE"
# (AKIAIOSFODNN7EXAMPLE), jwt.io's token names "John Doe", subject "1234567890"
_SAMPLE_CLAIMS = re.compile(r"John Doe|Jane Doe|\b1234567890\b|example", re.I)


def _documented_sample(kind: str, match: str) -> bool:
    if "EXAMPLE" in match:
        return True
    if kind != "jwt":
        return False
    parts = match.split(".")
    if len(parts) < 2:
        return False
    try:
        claims = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
    except (binascii.Error, ValueError):
        return False
    return _SAMPLE_CLAIMS.search(claims.decode("utf-8", "replace")) is not None


def _in_prose(text: str, match: str, value: str) -> bool:
    """Whether "password: change it from the real site" is a label in a sentence: a value of
    plain lower-case letters that more words follow is a word, not a secret."""
    if not (value.isalpha() and value.islower()):
        return False
    return re.search(re.escape(match) + r"\s+[a-z]+\b", text) is not None


@hookimpl(trylast=True)
def metaclaw_vet_skill(skill: Skill, live: list[Skill], settings: Settings) -> list[Finding]:
    text = f"{skill.description}\n{skill.body}"
    out: list[Finding] = []
    if BLOCK_START in text or BLOCK_END in text:
        out.append(
            Finding(
                "reject",
                "contains the metaclaw block markers (it could break out of the injected block)",
                "structure",
                "structure",
            )
        )
    for kind, match in find_secrets(text):
        if _documented_sample(kind, match):
            continue
        if kind != "assigned-secret":
            out.append(
                Finding(
                    "reject",
                    f"contains what looks like a secret ({kind}); a skill is injected into "
                    "every prompt it fits",
                    "secrets",
                    "credentials",
                )
            )
            break
        value = re.split(r"[:=]", match, maxsplit=1)[-1].strip(" \"'")
        if not _NOT_A_VALUE.search(value) and not _in_prose(text, match, value):
            out.append(
                Finding(
                    "quarantine",
                    "assigns what may be a real password or token",
                    "secrets",
                    "credentials",
                    match.split("=")[0].split(":")[0][:40] + " = …",
                )
            )
            break
    return out
