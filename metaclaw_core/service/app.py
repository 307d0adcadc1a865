"""``create_app``: the FastAPI application of ``metaclaw serve``, wired around one engine.

Middleware, outermost first: request metrics, bearer auth (when a token is set), body size
limit. Routes: the engine API (:mod:`.api`), the OpenAI-compatible proxy (:mod:`.proxy`), the
Anthropic-compatible one (:mod:`.anthropic_proxy`), ``/healthz`` (alive) and ``/readyz``
(skills are being served; neither needs the token), ``/metrics`` and the OpenAPI docs at
``/docs``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from metaclaw_core import __version__
from metaclaw_core.config import Settings
from metaclaw_core.engine import MetaClaw
from metaclaw_core.service import anthropic_proxy, api, dashboard, proxy
from metaclaw_core.service.agent_scope import POLICY_AGENT_HEADER, AgentScope, agent_tokens
from metaclaw_core.service.auth import BearerAuth, check_bind
from metaclaw_core.service.errors import install_error_handlers
from metaclaw_core.service.limits import BodySizeLimit
from metaclaw_core.service.metrics import CONTENT_TYPE, LabelValues, RequestMetrics
from metaclaw_core.service.state import ServiceState
from metaclaw_core.train.policy import PolicyServer

DESCRIPTION = """\
The MetaClaw engine over HTTP: choose skills before an LLM call (`/v1/inject`), capture it
after (`/v1/trajectories`), rate it (`/v1/feedback`), manage the skill library, and a
proxy that does all of it for clients that can only change their base URL: OpenAI
`/v1/chat/completions` and `/v1/responses`, Anthropic `/v1/messages`. With a token set,
every route but `/healthz` needs `Authorization: Bearer <token>`.
"""


def _gauges(state: ServiceState) -> None:
    engine, r = state.engine, state.metrics.registry

    def one(read: Any) -> Any:
        return lambda: [((), float(read()))]

    r.gauge(
        "metaclaw_skill_generation",
        "Skill generation being served.",
        one(lambda: engine.generation),
    )
    r.gauge(
        "metaclaw_live_skills",
        "Live skills in the served generation.",
        one(lambda: len(engine.snapshot)),
    )
    r.gauge(
        "metaclaw_embedder_ready",
        "1 once the query embedder is loaded.",
        one(lambda: engine.embedder.ready),
    )

    def queue() -> Iterable[tuple[LabelValues, float]]:
        w = engine.writer
        return [((), float(w.queue_depth if w else 0))]

    def spool() -> Iterable[tuple[LabelValues, float]]:
        w = engine.writer
        return [((), float(w.journal.pending if w else 0))]

    def faults() -> Iterable[tuple[LabelValues, float]]:
        counts = dict(engine.faults.counts)  # a copy: other threads add to it
        return [((where,), float(n)) for where, n in sorted(counts.items())]

    r.gauge("metaclaw_capture_queue_depth", "Captures waiting for the writer.", queue)
    r.gauge("metaclaw_capture_spool_pending", "Journaled captures not yet in the store.", spool)
    r.gauge(
        "metaclaw_faults_total",
        "Internal errors the engine failed open on, by where.",
        faults,
        labels=("where",),
    )


def readiness(engine: MetaClaw) -> JSONResponse:
    """The body and status of ``/readyz``: what is still loading, and why, if it failed."""
    waiting = [
        part
        for part, done in (
            ("skill library", engine.library_loaded),
            ("embedder", engine.embedder.ready),
        )
        if not done
    ]
    body: dict[str, Any] = {
        "ready": not waiting,
        "generation": engine.generation if engine.library_loaded else None,
        "embedder_backend": getattr(engine.embedder, "backend", None),
    }
    if waiting:
        body["waiting_for"] = waiting
        load_error = getattr(engine.embedder, "load_error", None)
        if load_error is not None:
            body["embedder_error"] = str(load_error)
        if engine.library_error:
            body["library_error"] = engine.library_error
    return JSONResponse(body, status_code=503 if waiting else 200)


class PolicyByAgent:
    """The in-process policy upstream: the caller's agent's policy app (the proxy names the
    agent in ``x-metaclaw-agent``, a header that never leaves this process)."""

    def __init__(self, apps: Mapping[str, ASGIApp], fallback: ASGIApp) -> None:
        self.apps = dict(apps)
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent = None
        for name, value in scope.get("headers", ()):
            if name == POLICY_AGENT_HEADER:
                agent = value.decode("latin-1")
        await self.apps.get(agent or "", self.fallback)(scope, receive, send)


def create_app(
    engine: MetaClaw | None = None,
    settings: Settings | None = None,
    *,
    own_engine: bool | None = None,
    policy: PolicyServer | None = None,
    policies: Mapping[str, PolicyServer] | None = None,
) -> FastAPI:
    """Build the service around ``engine`` (default: a new one from ``settings``).

    The app closes the engine on shutdown when it created it, or when ``own_engine``.
    ``settings`` defaults to the engine's. With ``policy`` (the slow loop's trained policy),
    ``/v1/chat/completions`` is answered by it instead of ``proxy.upstream_base_url``; with
    ``policies`` (agent → policy: the slow loop's lanes), each caller by its agent's policy
    (an agent without one: the engine's agent's, or the first).
    """
    if engine is None:
        engine = MetaClaw(settings or Settings())
        own_engine = True if own_engine is None else own_engine
    settings = settings or engine.settings
    token = settings.service.token.get_secret_value() if settings.service.token else None
    scoped = agent_tokens(settings)
    check_bind(settings.service.host, token or (next(iter(scoped)) if scoped else None))
    state = ServiceState(engine=engine, settings=settings)
    if policies is None and policy is not None:
        policies = {engine.agent: policy}
    if policies:
        from metaclaw_core.train.serving import POLICY_BASE_URL, policy_app

        cap = settings.train.serve_max_tokens
        apps = {a: policy_app(p, max_tokens_cap=cap) for a, p in policies.items()}
        fallback = apps.get(engine.agent) or next(iter(apps.values()))
        state.upstream_transport = httpx.ASGITransport(app=PolicyByAgent(apps, fallback))
        state.upstream_base_url = POLICY_BASE_URL
    _gauges(state)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.http = proxy.make_upstream_client(state)
        try:
            yield
        finally:
            await state.drain()
            await state.http.aclose()
            if own_engine:
                await asyncio.to_thread(engine.close)

    app = FastAPI(
        title="MetaClaw",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.metaclaw = state
    install_error_handlers(app)
    app.include_router(api.router)
    app.include_router(proxy.router)
    app.include_router(anthropic_proxy.router)
    app.include_router(dashboard.router)  # the page at / and /v1/dashboard/...

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Liveness (no token needed): the process answers. ``ready`` is what /readyz says."""
        return {"ok": True, "ready": engine.ready, "generation": engine.generation}

    @app.get("/readyz", tags=["service"], responses={503: {"description": "Still loading."}})
    async def readyz() -> JSONResponse:
        """Readiness (no token needed): 200 once the skill library and the embedder are
        loaded, so calls get skills; 503 until then (calls are served, without skills)."""
        return readiness(engine)

    @app.get("/metrics", response_class=PlainTextResponse, tags=["service"])
    async def metrics() -> PlainTextResponse:
        """Prometheus text exposition format."""
        return PlainTextResponse(state.metrics.registry.render(), media_type=CONTENT_TYPE)

    # add_middleware wraps: the last added is the outermost.
    app.add_middleware(BodySizeLimit, max_bytes=settings.service.max_request_bytes)
    app.add_middleware(AgentScope, default_agent=engine.agent)  # inside the auth: reads it
    if token or scoped:
        app.add_middleware(BearerAuth, token=token, agent_tokens=scoped)
    app.add_middleware(RequestMetrics, metrics=state.metrics)
    return app
