"""Fixtures for the service tests: one engine, one scripted upstream and one live server
(uvicorn on 127.0.0.1, an ephemeral port) per module, reached over real HTTP; the coding-agent
protocols (Anthropic Messages, OpenAI Responses) get their own scripted upstreams."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from metaclaw_core import MetaClaw, Settings, hookimpl
from metaclaw_core.service import create_app
from metaclaw_core.service.server import ThreadedServer
from metaclaw_core.service.state import ServiceState
from tests.support.engines import SharedEmbedder, make_settings
from tests.support.scripted_anthropic import ScriptedAnthropic
from tests.support.scripted_openai import ScriptedOpenAI
from tests.support.scripted_responses import ScriptedResponses


class LiveServer(ThreadedServer):
    """The service app served by uvicorn on a background thread (lifespan on)."""

    def __init__(self, app: FastAPI) -> None:
        super().__init__(app, lifespan="on")

    @property
    def state(self) -> ServiceState:
        state: ServiceState = self.app.state.metaclaw
        return state


@dataclass
class SessionObserver:
    """A plugin recording ``metaclaw_session_ended`` calls."""

    ended: list[dict[str, Any]] = field(default_factory=list)

    @hookimpl
    def metaclaw_session_ended(
        self, session_id: str, reason: str | None, trajectory_ids: list[str]
    ) -> None:
        self.ended.append(
            {"session_id": session_id, "reason": reason, "trajectory_ids": trajectory_ids}
        )


@dataclass
class Service:
    """What a test gets: the live server, its engine and the scripted upstream."""

    live: LiveServer
    engine: MetaClaw
    upstream: ScriptedOpenAI
    observer: SessionObserver
    http: httpx.Client

    @property
    def url(self) -> str:
        return self.live.url

    @property
    def settings(self) -> Settings:
        return self.live.state.settings


def service_settings(home: Path, upstream: ScriptedOpenAI, **overrides: Any) -> Settings:
    settings = make_settings(home, **overrides)
    settings.proxy.upstream_base_url = upstream.base_url
    settings.proxy.upstream_api_key_env = "METACLAW_TEST_NO_SUCH_KEY"
    return settings


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def service(
    minilm: Any, upstream: ScriptedOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    home = tmp_path_factory.mktemp("service") / "home"
    settings = service_settings(home, upstream)
    settings.service.max_request_bytes = 256 * 1024
    observer = SessionObserver()
    engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm), observer])
    assert engine.wait_ready(60)
    live = LiveServer(create_app(engine, settings)).start()
    with httpx.Client(base_url=live.url, timeout=30) as http:
        yield Service(live, engine, upstream, observer, http)
    live.stop()
    engine.close()


@pytest.fixture(autouse=True)
def _fresh_script(request: pytest.FixtureRequest) -> None:
    """Each test starts with an empty script and no recorded upstream requests."""
    if "upstream" in request.fixturenames:
        request.getfixturevalue("upstream").clear()


@dataclass
class AgentService:
    """The live service with a scripted Anthropic upstream and a scripted Responses one."""

    live: LiveServer
    engine: MetaClaw
    anthropic: ScriptedAnthropic
    responses: ScriptedResponses
    http: httpx.Client

    @property
    def url(self) -> str:
        return self.live.url

    @property
    def settings(self) -> Settings:
        return self.live.state.settings


AGENT_SKILL = {
    "name": "unit-conversion",
    "description": "Converting units of measure such as miles to kilometres",
    "body": "Show the conversion factor, then the result rounded to two decimals.",
}


@contextmanager
def serve_agents(minilm: Any, home: Path, **upstreams: Any) -> Iterator[AgentService]:
    """A live service proxying /v1/messages and /v1/responses to scripted upstreams (given,
    or new ones), with one skill live. Keyword arguments go to both upstreams."""
    with (
        ScriptedAnthropic(**upstreams) as anthropic_upstream,
        ScriptedResponses(**upstreams) as responses_upstream,
    ):
        settings = make_settings(home)
        settings.proxy.upstream_base_url = responses_upstream.base_url
        settings.proxy.anthropic_base_url = anthropic_upstream.url
        settings.proxy.upstream_api_key_env = "METACLAW_TEST_NO_SUCH_KEY"
        settings.service.max_request_bytes = 256 * 1024
        engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
        assert engine.wait_ready(60)
        live = LiveServer(create_app(engine, settings)).start()
        try:
            with httpx.Client(base_url=live.url, timeout=30) as http:
                r = http.post("/v1/skills", json={"skills": [AGENT_SKILL]})
                assert r.status_code == 201, r.text
                yield AgentService(live, engine, anthropic_upstream, responses_upstream, http)
        finally:
            live.stop()
            engine.close()


@pytest.fixture(scope="module")
def agent_service(minilm: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentService]:
    """One service per module proxying /v1/messages and /v1/responses, one skill live."""
    with serve_agents(minilm, tmp_path_factory.mktemp("agents") / "home") as svc:
        yield svc


@pytest.fixture(autouse=True)
def _fresh_agent_scripts(request: pytest.FixtureRequest) -> None:
    if "agent_service" in request.fixturenames:
        svc = request.getfixturevalue("agent_service")
        svc.anthropic.clear()
        svc.responses.clear()


def captured_session(http: httpx.Client, session: str, n: int = 1) -> list[dict[str, Any]]:
    """Full trajectories of ``session`` (newest first), waiting until ``n`` have landed."""
    deadline = time.monotonic() + 10
    while True:
        found = http.get("/v1/trajectories", params={"session_id": session}).json()
        if len(found) >= n or time.monotonic() > deadline:
            return [http.get(f"/v1/trajectories/{t['id']}").json() for t in found]
        time.sleep(0.05)
