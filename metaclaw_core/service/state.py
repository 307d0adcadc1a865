"""What the routes of one service share: the engine, settings, metrics, session ledger and
upstream client, and the capture step that both the engine API and the proxy end with."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.requests import Request

from metaclaw_core.config import Settings
from metaclaw_core.engine import MetaClaw
from metaclaw_core.models import CallContext, Injection, ModelOutput
from metaclaw_core.service.metrics import ServiceMetrics
from metaclaw_core.service.sessions import SessionLedger


@dataclass
class ServiceState:
    engine: MetaClaw
    settings: Settings
    metrics: ServiceMetrics = field(default_factory=ServiceMetrics)
    ledger: SessionLedger = field(default_factory=SessionLedger)
    started_at: float = field(default_factory=time.time)
    http: httpx.AsyncClient | None = None
    # The slow loop's trained policy, when it serves the agent's model: the proxy's upstream
    # becomes this in-process app (see metaclaw_core.train.serving).
    upstream_transport: httpx.AsyncBaseTransport | None = None
    upstream_base_url: str | None = None
    background: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` after the caller returns (captures the client need not wait for)."""
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)  # a reference, or the task could be collected mid-way
        task.add_done_callback(self.background.discard)

    async def drain(self) -> None:
        """Wait for spawned work (at shutdown, before the engine closes)."""
        while self.background:
            await asyncio.gather(*list(self.background), return_exceptions=True)

    async def inject(self, ctx: CallContext) -> Injection:
        """``engine.abefore_call`` plus the metrics (never raises: the engine fails open)."""
        started = time.perf_counter()
        injection = await self.engine.abefore_call(ctx)
        m = self.metrics
        m.inject_seconds.observe(time.perf_counter() - started, ctx.framework)
        result = "degraded" if injection.degraded else ("injected" if injection.text else "empty")
        m.injections.inc(ctx.framework, result)
        if injection.skills:
            m.injected_skills.inc(ctx.framework, by=len(injection.skills))
        return injection

    async def capture(
        self,
        ctx: CallContext,
        output: ModelOutput | str | None,
        *,
        injection: Injection | None = None,
        error: str | None = None,
        latency_ms: float | None = None,
    ) -> str | None:
        """``engine.after_call`` plus the ledger and metrics. Returns the trajectory id."""
        # Copying, redacting and journaling a 40 KB prompt takes up to a few ms (more with
        # store.fsync): a worker thread does it, so the event loop keeps serving.
        tid = await asyncio.to_thread(
            self.engine.after_call,
            ctx,
            output,
            injection=injection,
            error=error,
            latency_ms=latency_ms,
        )
        self.metrics.captures.inc(ctx.framework, "stored" if tid else "dropped")
        if tid:
            self.ledger.record(ctx.call_id, ctx.session_id, tid, failed=error is not None)
        return tid


def service_state(request: Request) -> ServiceState:
    """FastAPI dependency: the state of the app serving ``request``."""
    state: ServiceState = request.app.state.metaclaw
    return state
