"""Built-in training backends: ``local`` (transformers + PEFT) and ``tinker`` (Tinker SDK).

Heavy imports (torch, transformers, peft, tinker) happen only when a backend is built.
"""

from __future__ import annotations

from metaclaw_core.config import Settings
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.train.backend import TrainingBackend


@hookimpl(trylast=True)
def metaclaw_training_backend(settings: Settings) -> TrainingBackend | None:
    name = settings.train.backend
    if name == "local":
        from metaclaw_core.train.local_backend import LocalBackend

        return LocalBackend.from_settings(settings)
    if name == "tinker":
        from metaclaw_core.train.tinker_backend import TinkerBackend

        return TinkerBackend.from_settings(settings)
    return None
