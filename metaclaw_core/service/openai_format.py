"""Moved to :mod:`metaclaw_core.wire.openai_format` (re-exported here)."""

from __future__ import annotations

from metaclaw_core.wire.openai_format import *  # noqa: F403
