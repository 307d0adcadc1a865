"""Graph nodes: skills into the state before the model node, the model node's call captured."""

from __future__ import annotations

import copy
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command

from metaclaw_core import CallContext, Injection, MetaClaw, ModelCall, ModelOutput, record_fault
from metaclaw_langgraph._messages import last_ai_message, to_messages, to_output

FRAMEWORK = "langgraph"
SKILLS_MESSAGE_ID = "metaclaw-skills"
AGENT_KEY = "metaclaw_agent"  # a run's (or node's) agent, in its config
_REMEMBERED_INJECTIONS = 1024


def _get(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, dict) else getattr(state, key, None)


def _updated_messages(result: Any, key: str) -> list[Any]:
    """The messages a node's return value adds (dict, Command, or a list of them)."""
    found: list[Any] = []
    for item in result if isinstance(result, list | tuple) else [result]:
        update = item.update if isinstance(item, Command) else item
        value = _get(update, key) if update is not None else None
        if value is not None:
            found.extend(value if isinstance(value, list | tuple) else [value])
    return found


class MetaClawGraph:
    """The LangGraph face of a :class:`metaclaw_core.MetaClaw` engine.

    ``builder.add_node("skills", mc.skills_node)`` before the model node puts the skills that
    fit the latest user message into the state as one ``SystemMessage`` with the fixed id
    ``message_id``: the ``add_messages`` reducer replaces it on every turn instead of piling
    it up. It sits right after the leading system messages (your system prompt), and is removed
    when no skill fits (``mc.askills_node`` is the same node for graphs only ever run async).
    ``builder.add_node("model", mc.capture(call_model))`` captures what the
    model node saw and answered, stamped with the skills injected for it. The state's message
    channel (``messages_key``) must use the ``add_messages`` reducer.

    Agents: ``agent=`` names the agent whose skills and trajectories these nodes use (default:
    the engine's). A sub-agent of the graph learns for itself with its own view,
    ``mc.for_agent("researcher").skills_node``, or through the run's config: ``metaclaw_agent``
    in ``metadata`` or ``configurable`` (e.g. ``add_node(..., metadata={"metaclaw_agent": ...})``
    or ``graph.invoke(..., {"metadata": {"metaclaw_agent": ...}})``).

    Any MetaClaw failure is logged and the graph goes on as if MetaClaw were absent.
    """

    def __init__(
        self,
        engine: MetaClaw,
        *,
        messages_key: str = "messages",
        message_id: str = SKILLS_MESSAGE_ID,
        session_id: str | None = None,
        agent: str | None = None,
    ) -> None:
        self.engine = engine
        self.messages_key = messages_key
        self.message_id = message_id
        self.session_id = session_id
        self.agent = agent
        # call_id -> Injection: a model node that loops (tools) without passing the skills
        # node again is still stamped with the skills it saw.
        self._injections: OrderedDict[str, Injection] = OrderedDict()
        self._lock = threading.Lock()

    def for_agent(self, agent: str) -> MetaClawGraph:
        """The same nodes for ``agent`` (a sub-agent of the graph that learns for itself)."""
        view = copy.copy(self)
        view.agent = agent
        return view

    # -- helpers -------------------------------------------------------------------------
    def _agent(self, config: RunnableConfig | None) -> str | None:
        if self.agent is not None:
            return self.agent
        for part in ("metadata", "configurable"):
            section = (config or {}).get(part)
            value = section.get(AGENT_KEY) if isinstance(section, dict) else None
            if value:
                return str(value)
        return None

    def _session(self, config: RunnableConfig | None) -> str | None:
        if self.session_id is not None:
            return self.session_id
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        return None if thread is None else str(thread)

    def _messages(self, state: Any) -> list[BaseMessage]:
        return list(_get(state, self.messages_key) or [])

    def _remember(self, injection: Injection) -> None:
        with self._lock:
            self._injections[injection.call_id] = injection
            if len(self._injections) > _REMEMBERED_INJECTIONS:
                self._injections.popitem(last=False)

    # -- the skills node -----------------------------------------------------------------
    def _skills_context(self, state: Any, config: RunnableConfig) -> tuple[list[Any], CallContext]:
        messages = self._messages(state)
        ctx = CallContext(
            framework=FRAMEWORK,
            session_id=self._session(config),
            messages=to_messages(m for m in messages if m.id != self.message_id),
            agent=self._agent(config),
        )
        return messages, ctx

    def _update(self, messages: list[BaseMessage], injection: Injection) -> dict[str, Any]:
        present = any(m.id == self.message_id for m in messages)
        if not injection.text:
            return {self.messages_key: [RemoveMessage(id=self.message_id)]} if present else {}
        self._remember(injection)
        skills = SystemMessage(
            content=injection.text,
            id=self.message_id,
            # never sent to a provider; read back by capture()
            response_metadata={
                "metaclaw": {
                    "call_id": injection.call_id,
                    "generation": injection.generation,
                    "skills": injection.skill_names,
                }
            },
        )
        if present:
            return {self.messages_key: [skills]}  # same id: the reducer replaces it in place
        lead = 0
        while lead < len(messages) and isinstance(messages[lead], SystemMessage):
            lead += 1
        if lead == len(messages):
            return {self.messages_key: [skills]}
        # First time in this thread: place it after the system prompt, not after the turn.
        reordered = [*messages[:lead], skills, *messages[lead:]]
        return {self.messages_key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *reordered]}

    def skills_node(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The node to run before the model node (works in sync and async graphs)."""
        try:
            messages, ctx = self._skills_context(state, config)
            return self._update(messages, self.engine.before_call(ctx))
        except Exception as exc:
            record_fault(self.engine, "langgraph skills node", exc)
            return {}

    async def askills_node(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The same node for graphs only ever run with ``ainvoke`` / ``astream`` (no thread hop)."""
        try:
            messages, ctx = self._skills_context(state, config)
            return self._update(messages, await self.engine.abefore_call(ctx))
        except Exception as exc:
            record_fault(self.engine, "langgraph skills node", exc)
            return {}

    # -- capture of the model node -------------------------------------------------------
    def _prepare(self, state: Any, config: RunnableConfig) -> tuple[CallContext, Any] | None:
        try:
            messages = self._messages(state)
            injection = None
            for m in messages:
                if m.id == self.message_id:
                    call_id = (m.response_metadata.get("metaclaw") or {}).get("call_id")
                    with self._lock:
                        injection = self._injections.get(call_id) if call_id else None
            ctx = CallContext(
                framework=FRAMEWORK,
                session_id=self._session(config),
                messages=to_messages(messages),
                agent=self._agent(config) or (injection.agent if injection is not None else None),
                **({"call_id": injection.call_id} if injection is not None else {}),
            )
            return ctx, injection
        except Exception as exc:
            record_fault(self.engine, "langgraph (capture)", exc)
            return None

    def _call(self, state: Any, config: RunnableConfig) -> ModelCall:
        """The core's call wrapper around one run of the model node (capture only: the
        skills node injected)."""
        prepared = self._prepare(state, config)
        ctx, injection = prepared if prepared is not None else (None, None)

        def output_of(result: Any) -> ModelOutput:
            output = last_ai_message(_updated_messages(result, self.messages_key))
            if output is not None and ctx is not None:
                ctx.model = (output.response_metadata or {}).get("model_name")
            return to_output(output)

        return ModelCall(
            self.engine,
            ctx,
            inject=False,
            injection=injection,
            output_of=output_of,
            where="langgraph",
        )

    def capture(self, node: Callable[..., Any] | Runnable[Any, Any]) -> Any:
        """Wrap the model node so each of its calls is captured (sync or async, as ``node``).

        ``node`` is a function of the state (it may also take ``config`` and ``runtime``, and
        ``store`` / ``writer``) or a Runnable; its return value is passed on unchanged.
        """
        if isinstance(node, Runnable):
            runnable = node

            def call_runnable(state: Any, config: RunnableConfig) -> Any:
                with self._call(state, config) as call:
                    call.result = runnable.invoke(state, config)
                return call.result

            async def acall_runnable(state: Any, config: RunnableConfig) -> Any:
                async with self._call(state, config) as call:
                    call.result = await runnable.ainvoke(state, config)
                return call.result

            return RunnableLambda(call_runnable, afunc=acall_runnable, name=runnable.get_name())

        fn = node
        wants = set(inspect.signature(fn).parameters)

        def extra(config: RunnableConfig, runtime: Runtime[Any]) -> dict[str, Any]:
            given = {
                "config": config,
                "runtime": runtime,
                "store": getattr(runtime, "store", None),
                "writer": getattr(runtime, "stream_writer", None),
            }
            return {k: v for k, v in given.items() if k in wants}

        if inspect.iscoroutinefunction(fn):

            async def acaptured(state: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
                async with self._call(state, config) as call:
                    call.result = await fn(state, **extra(config, runtime))
                return call.result

            acaptured.__name__ = getattr(fn, "__name__", "model")
            return acaptured

        def captured(state: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
            with self._call(state, config) as call:
                call.result = fn(state, **extra(config, runtime))
            return call.result

        captured.__name__ = getattr(fn, "__name__", "model")
        return captured


def skills_message(messages: Sequence[BaseMessage], message_id: str = SKILLS_MESSAGE_ID) -> Any:
    """The skills message in a list of state messages, or None."""
    return next((m for m in messages if m.id == message_id), None)
