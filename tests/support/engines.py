"""Helpers for building engines in tests (importable from any test module)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaclaw_core import Settings, hookimpl


class SharedEmbedder:
    """A plugin that hands every engine the session's embedder (through the real hook)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    @hookimpl
    def metaclaw_make_embedder(self, settings: Settings) -> Any:
        return self.embedder


def make_settings(home: Path, **overrides: Any) -> Settings:
    settings = Settings(home=home, load_entrypoints=False)
    settings.store.flush_interval_s = 0.02
    settings.store.retry_interval_s = 0.1
    settings.store.refresh_interval_s = 0.2
    # The randomised holdout would withhold a new learned skill from half its first calls;
    # tests of other behaviour expect it injected. Tests of the holdout turn it on.
    settings.holdout.enabled = False
    for dotted, value in overrides.items():
        section, _, key = dotted.partition("__")
        if key:
            setattr(getattr(settings, section), key, value)
        else:
            setattr(settings, section, value)
    return settings
