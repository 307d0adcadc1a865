"""Injection: the skills that fit a query, as one marked node at the head of its context."""

from __future__ import annotations

from typing import Any

# LlamaIndex's documented import path (a re-export mypy cannot see as such)
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import PrivateAttr

from metaclaw_core import CallContext, Injection, MetaClaw, record_fault

dispatcher = get_dispatcher(__name__)

FRAMEWORK = "llamaindex"
SKILLS_NODE_MARK = "metaclaw"  # metadata key on the injected node; its value is "skills"
_HIDDEN_KEYS = [SKILLS_NODE_MARK, "skills", "generation"]


class SkillsInjectedEvent(BaseEvent):
    """Dispatched when the postprocessor chose skills for a query (the capture reads it)."""

    injection: Any

    @classmethod
    def class_name(cls) -> str:
        return "MetaClawSkillsInjectedEvent"


class SkillsPostprocessor(BaseNodePostprocessor):
    """Adds the skills that fit the query to a query engine's context, as one marked node.

    ``index.as_query_engine(node_postprocessors=[..., SkillsPostprocessor(engine)])`` (put it
    last, so no later postprocessor filters the skills out). The node goes first in the
    context; its text is the rendered skills block, and its metadata (``metaclaw: "skills"``,
    the skill names and the generation, all hidden from the LLM and the embedder) marks it.
    With :func:`~metaclaw_llamaindex.instrument` active, the query's LLM calls are captured
    stamped with these skills. Any MetaClaw failure leaves the nodes as they were.
    """

    _engine: Any = PrivateAttr()
    _session_id: str | None = PrivateAttr(default=None)
    _agent: str | None = PrivateAttr(default=None)

    def __init__(
        self,
        engine: MetaClaw,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._engine = engine
        self._session_id = session_id
        self._agent = agent

    @classmethod
    def class_name(cls) -> str:
        return "MetaClawSkillsPostprocessor"

    def _context(self, query_bundle: QueryBundle) -> CallContext:
        return CallContext(
            framework=FRAMEWORK,
            task=query_bundle.query_str,
            session_id=self._session_id,
            agent=self._agent,
        )

    def _with_skills(self, nodes: list[NodeWithScore], inj: Injection) -> list[NodeWithScore]:
        dispatcher.event(SkillsInjectedEvent(injection=inj))
        if not inj.text:
            return nodes
        node = TextNode(
            id_=f"metaclaw-skills-{inj.call_id}",
            text=inj.text,
            metadata={
                SKILLS_NODE_MARK: "skills",
                "skills": ", ".join(inj.skill_names),
                "generation": inj.generation,
            },
            excluded_llm_metadata_keys=_HIDDEN_KEYS,
            excluded_embed_metadata_keys=_HIDDEN_KEYS,
        )
        best = max((s.score for s in inj.skills), default=None)
        return [NodeWithScore(node=node, score=best), *nodes]

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            return nodes
        try:
            return self._with_skills(nodes, self._engine.before_call(self._context(query_bundle)))
        except Exception as exc:
            record_fault(self._engine, "llamaindex skills postprocessor", exc)
            return nodes

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            return nodes
        try:
            inj = await self._engine.abefore_call(self._context(query_bundle))
            return self._with_skills(nodes, inj)
        except Exception as exc:
            record_fault(self._engine, "llamaindex skills postprocessor", exc)
            return nodes
