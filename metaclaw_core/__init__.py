"""metaclaw-core: make a deployed LLM agent learn from its own traffic.

The integrations import only what is exported here. Each name is resolved on first use
(PEP 562), so ``import metaclaw_core`` costs almost nothing and a name costs only the modules
it needs: ``Skill`` brings pydantic, ``MetaClaw`` the engine and its settings, and neither
brings the OpenAI SDK, LanceDB/pyarrow, FastAPI or torch (those load where they are used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaclaw_core.lazy import lazy_exports

if TYPE_CHECKING:
    from metaclaw_core.call import ModelCall
    from metaclaw_core.config import Settings
    from metaclaw_core.engine import MetaClaw
    from metaclaw_core.errors import (
        ConfigError,
        EmbedderError,
        MetaClawError,
        SkillFormatError,
        SkillNotFoundError,
        StoreError,
    )
    from metaclaw_core.evolve.report import Candidate, EvolutionReport
    from metaclaw_core.faults import record_fault
    from metaclaw_core.hookspecs import hookimpl
    from metaclaw_core.messages import message_key, normalise_role, tool_arguments, tool_call
    from metaclaw_core.models import (
        CallContext,
        Generation,
        Injection,
        Message,
        ModelOutput,
        Reward,
        ScoredSkill,
        Skill,
        ToolCall,
        Trajectory,
    )
    from metaclaw_core.schedule.signals import IdleSignal, LastCallSource, SignalReading
    from metaclaw_core.skills.index import SkillSnapshot
    from metaclaw_core.skills.library import (
        GenerationConflictError,
        ImportReport,
        SkillQuarantinedError,
        SkillRejectedError,
    )
    from metaclaw_core.skills.verdict import Finding, Review
    from metaclaw_core.skills.vetting import VetContext
    from metaclaw_core.train.backend import TrainingBackend
    from metaclaw_core.vectors import Embedder, Vector

__version__ = "0.1.0"

# public name -> the module that defines it
_HOMES = {
    "Settings": "metaclaw_core.config",
    "ModelCall": "metaclaw_core.call",
    "MetaClaw": "metaclaw_core.engine",
    "ConfigError": "metaclaw_core.errors",
    "EmbedderError": "metaclaw_core.errors",
    "MetaClawError": "metaclaw_core.errors",
    "SkillFormatError": "metaclaw_core.errors",
    "SkillNotFoundError": "metaclaw_core.errors",
    "StoreError": "metaclaw_core.errors",
    "hookimpl": "metaclaw_core.hookspecs",
    "record_fault": "metaclaw_core.faults",
    # what the adapters share: role and tool-call normalisation
    "message_key": "metaclaw_core.messages",
    "normalise_role": "metaclaw_core.messages",
    "tool_arguments": "metaclaw_core.messages",
    "tool_call": "metaclaw_core.messages",
    "CallContext": "metaclaw_core.models",
    "Generation": "metaclaw_core.models",
    "Injection": "metaclaw_core.models",
    "Message": "metaclaw_core.models",
    "ModelOutput": "metaclaw_core.models",
    "Reward": "metaclaw_core.models",
    "ScoredSkill": "metaclaw_core.models",
    "Skill": "metaclaw_core.models",
    "ToolCall": "metaclaw_core.models",
    "Trajectory": "metaclaw_core.models",
    "GenerationConflictError": "metaclaw_core.skills.library",
    "SkillRejectedError": "metaclaw_core.skills.library",
    "SkillQuarantinedError": "metaclaw_core.skills.library",
    "ImportReport": "metaclaw_core.skills.library",
    "Finding": "metaclaw_core.skills.verdict",
    "Review": "metaclaw_core.skills.verdict",
    # the types the hooks carry (metaclaw_core.hookspecs), for plugin authors
    "Candidate": "metaclaw_core.evolve.report",
    "EvolutionReport": "metaclaw_core.evolve.report",
    "IdleSignal": "metaclaw_core.schedule.signals",
    "LastCallSource": "metaclaw_core.schedule.signals",
    "SignalReading": "metaclaw_core.schedule.signals",
    "SkillSnapshot": "metaclaw_core.skills.index",
    "VetContext": "metaclaw_core.skills.vetting",
    "TrainingBackend": "metaclaw_core.train.backend",
    "Embedder": "metaclaw_core.vectors",
    "Vector": "metaclaw_core.vectors",
}

__all__ = [
    "CallContext",
    "Candidate",
    "ConfigError",
    "Embedder",
    "EmbedderError",
    "EvolutionReport",
    "Finding",
    "Generation",
    "GenerationConflictError",
    "IdleSignal",
    "ImportReport",
    "Injection",
    "LastCallSource",
    "Message",
    "MetaClaw",
    "MetaClawError",
    "ModelCall",
    "ModelOutput",
    "Review",
    "Reward",
    "ScoredSkill",
    "Settings",
    "SignalReading",
    "Skill",
    "SkillFormatError",
    "SkillNotFoundError",
    "SkillQuarantinedError",
    "SkillRejectedError",
    "SkillSnapshot",
    "StoreError",
    "ToolCall",
    "TrainingBackend",
    "Trajectory",
    "Vector",
    "VetContext",
    "__version__",
    "hookimpl",
    "message_key",
    "normalise_role",
    "record_fault",
    "tool_arguments",
    "tool_call",
]


__getattr__ = lazy_exports(__name__, _HOMES)


def __dir__() -> list[str]:
    return sorted(__all__)
