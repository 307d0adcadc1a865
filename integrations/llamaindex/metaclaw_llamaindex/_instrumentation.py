"""Capture: LlamaIndex's instrumentation (dispatcher event and span handlers) to trajectories.

Each LLM call (chat or completion) becomes one trajectory: the messages or prompt the LLM
got, its answer, the query it served (as the task) and the skills the
:class:`~metaclaw_llamaindex.SkillsPostprocessor` injected for that query. The span tree ties
an LLM call to its query, and tells a call made inside another call (a completion LLM's
``chat`` calling its ``complete``) from a new one, so each call is captured once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.instrumentation import (  # type: ignore[attr-defined]
    Dispatcher,
    get_dispatcher,
)
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.query import QueryStartEvent
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

from metaclaw_core import (
    CallContext,
    Injection,
    Message,
    MetaClaw,
    ModelOutput,
    ToolCall,
    normalise_role,
    record_fault,
    tool_call,
)
from metaclaw_llamaindex._postprocessor import FRAMEWORK, SkillsInjectedEvent

_MAX_OPEN = 10_000


@dataclass
class _Query:
    text: str
    injection: Injection | None = None
    used: bool = False  # the engine's pending injection was consumed by a first LLM call


@dataclass
class _LLMCall:
    started: float
    query: _Query | None
    session_id: str | None
    model: str | None
    depth: int = 0  # calls made inside this one that reported the same span, still open


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _tool_calls(kwargs: dict[str, Any]) -> list[ToolCall]:
    out = []
    for c in kwargs.get("tool_calls") or []:
        fn = c.get("function", {}) if isinstance(c, dict) else getattr(c, "function", None)
        get = fn.get if isinstance(fn, dict) else (lambda k, fn=fn: getattr(fn, k, None))
        call_id = c.get("id") if isinstance(c, dict) else getattr(c, "id", None)
        out.append(tool_call(call_id, _text(get("name")), get("arguments")))
    return out


def to_message(m: ChatMessage) -> Message:
    return Message(
        role=normalise_role(m.role, "assistant"),
        content=_text(m.content),
        tool_calls=_tool_calls(m.additional_kwargs),
        tool_call_id=m.additional_kwargs.get("tool_call_id"),
    )


class _Capture:
    """The state both handlers share: open spans, open queries and open LLM calls."""

    def __init__(self, engine: MetaClaw, session_id: str | None, agent: str | None = None) -> None:
        self.engine = engine
        self.session_id = session_id
        self.agent = agent
        self.parents: dict[str, str | None] = {}
        self.queries: dict[str, _Query] = {}
        self.calls: OrderedDict[str, _LLMCall] = OrderedDict()
        self.inner: set[str] = set()  # spans of calls made inside a captured call
        self.lock = threading.Lock()

    def _ancestors(self, span_id: str | None) -> list[str]:
        chain: list[str] = []
        while span_id is not None and len(chain) < 256:
            chain.append(span_id)
            span_id = self.parents.get(span_id)
        return chain

    # -- spans ---------------------------------------------------------------------------
    def span_closed(self, span_id: str, error: BaseException | None) -> None:
        self.parents.pop(span_id, None)
        self.queries.pop(span_id, None)
        if error is not None:
            with self.lock:
                call = self.calls.pop(span_id, None)
            if call is not None:
                self._record(call, [], None, error)

    # -- events --------------------------------------------------------------------------
    def on_event(self, event: BaseEvent) -> None:
        if isinstance(event, LLMChatStartEvent | LLMCompletionStartEvent):
            self._llm_start(event)
        elif isinstance(event, LLMChatEndEvent):
            self._llm_end(event, [to_message(m) for m in event.messages], event.response)
        elif isinstance(event, LLMCompletionEndEvent):
            self._llm_end(event, [Message(role="user", content=event.prompt)], event.response)
        elif isinstance(event, QueryStartEvent):
            q = event.query
            text = q if isinstance(q, str) else getattr(q, "query_str", str(q))
            if event.span_id is not None:
                self.queries[event.span_id] = _Query(text=text)
        elif isinstance(event, SkillsInjectedEvent):
            for span in self._ancestors(event.span_id):
                query = self.queries.get(span)
                if query is not None:
                    query.injection, query.used = event.injection, False
                    break

    def _llm_start(self, event: LLMChatStartEvent | LLMCompletionStartEvent) -> None:
        chain = self._ancestors(event.span_id)
        with self.lock:
            for span in chain:
                outer = self.calls.get(span)
                if outer is None:
                    continue
                # A call inside a call (a completion LLM's chat() calling its complete()):
                # only the outer one is captured.
                if span == event.span_id:
                    outer.depth += 1
                elif event.span_id is not None:
                    if len(self.inner) > _MAX_OPEN:
                        self.inner.clear()
                    self.inner.add(event.span_id)
                return
        query = next((self.queries[s] for s in chain if s in self.queries), None)
        model = event.model_dict.get("model") or event.model_dict.get("model_name")
        call = _LLMCall(
            started=time.perf_counter(),
            query=query,
            session_id=self.session_id or _text(event.tags.get("session_id")) or None,
            model=_text(model) or event.model_dict.get("class_name"),
        )
        with self.lock:
            if event.span_id is not None:
                self.calls[event.span_id] = call
            if len(self.calls) > _MAX_OPEN:  # streams never consumed
                self.calls.popitem(last=False)

    def _llm_end(self, event: BaseEvent, messages: list[Message], response: Any) -> None:
        with self.lock:
            if event.span_id is None or event.span_id in self.inner:
                self.inner.discard(event.span_id or "")
                return
            call = self.calls.get(event.span_id)
            if call is None:
                return
            if call.depth:
                call.depth -= 1
                return
            del self.calls[event.span_id]
        self._record(call, messages, response, None)

    def _record(
        self, call: _LLMCall, messages: list[Message], response: Any, error: BaseException | None
    ) -> None:
        query, inj = call.query, None
        ctx = CallContext(
            framework=FRAMEWORK,
            task=query.text if query is not None else None,
            session_id=call.session_id,
            model=call.model,
            messages=messages,
            agent=self.agent,  # None: the agent the query's skills were chosen for, or the engine's
        )
        if query is not None and query.injection is not None:
            inj = query.injection
            if not query.used:
                query.used = True
                ctx.call_id = inj.call_id
        output = None
        if response is not None:
            message = getattr(response, "message", None)
            output = ModelOutput(
                text=_text(message.content if message is not None else response.text),
                tool_calls=_tool_calls(message.additional_kwargs) if message is not None else [],
            )
        self.engine.after_call(
            ctx,
            output,
            injection=inj,
            error=error,
            latency_ms=(time.perf_counter() - call.started) * 1000.0,
        )


class _EventHandler(BaseEventHandler):
    capture: Any = None

    @classmethod
    def class_name(cls) -> str:
        return "MetaClawEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        try:
            self.capture.on_event(event)
        except Exception as exc:
            record_fault(self.capture.engine, "llamaindex capture", exc)


class _SpanHandler(BaseSpanHandler[BaseSpan]):
    """Keeps only the parent of each open span (no span objects, nothing kept once closed)."""

    capture: Any = None

    @classmethod
    def class_name(cls) -> str:
        return "MetaClawSpanHandler"

    def span_enter(
        self, id_: str, bound_args: Any, instance: Any = None, parent_id: str | None = None,
        tags: dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        parents = self.capture.parents
        if len(parents) > 10 * _MAX_OPEN:  # spans that never closed (abandoned generators)
            parents.clear()
        parents[id_] = parent_id

    def span_exit(
        self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
    ) -> None:
        self.capture.span_closed(id_, None)

    def span_drop(
        self, id_: str, bound_args: Any, instance: Any = None, err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        try:
            self.capture.span_closed(id_, err)
        except Exception as exc:
            record_fault(self.capture.engine, "llamaindex capture", exc)

    def new_span(self, *args: Any, **kwargs: Any) -> None:
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
        return None


class MetaClawInstrumentation:
    """Captures LlamaIndex queries and LLM calls into an engine; see :func:`instrument`."""

    def __init__(
        self,
        engine: MetaClaw,
        *,
        session_id: str | None = None,
        dispatcher: Dispatcher | None = None,
        agent: str | None = None,
    ) -> None:
        self.dispatcher = dispatcher or get_dispatcher()
        self._capture = _Capture(engine, session_id, agent)
        self._events = _EventHandler()
        self._events.capture = self._capture
        self._spans = _SpanHandler()
        self._spans.capture = self._capture
        self.dispatcher.add_span_handler(self._spans)
        self.dispatcher.add_event_handler(self._events)

    def close(self) -> None:
        """Stop capturing (remove the handlers from the dispatcher). Idempotent."""
        if self._events in self.dispatcher.event_handlers:
            self.dispatcher.event_handlers.remove(self._events)
        if self._spans in self.dispatcher.span_handlers:
            self.dispatcher.span_handlers.remove(self._spans)

    def __enter__(self) -> MetaClawInstrumentation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def instrument(
    engine: MetaClaw,
    *,
    session_id: str | None = None,
    dispatcher: Dispatcher | None = None,
    agent: str | None = None,
) -> MetaClawInstrumentation:
    """Capture every LlamaIndex LLM call (with the query it served) into ``engine``.

    Registers an event and a span handler on ``dispatcher`` (default: the root dispatcher, so
    everything LlamaIndex does is seen). The session of a trajectory is ``session_id``, else
    the ``session_id`` instrument tag (``with instrument_tags({"session_id": ...})``).
    Call ``close()`` on the result (or use it as a context manager) to stop. ``agent``: the
    agent the calls are captured for (default: the agent the query's skills were chosen for by
    :class:`MetaClawSkillsPostprocessor`, else the engine's).
    """
    return MetaClawInstrumentation(
        engine, session_id=session_id, dispatcher=dispatcher, agent=agent
    )
