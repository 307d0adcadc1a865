"""Fixtures of the dashboard tests: a seeded engine per module, served twice by real uvicorn
(once open, once with a token), and the browser (Debian chromium + playwright-core)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from metaclaw_core import MetaClaw
from metaclaw_core.service import create_app
from tests.dashboard.seed import Seeded, dashboard_settings, seed
from tests.service.conftest import LiveServer
from tests.support.engines import SharedEmbedder
from tests.support.scripted_openai import ScriptedOpenAI

TOKEN = "dash-token-7c41e09b"
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@dataclass
class Dashboard:
    """A seeded engine and the two servers in front of it."""

    seeded: Seeded
    open: LiveServer
    guarded: LiveServer

    @property
    def engine(self) -> MetaClaw:
        return self.seeded.engine

    def client(self, *, token: bool = False) -> httpx.Client:
        live = self.guarded if token else self.open
        headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
        return httpx.Client(base_url=live.url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def evolver_llm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def dashboard(
    minilm: Any, evolver_llm: ScriptedOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dashboard]:
    settings = dashboard_settings(tmp_path_factory.mktemp("dashboard") / "home", evolver_llm)
    engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
    assert engine.wait_ready(60)
    seeded = seed(engine, evolver_llm)
    guarded_settings = settings.model_copy(deep=True)
    guarded_settings.service.token = SecretStr(TOKEN)
    open_ = LiveServer(create_app(engine, settings)).start()
    guarded = LiveServer(create_app(engine, guarded_settings)).start()
    yield Dashboard(seeded, open_, guarded)
    guarded.stop()
    open_.stop()
    engine.close()


@dataclass(frozen=True)
class Browser:
    node: str
    chromium: Path
    playwright_core: Path


def _browser_missing() -> str | None:
    cache = Path(os.environ.get("METACLAW_BROWSER_CACHE", ROOT / ".cache" / "browser"))
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (run scripts/setup-browser.sh)"
    if not (cache / "node_modules" / "playwright-core" / "package.json").is_file():
        return f"playwright-core is not installed in {cache} (run scripts/setup-browser.sh)"
    return None


@pytest.fixture(scope="session")
def browser() -> Browser:
    """Debian chromium and playwright-core; a skip without them (with
    METACLAW_REQUIRE_BROWSER=1 a failure)."""
    missing = _browser_missing()
    if missing is not None:
        message = f"browser tests need Debian chromium and playwright-core: {missing}"
        if os.environ.get("METACLAW_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " (METACLAW_REQUIRE_BROWSER=1)")
        pytest.skip(message)
    cache = Path(os.environ.get("METACLAW_BROWSER_CACHE", ROOT / ".cache" / "browser"))
    node = shutil.which("node")
    assert node is not None
    return Browser(node, CHROMIUM, cache / "node_modules" / "playwright-core")
