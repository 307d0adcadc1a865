"""Moved to :mod:`metaclaw_core.wire.common` (re-exported here)."""

from __future__ import annotations

from metaclaw_core.wire.common import *  # noqa: F403
