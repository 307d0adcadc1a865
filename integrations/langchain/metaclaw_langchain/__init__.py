"""metaclaw-langchain: skills into LangChain agents and chains, their runs captured.

* :class:`MetaClawMiddleware`: ``create_agent(..., middleware=[MetaClawMiddleware(engine)])``
  injects skills into the system message before each model call and captures each call.
* :class:`MetaClawCallbackHandler`: ``config={"callbacks": [MetaClawCallbackHandler(engine)]}``
  captures any chat model, chain or agent run as one trajectory.
* :func:`skills_injector`: ``prompt | skills_injector(engine) | model`` for chains.
"""

from metaclaw_langchain._callbacks import MetaClawCallbackHandler
from metaclaw_langchain._inject import MetaClawMiddleware, skills_injector

__all__ = ["MetaClawCallbackHandler", "MetaClawMiddleware", "skills_injector"]
