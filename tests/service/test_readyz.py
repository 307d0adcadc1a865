"""``/healthz`` says alive, ``/readyz`` says skills are served: 503 while the skill library
or the embedder is loading (calls are answered without skills meanwhile), then 200."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from metaclaw_core import MetaClaw, Skill
from metaclaw_core.engine import GENERATION_UNKNOWN
from metaclaw_core.service import create_app
from metaclaw_core.skills.library import LibraryState, SkillLibrary
from tests.service.conftest import LiveServer
from tests.support.engines import SharedEmbedder, make_settings

TOKEN = "readyz-test-token-0123456789abcdef"


@pytest.fixture
def home(make_engine: Any, tmp_path: Path) -> Path:
    h = tmp_path / "home"
    engine = make_engine(make_settings(h, store__snapshot_cache_max_skills=0))
    engine.add_skills(
        Skill(
            name="iso-timestamps",
            description="Use when writing, logging or scheduling a date or time.",
            body="Write every timestamp in ISO 8601 with an explicit UTC offset.",
        )
    )
    engine.close()
    return h


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds the first read of the (real) skill library until the test sets it."""
    opened = threading.Event()
    real = SkillLibrary.state  # the one read every agent's snapshot is built from

    def held(self: SkillLibrary) -> LibraryState:
        opened.wait(30)
        return real(self)

    monkeypatch.setattr(SkillLibrary, "state", held)
    yield opened
    opened.set()


def test_readyz_is_503_until_the_library_and_embedder_are_loaded_then_200(
    home: Path, gate: threading.Event, minilm: Any
) -> None:
    # without the snapshot cache (which would serve skills at once): the cold start
    settings = make_settings(home, store__snapshot_cache_max_skills=0)
    settings.service.token = SecretStr(TOKEN)
    engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
    live = LiveServer(create_app(engine, settings, own_engine=True)).start()
    try:
        with httpx.Client(base_url=live.url, timeout=30) as http:  # no token: probes are open
            health = http.get("/healthz")
            assert health.status_code == 200
            assert health.json()["ok"] is True and health.json()["ready"] is False
            loading = http.get("/readyz")
            assert loading.status_code == 503
            assert loading.json()["ready"] is False
            assert loading.json()["waiting_for"] == ["skill library"]
            # served meanwhile, without skills, and the answer says why
            auth = {"authorization": f"Bearer {TOKEN}"}
            early = http.post("/v1/inject", json={"task": "Log the review at 9:30"}, headers=auth)
            assert early.status_code == 200
            assert early.json()["skills"] == [] and early.json()["text"] == ""
            assert early.json()["generation"] == GENERATION_UNKNOWN
            assert http.get("/v1/status").status_code == 401  # everything else needs the token

            gate.set()
            deadline = time.monotonic() + 30
            while (ready := http.get("/readyz")).status_code != 200:
                assert ready.status_code == 503
                assert time.monotonic() < deadline, ready.json()
                time.sleep(0.05)
            assert ready.json() == {"ready": True, "generation": 1, "embedder_backend": "numpy"}
            assert http.get("/healthz").json()["ready"] is True
            served = http.post(
                "/v1/inject", json={"task": "Log the design review at 9:30"}, headers=auth
            )
            assert served.json()["generation"] == 1
    finally:
        live.stop()


def test_readyz_names_a_library_that_failed_to_load(
    minilm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: SkillLibrary) -> LibraryState:
        raise OSError("the store's disk is gone")

    monkeypatch.setattr(SkillLibrary, "state", broken)
    engine = MetaClaw(make_settings(tmp_path / "h"), plugins=[SharedEmbedder(minilm)])
    live = LiveServer(create_app(engine, engine.settings, own_engine=True)).start()
    try:
        assert engine.wait_ready(30)
        r = httpx.get(f"{live.url}/readyz", timeout=30)
        assert r.status_code == 503
        assert r.json()["waiting_for"] == ["skill library"]
        assert "disk is gone" in r.json()["library_error"]
    finally:
        live.stop()
