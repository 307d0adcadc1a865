"""metaclaw-llamaindex: skills into a query engine's context, its LLM calls captured.

``instrument(engine)`` captures LLM calls (with the query they served) through LlamaIndex's
instrumentation; ``SkillsPostprocessor(engine)`` adds the skills that fit each query to the
context (``index.as_query_engine(node_postprocessors=[SkillsPostprocessor(engine)])``).
"""

from metaclaw_llamaindex._instrumentation import MetaClawInstrumentation, instrument
from metaclaw_llamaindex._postprocessor import (
    SKILLS_NODE_MARK,
    SkillsInjectedEvent,
    SkillsPostprocessor,
)

__all__ = [
    "SKILLS_NODE_MARK",
    "MetaClawInstrumentation",
    "SkillsInjectedEvent",
    "SkillsPostprocessor",
    "instrument",
]
