"""Moved: :class:`VetContext` lives in :mod:`metaclaw_core.skills.vetting` (re-exported here)."""

from __future__ import annotations

from metaclaw_core.skills.vetting import VetContext

__all__ = ["VetContext"]
