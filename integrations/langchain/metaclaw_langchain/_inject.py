"""Injection: skills into the system message, for agents (middleware) and plain chains."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, convert_to_messages
from langchain_core.prompt_values import ChatPromptValue, PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import ensure_config

from metaclaw_core import CallContext, Injection, MetaClaw, ModelCall, ModelOutput, record_fault
from metaclaw_langchain._callbacks import FRAMEWORK, MetaClawCallbackHandler, agent_from
from metaclaw_langchain._messages import (
    last_ai_message,
    to_message,
    to_messages,
    to_output,
    with_skills,
)


def _handler_in(config: RunnableConfig) -> tuple[MetaClawCallbackHandler | None, Any]:
    """The capture handler attached to this run, if any, and the current run id."""
    callbacks: Any = config.get("callbacks")
    handlers: list[Any] = getattr(callbacks, "handlers", callbacks) or []
    for h in handlers:
        if isinstance(h, MetaClawCallbackHandler):
            return h, getattr(callbacks, "parent_run_id", None)
    return None, None


def _session(config: RunnableConfig, fixed: str | None) -> str | None:
    if fixed is not None:
        return fixed
    conf = config.get("configurable") or {}
    meta = config.get("metadata") or {}
    session = conf.get("thread_id") or meta.get("thread_id") or meta.get("session_id")
    return None if session is None else str(session)


def _model_name(model: Any) -> str | None:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str):
            return value
    return type(model).__name__


def _handed_over(config: RunnableConfig, injection: Injection) -> bool:
    handler, run_id = _handler_in(config)
    return handler is not None and handler.attach_injection(run_id, injection)


# -- agents ---------------------------------------------------------------------------------
@dataclass
class _Call:
    request: ModelRequest[Any]
    ctx: CallContext
    injection: Injection
    captured_by_handler: bool


def _output(response: Any) -> ModelOutput | None:
    """What the model answered, from the handler's response."""
    if response is None:
        return None
    result = getattr(response, "model_response", response)  # ExtendedModelResponse
    messages = result.result if isinstance(result, ModelResponse) else [result]
    return to_output(last_ai_message(messages))


