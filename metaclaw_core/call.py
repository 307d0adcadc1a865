"""One host model call, wrapped: inject → the host's call → capture, failing open.

Every adapter wraps its framework's model call the same way: choose skills
(``before_call``), let the host call its model, then capture what it saw and said
(``after_call``) with the latency and any error. :class:`ModelCall` is that wrapper, once, as
a sync and async context manager::

    with engine.model_call(ctx, output_of=to_output) as call:
        request = with_skills(request, call.injection)  # the adapter's translation
        call.result = model(request)                    # the host's call

An exception of the host's call is recorded as the trajectory's error and re-raised; an
internal failure (injecting, converting the result, capturing) is recorded as a fault and
swallowed: the host's call goes on, as without MetaClaw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from metaclaw_core.faults import record_fault
from metaclaw_core.models import CallContext, Injection, ModelOutput

if TYPE_CHECKING:
    from metaclaw_core.engine import MetaClaw

_UNSET: Any = object()


class ModelCall:
    """The state of one wrapped call (see the module docstring).

    Args:
        engine: the engine.
        ctx: the call as the host sees it; None makes the wrapper a no-op (an adapter whose
            translation failed still runs the host's call).
        inject: choose skills on entry (False for capture-only wrappers).
        injection: the injection already chosen for this call (a capture-only wrapper).
        capture: capture on exit.
        output_of: turns ``result`` (what the host's model returned) into a
            :class:`ModelOutput` (or text); called on exit, its failure is a fault.
        where: the name faults are counted under (``metaclaw status``).
        on_capture: called with the trajectory id and ``ctx`` once captured.
    """

    def __init__(
        self,
        engine: MetaClaw,
        ctx: CallContext | None,
        *,
        inject: bool = True,
        injection: Injection | None = None,
        capture: bool = True,
        output_of: Callable[[Any], ModelOutput | str | None] | None = None,
        where: str = "model call",
        on_capture: Callable[[str, CallContext], None] | None = None,
    ) -> None:
        self.engine = engine
        self.ctx = ctx
        self.inject = inject and injection is None
        self.injection = injection
        self.capture = capture
        self.output_of = output_of
        self.where = where
        self.on_capture = on_capture
        self.result: Any = _UNSET
        self.trajectory_id: str | None = None
        self.started = 0.0

    # -- sync ----------------------------------------------------------------------------
    def __enter__(self) -> ModelCall:
        if self.ctx is not None and self.inject:
            try:
                self.injection = self.engine.before_call(self.ctx)
            except Exception as exc:
                record_fault(self.engine, f"{self.where} (inject)", exc)
        self.started = time.perf_counter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._capture(exc)

    # -- async ---------------------------------------------------------------------------
    async def __aenter__(self) -> ModelCall:
        if self.ctx is not None and self.inject:
            try:
                self.injection = await self.engine.abefore_call(self.ctx)
            except Exception as exc:
                record_fault(self.engine, f"{self.where} (inject)", exc)
        self.started = time.perf_counter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._capture(exc)  # after_call never waits on the store: no thread hop needed

    # -- capture -------------------------------------------------------------------------
    def _capture(self, error: BaseException | None) -> None:
        if self.ctx is None or not self.capture:
            return
        if error is not None and not isinstance(error, Exception):
            return  # KeyboardInterrupt, SystemExit, a cancelled task: not the model's answer
        latency_ms = (time.perf_counter() - self.started) * 1000.0
        try:
            output: ModelOutput | str | None = None
            if error is None and self.result is not _UNSET:
                output = self.output_of(self.result) if self.output_of else self.result
            self.trajectory_id = self.engine.after_call(
                self.ctx,
                output,
                injection=self.injection,
                error=error,
                latency_ms=latency_ms,
            )
            if self.trajectory_id is not None and self.on_capture is not None:
                self.on_capture(self.trajectory_id, self.ctx)
        except Exception as exc:
            record_fault(self.engine, f"{self.where} (capture)", exc)
