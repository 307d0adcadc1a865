"""metaclaw-core: make a deployed LLM agent learn from its own traffic.

The integrations import only what is exported here.
"""

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
from metaclaw_core.hookspecs import hookimpl
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
from metaclaw_core.skills.library import GenerationConflictError, SkillRejectedError

__version__ = "0.1.0"

__all__ = [
    "CallContext",
    "ConfigError",
    "EmbedderError",
    "Generation",
    "GenerationConflictError",
    "Injection",
    "Message",
    "MetaClaw",
    "MetaClawError",
    "ModelOutput",
    "Reward",
    "ScoredSkill",
    "Settings",
    "Skill",
    "SkillFormatError",
    "SkillNotFoundError",
    "SkillRejectedError",
    "StoreError",
    "ToolCall",
    "Trajectory",
    "__version__",
    "hookimpl",
]
