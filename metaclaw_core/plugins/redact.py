"""Built-in redaction plugin: turns on the secret redaction of :mod:`metaclaw_core.redaction`.

Registered as ``builtin:redact``, it makes :mod:`metaclaw_core.capture` redact every call while
copying it, and redacts the trajectory a host's own prepare plugin sees (the hook below). The
other names are re-exported for code that imported them from here.
"""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Trajectory
from metaclaw_core.redaction import (
    PATTERNS,
    TRIGGERS,
    find_secrets,
    redact_text,
    redact_trajectory,
)

__all__ = [
    "PATTERNS",
    "TRIGGERS",
    "find_secrets",
    "metaclaw_prepare_trajectory",
    "redact_text",
    "redact_trajectory",
]


@hookimpl(trylast=True)
def metaclaw_prepare_trajectory(trajectory: Trajectory, settings: Settings) -> None:
    if settings.capture.redact_secrets:
        n = redact_trajectory(trajectory)
        if n:
            trajectory.metadata["redacted"] = trajectory.metadata.get("redacted", 0) + n
