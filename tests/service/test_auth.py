"""Who may call the service: token on and off, the bind policy, and `metaclaw serve` itself
(a real subprocess) refusing an open bind and never logging secrets."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from pydantic import SecretStr

from metaclaw_core import MetaClaw
from metaclaw_core.errors import ConfigError
from metaclaw_core.service import check_bind, create_app, is_loopback
from tests.service.conftest import LiveServer, service_settings
from tests.support.engines import SharedEmbedder
from tests.support.scripted_openai import Reply, ScriptedOpenAI

TOKEN = "svc-token-3f9a7c"
UPSTREAM_KEY = "sk-upstream-81b2"
METACLAW = Path(sys.executable).with_name("metaclaw")


@pytest.fixture(scope="module")
def engine(
    minilm: object, upstream: ScriptedOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetaClaw]:
    settings = service_settings(tmp_path_factory.mktemp("auth") / "home", upstream)
    e = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
    assert e.wait_ready(60)
    yield e
    e.close()


def _server(engine: MetaClaw, upstream: ScriptedOpenAI, **service: object) -> LiveServer:
    settings = engine.settings.model_copy(deep=True)
    settings.proxy.upstream_base_url = upstream.base_url
    for key, value in service.items():
        section, _, name = key.partition("__")
        setattr(getattr(settings, section), name, value)
    return LiveServer(create_app(engine, settings)).start()


@pytest.fixture(scope="module")
def guarded(engine: MetaClaw, upstream: ScriptedOpenAI) -> Iterator[LiveServer]:
    live = _server(
        engine,
        upstream,
        service__token=SecretStr(TOKEN),
        proxy__upstream_api_key=SecretStr(UPSTREAM_KEY),
    )
    yield live
    live.stop()


@pytest.fixture(scope="module")
def open_service(engine: MetaClaw, upstream: ScriptedOpenAI) -> Iterator[LiveServer]:
    live = _server(engine, upstream)
    yield live
    live.stop()


ROUTES = [
    ("GET", "/v1/status"),
    ("GET", "/v1/skills"),
    ("POST", "/v1/inject"),
    ("POST", "/v1/trajectories"),
    ("POST", "/v1/feedback"),
    ("POST", "/v1/sessions/x/end"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("GET", "/metrics"),
    ("GET", "/docs"),
    ("GET", "/openapi.json"),
    ("GET", "/no/such/route"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_with_a_token_every_route_but_healthz_needs_it(
    guarded: LiveServer, method: str, path: str
) -> None:
    with httpx.Client(base_url=guarded.url) as c:
        assert c.get("/healthz").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            r = c.request(method, path, headers=headers, json={})
            assert r.status_code == 401, (headers, r.text)
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["error"]["type"] == "authentication_error"
        for scheme in ("Bearer", "bearer"):
            r = c.request(method, path, headers={"Authorization": f"{scheme} {TOKEN}"}, json={})
            assert r.status_code != 401


def test_token_holder_uses_the_proxy_and_upstream_gets_only_its_own_key(
    guarded: LiveServer, upstream: ScriptedOpenAI
) -> None:
    upstream.enqueue(Reply("fine"))
    with openai.OpenAI(base_url=f"{guarded.url}/v1", api_key=TOKEN, max_retries=0) as client:
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hello"}]
        )
    assert r.choices[0].message.content == "fine"
    sent = upstream.chat_requests()[-1]
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert TOKEN not in sent.body.decode() and TOKEN not in str(sent.headers)


def test_without_a_token_the_clients_key_goes_upstream(
    open_service: LiveServer, upstream: ScriptedOpenAI
) -> None:
    upstream.enqueue(Reply("fine"))
    with openai.OpenAI(
        base_url=f"{open_service.url}/v1", api_key="sk-client-own", max_retries=0
    ) as client:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert upstream.chat_requests()[-1].headers["authorization"] == "Bearer sk-client-own"
    with httpx.Client(base_url=open_service.url) as c:
        assert c.get("/v1/status").json()["service"]["auth"] is False


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.internal", False),
    ],
)
def test_only_loopback_binds_go_without_a_token(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    check_bind(host, "a-token")
    if loopback:
        check_bind(host, None)
    else:
        with pytest.raises(ConfigError, match="without a token"):
            check_bind(host, None)


def test_create_app_refuses_an_open_bind(engine: MetaClaw) -> None:
    settings = engine.settings.model_copy(deep=True)
    settings.service.host = "0.0.0.0"
    with pytest.raises(ConfigError, match="METACLAW_SERVICE__TOKEN"):
        create_app(engine, settings)


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METACLAW_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", METACLAW_HOME=str(home), **extra)
    return env


def test_serve_refuses_a_non_loopback_bind_without_a_token(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [str(METACLAW), "serve", "--host", "0.0.0.0", "--port", "0"],
        env=_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr
    assert time.monotonic() - started < 30  # refused before anything heavy loads


def test_serve_runs_and_never_logs_the_token_or_keys(tmp_path: Path) -> None:
    with ScriptedOpenAI(default=Reply("ok")) as upstream:
        proc = subprocess.Popen(
            [str(METACLAW), "-v", "serve", "--port", "0", "--upstream", upstream.base_url],
            env=_env(
                tmp_path / "home",
                METACLAW_SERVICE__TOKEN=TOKEN,
                METACLAW_SERVICE__LOG_LEVEL="debug",
                METACLAW_PROXY__UPSTREAM_API_KEY=UPSTREAM_KEY,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert proc.stdout is not None
            lines: list[str] = []
            url = None
            deadline = time.monotonic() + 60
            while url is None and time.monotonic() < deadline:
                line = proc.stdout.readline()
                assert line, "serve exited: " + "".join(lines)
                lines.append(line)
                m = re.search(r"serving on (http://\S+)", line)
                url = m.group(1) if m else None
            assert url is not None
            auth = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=url, timeout=30) as c:
                assert c.get("/v1/status").status_code == 401
                assert c.get("/v1/status", headers=auth).status_code == 200
                r = c.post(
                    "/v1/chat/completions",
                    headers=auth,
                    json={"messages": [{"role": "user", "content": "hi"}], "user": "sub"},
                )
                assert r.status_code == 200, r.text
                # The capture lands after the answer went out: wait for it.
                while not c.get(
                    "/v1/trajectories", params={"session_id": "sub"}, headers=auth
                ).json():
                    assert time.monotonic() < deadline + 30
                    time.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        log = "".join(lines) + out
        assert proc.returncode == 0, log
        assert TOKEN not in log and UPSTREAM_KEY not in log
        assert upstream.chat_requests()[-1].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