class MetaClawMiddleware(AgentMiddleware[Any, Any, Any]):
    """``create_agent`` middleware: skills into the system message, and each model call captured.

    ``create_agent(model, tools, middleware=[MetaClawMiddleware(engine)])``. Before every model
    call the skills that fit the task are appended to the system message (the block is
    replaced, never repeated); after it, the call (messages the model saw, its output and tool
    calls) is captured as a trajectory. If a :class:`MetaClawCallbackHandler` watches the same
    run, it captures the whole run instead (one trajectory per run, with this injection), so
    nothing is stored twice. Any MetaClaw failure leaves the model call as it was.

    Args:
        engine: the :class:`metaclaw_core.MetaClaw` to use.
        capture: capture each model call (set False to only inject).
        session_id: fixed session id; by default the run's ``thread_id``.
        agent: the agent the calls are for (its skills, its trajectories); by default the
            run's ``metaclaw_agent`` metadata or configurable, else the engine's agent.
        on_capture: called with ``(trajectory_id, context)`` after each captured call, so the
            host can rate it later (``engine.feedback``); its errors are recorded, not raised.
    """

    def __init__(
        self,
        engine: MetaClaw,
        *,
        capture: bool = True,
        session_id: str | None = None,
        agent: str | None = None,
        on_capture: Callable[[str, CallContext], None] | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.capture = capture
        self.session_id = session_id
        self.agent = agent
        self.on_capture = on_capture

    def _context(self, request: ModelRequest[Any], config: RunnableConfig) -> CallContext:
        system = [request.system_message] if request.system_message is not None else []
        return CallContext(
            framework=FRAMEWORK,
            session_id=_session(config, self.session_id),
            model=_model_name(request.model),
            messages=to_messages([*system, *request.messages]),
            agent=agent_from(config, self.agent),
        )

    def _inject(
        self, request: ModelRequest[Any], config: RunnableConfig, ctx: CallContext, inj: Injection
    ) -> _Call:
        system = with_skills(request.system_message, inj)
        if system is not request.system_message:
            request = request.override(system_message=system)
            seen = ctx.messages[1:] if ctx.messages and ctx.messages[0].role == "system" else []
            ctx.messages = [to_message(system), *seen] if system is not None else seen
        return _Call(request, ctx, inj, _handed_over(config, inj))

    def _before(self, request: ModelRequest[Any]) -> _Call | None:
        try:
            config = ensure_config()
            ctx = self._context(request, config)
            return self._inject(request, config, ctx, self.engine.before_call(ctx))
        except Exception as exc:
            record_fault(self.engine, "langchain middleware (inject)", exc)
            return None

    async def _abefore(self, request: ModelRequest[Any]) -> _Call | None:
        try:
            config = ensure_config()
            ctx = self._context(request, config)
            return self._inject(request, config, ctx, await self.engine.abefore_call(ctx))
        except Exception as exc:
            record_fault(self.engine, "langchain middleware (inject)", exc)
            return None

    def _capture(self, call: _Call) -> ModelCall:
        """The core's call wrapper, capture only (the injection is chosen and applied)."""
        return ModelCall(
            self.engine,
            call.ctx if self.capture and not call.captured_by_handler else None,
            injection=call.injection,
            output_of=_output,
            where="langchain middleware",
            on_capture=self.on_capture,
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        call = self._before(request)
        if call is None:
            return handler(request)
        with self._capture(call) as captured:
            captured.result = handler(call.request)
        return captured.result

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        call = await self._abefore(request)
        if call is None:
            return await handler(request)
        async with self._capture(call) as captured:
            captured.result = await handler(call.request)
        return captured.result


# -- plain chat models and LCEL chains ------------------------------------------------------
def _as_messages(value: Any) -> list[BaseMessage]:
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    return convert_to_messages(value)


def _rewrite(value: Any, messages: list[BaseMessage], inj: Injection) -> Any:
    system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    new_system = with_skills(system, inj)
    if new_system is system:
        return value
    rest = messages[1:] if system is not None else messages
    out = [new_system, *rest] if new_system is not None else rest
    return ChatPromptValue(messages=out) if isinstance(value, PromptValue) else out


def skills_injector(
    engine: MetaClaw, *, session_id: str | None = None, agent: str | None = None
) -> Runnable[Any, Any]:
    """A Runnable that puts the skills into a prompt: ``prompt | skills_injector(engine) | model``.

    Input: a prompt value, a list of messages (or anything ``convert_to_messages`` takes) or a
    string. Output: the same messages with the skills block at the end of the leading system
    message (one is added if there is none). Attach a :class:`MetaClawCallbackHandler` to the
    call to capture it; the handler then records which skills were injected. ``agent``: whose
    skills (default: the run's ``metaclaw_agent`` metadata or configurable, else the engine's).
    """

    def context(value: Any, config: RunnableConfig) -> tuple[list[BaseMessage], CallContext]:
        messages = _as_messages(value)
        return messages, CallContext(
            framework=FRAMEWORK,
            session_id=_session(config, session_id),
            messages=to_messages(messages),
            agent=agent_from(config, agent),
        )

    def inject(value: Any, config: RunnableConfig) -> Any:
        try:
            messages, ctx = context(value, config)
            inj = engine.before_call(ctx)
            _handed_over(config, inj)
            return _rewrite(value, messages, inj)
        except Exception as exc:
            record_fault(engine, "langchain skills_injector", exc)
            return value

    async def ainject(value: Any, config: RunnableConfig) -> Any:
        try:
            messages, ctx = context(value, config)
            inj = await engine.abefore_call(ctx)
            _handed_over(config, inj)
            return _rewrite(value, messages, inj)
        except Exception as exc:
            record_fault(engine, "langchain skills_injector", exc)
            return value

    return RunnableLambda(inject, afunc=ainject, name="metaclaw_skills")
