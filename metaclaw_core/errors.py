"""The exception hierarchy: one base, named for what went wrong, with messages a user can act on."""

from __future__ import annotations

from pathlib import Path


class MetaClawError(Exception):
    """Base class of every error metaclaw-core raises on purpose."""


class ConfigError(MetaClawError):
    """The settings are invalid or incomplete."""


class SkillFormatError(MetaClawError):
    """A SKILL.md file (or a skill given in code) is malformed."""

    def __init__(self, message: str, *, path: Path | str | None = None, line: int | None = None):
        self.path = Path(path) if path is not None else None
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")


class SkillNotFoundError(MetaClawError):
    """No live skill has that name."""


class StoreError(MetaClawError):
    """The LanceDB store could not be opened, read or written."""


class EmbedderError(MetaClawError):
    """The sentence embedder could not be loaded or failed to embed."""
