"""Capture: a LangChain callback handler that turns each top-level run into one trajectory.

Callbacks only observe (LangChain's maintainers rejected callbacks that change prompts); to
inject skills use :class:`~metaclaw_langchain.MetaClawMiddleware` or
:func:`~metaclaw_langchain.skills_injector`. When one of those runs inside a run this handler
watches, it hands its ``Injection`` over, so the trajectory carries the injected skills and
their generation.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import LLMResult

from metaclaw_core import (
    CallContext,
    Injection,
    Message,
    MetaClaw,
    ModelOutput,
    message_key,
    record_fault,
)
from metaclaw_langchain._messages import to_message, to_output

FRAMEWORK = "langchain"
AGENT_KEY = "metaclaw_agent"  # a run's agent, from its config (metadata or configurable)


def inj_agent(inj: Injection | None) -> str | None:
    """The agent an injection inside the run was chosen for (its skills are that agent's)."""
    return None if inj is None else getattr(inj, "agent", None)


def agent_from(config: Any, fixed: str | None) -> str | None:
    """The agent of a call: the adapter's ``agent=``, else ``metaclaw_agent`` in the run's
    metadata or configurable (LangGraph: per node), else None (the engine's agent)."""
    if fixed is not None:
        return fixed
    for part in ("metadata", "configurable"):
        value = ((config or {}).get(part) or {}).get(AGENT_KEY)
        if value:
            return str(value)
    return None


@dataclass
class _Run:
    """What one top-level run has shown so far."""

    started: float
    session_id: str | None = None
    agent: str | None = None
    model: str | None = None
    transcript: list[Message] = field(default_factory=list)
    seen: set[tuple[Any, ...]] = field(default_factory=set)
    output: ModelOutput | None = None
    output_at: int = 0  # index of the last model output in ``transcript``
    model_calls: int = 0
    tool_runs: int = 0
    error: str | None = None
    injection: Injection | None = None

    def add(self, message: Message) -> None:
        key = message_key(message)
        if key not in self.seen:
            self.seen.add(key)
            self.transcript.append(message)


class MetaClawCallbackHandler(BaseCallbackHandler):
    """Captures every top-level run (a chat model, chain, agent or graph call) as one trajectory.

    The trajectory's messages are everything the run's model calls saw (merged in order: the
    prompt, earlier model outputs with their tool calls, the tool results), its output is the
    last model output; tool results that came after it are kept in ``metadata``. Works for
    ``invoke`` and ``ainvoke`` alike (it only enqueues, so it runs inline).

    Args:
        engine: the :class:`metaclaw_core.MetaClaw` to capture into.
        session_id: fixed session id; by default the run's ``thread_id`` (LangGraph) or
            ``session_id`` metadata, if any.
        agent: the agent the runs are captured for; by default the run's ``metaclaw_agent``
            metadata, else the engine's agent.
        max_open_runs: runs tracked at once; the oldest is dropped past this (runs that never end).
    """

    run_inline = True
    raise_error = False

    def __init__(
        self,
        engine: MetaClaw,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        max_open_runs: int = 1000,
    ) -> None:
        self.engine = engine
        self.session_id = session_id
        self.agent = agent
        self.max_open_runs = max_open_runs
        self._runs: OrderedDict[UUID, _Run] = OrderedDict()
        self._root_of: OrderedDict[UUID, UUID] = OrderedDict()
        self._lock = threading.Lock()

    # -- run tree ------------------------------------------------------------------------
    def _start(
        self, run_id: UUID, parent_run_id: UUID | None, metadata: dict[str, Any] | None
    ) -> _Run | None:
        with self._lock:
            root = self._root_of.get(parent_run_id) if parent_run_id is not None else None
            if root is None or root not in self._runs:
                root = run_id
                meta = metadata or {}
                session = self.session_id or meta.get("thread_id") or meta.get("session_id")
                self._runs[run_id] = _Run(
                    started=time.perf_counter(),
                    session_id=None if session is None else str(session),
                    agent=agent_from({"metadata": meta}, self.agent),
                )
                if len(self._runs) > self.max_open_runs:
                    self._runs.popitem(last=False)
            self._root_of[run_id] = root
            if len(self._root_of) > 50 * self.max_open_runs:
                self._root_of.popitem(last=False)
            return self._runs.get(root)

    def _run_of(self, run_id: UUID) -> _Run | None:
        root = self._root_of.get(run_id)
        return None if root is None else self._runs.get(root)

    def _end(self, run_id: UUID, error: BaseException | None = None) -> None:
        with self._lock:
            root = self._root_of.pop(run_id, None)
            run = self._runs.pop(run_id, None) if root == run_id else None
        if run is not None:
            if error is not None:
                run.error = f"{type(error).__name__}: {error}"
            self._capture(run)

    def attach_injection(self, run_id: UUID | None, injection: Injection) -> bool:
        """Tell the handler what was injected inside the run ``run_id`` belongs to."""
        if run_id is None:
            return False
        run = self._run_of(run_id)
        if run is None:
            return False
        run.injection = injection
        return True

    def _capture(self, run: _Run) -> None:
        if run.output is None and run.model_calls == 0:
            return  # no model was called in this run: nothing to learn from
        after = run.transcript[run.output_at + 1 :] if run.output is not None else []
        metadata: dict[str, Any] = {"model_calls": run.model_calls, "tool_runs": run.tool_runs}
        if after:
            metadata["after_output"] = [m.model_dump(exclude_defaults=True) for m in after]
        inj = run.injection
        ctx = CallContext(
            framework=FRAMEWORK,
            session_id=run.session_id,
            model=run.model,
            messages=run.transcript[: run.output_at] if run.output is not None else run.transcript,
            metadata=metadata,
            agent=inj_agent(inj) or run.agent,
            **({"call_id": inj.call_id} if inj is not None else {}),
        )
        self.engine.after_call(
            ctx,
            run.output,
            injection=inj,
            error=run.error,
            latency_ms=(time.perf_counter() - run.started) * 1000.0,
        )

    # -- model calls ---------------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            run = self._start(run_id, parent_run_id, metadata)
            if run is None:
                return
            params = kwargs.get("invocation_params") or {}
            run.model = (
                (metadata or {}).get("ls_model_name")
                or params.get("model")
                or params.get("model_name")
                or run.model
            )
            run.model_calls += 1
            for m in messages[0] if messages else []:
                run.add(to_message(m))
        except Exception as exc:
            record_fault(self.engine, "langchain callback (model start)", exc)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            run = self._start(run_id, parent_run_id, metadata)
            if run is not None:
                run.model_calls += 1
                for p in prompts[:1]:
                    run.add(Message(role="user", content=p))
        except Exception as exc:
            record_fault(self.engine, "langchain callback (model start)", exc)

    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            run = self._run_of(run_id)
            if run is not None and response.generations and response.generations[0]:
                gen = response.generations[0][0]
                message = getattr(gen, "message", None)
                output = to_output(message) if message is not None else ModelOutput(text=gen.text)
                run.output = output
                run.error = None
                run.output_at = len(run.transcript)
                run.transcript.append(
                    Message(role="assistant", content=output.text, tool_calls=output.tool_calls)
                )
                run.seen.add(message_key(run.transcript[-1]))
        except Exception as exc:
            record_fault(self.engine, "langchain callback (model end)", exc)
        self._finish(run_id, None)

    def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        run = self._run_of(run_id)
        if run is not None:
            run.error = f"{type(error).__name__}: {error}"
        self._finish(run_id, error)

    # -- tools ---------------------------------------------------------------------------
    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            self._start(run_id, parent_run_id, metadata)
        except Exception as exc:
            record_fault(self.engine, "langchain callback (tool start)", exc)

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        try:
            run = self._run_of(run_id)
            if run is not None:
                run.tool_runs += 1
                if isinstance(output, ToolMessage):
                    run.add(to_message(output))
                else:
                    run.add(Message(role="tool", content=str(output), name=kwargs.get("name")))
        except Exception as exc:
            record_fault(self.engine, "langchain callback (tool end)", exc)
        self._finish(run_id, None)

    def on_tool_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._finish(run_id, error)

    # -- chains, retrievers: only the run tree -------------------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            self._start(run_id, parent_run_id, metadata)
        except Exception as exc:
            record_fault(self.engine, "langchain callback (chain start)", exc)

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._finish(run_id, None)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._finish(run_id, error)

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            self._start(run_id, parent_run_id, metadata)
        except Exception as exc:
            record_fault(self.engine, "langchain callback (retriever start)", exc)

    def on_retriever_end(
        self, documents: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._finish(run_id, None)

    def on_retriever_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._finish(run_id, error)

    def _finish(self, run_id: UUID, error: BaseException | None) -> None:
        try:
            self._end(run_id, error)
        except Exception as exc:
            record_fault(self.engine, "langchain callback (capture)", exc)
