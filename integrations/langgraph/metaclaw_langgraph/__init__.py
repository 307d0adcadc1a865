"""metaclaw-langgraph: skills into a LangGraph graph's state, its model node captured.

``mc = MetaClawGraph(engine)``; ``builder.add_node("skills", mc.skills_node)`` before the
model node; ``builder.add_node("model", mc.capture(call_model))``.
"""

from metaclaw_langgraph._nodes import SKILLS_MESSAGE_ID, MetaClawGraph, skills_message

__all__ = ["SKILLS_MESSAGE_ID", "MetaClawGraph", "skills_message"]
