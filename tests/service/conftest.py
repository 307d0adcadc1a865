"""Fixtures for the service tests: one engine, one scripted upstream and one live server
(uvicorn on 127.0.0.1, an ephemeral port) per module, reached over real HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
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
from tests.support.scripted_openai import ScriptedOpenAI


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
