"""Agents over HTTP: the header and the path prefix name the agent; a token limited to agent
A cannot read or act for agent B (real server, real httpx and openai clients)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from pydantic import SecretStr

from metaclaw_core import MetaClaw, Skill
from metaclaw_core.service import create_app
from tests.service.conftest import LiveServer, service_settings
from tests.support.engines import SharedEmbedder
from tests.support.scripted_openai import Reply, ScriptedOpenAI

ADMIN = "svc-admin-token-5d1e2f"
TOKEN_A = "agent-a-token-7c3b9e0d"
TOKEN_B_ENV = "METACLAW_TEST_TOKEN_B"
TOKEN_B = "agent-b-token-1f4a8c2e"
REFUND = Skill(
    name="refund-policy",
    description="When a customer asks for a refund of an order",
    body="Check the order date first: refunds are possible within 30 days.",
)
TASK = "A customer asks for a refund of the order they placed"


@pytest.fixture(scope="module")
def server(
    minilm: object,
    upstream: ScriptedOpenAI,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LiveServer, MetaClaw]]:
    mp = pytest.MonkeyPatch()
    mp.setenv(TOKEN_B_ENV, TOKEN_B)
    settings = service_settings(tmp_path_factory.mktemp("agents") / "home", upstream)
    settings.proxy.upstream_base_url = upstream.base_url
    settings.service.token = SecretStr(ADMIN)
    settings.service.agent_tokens = {TOKEN_A: ["a"], f"env:{TOKEN_B_ENV}": ["b"]}
    engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
    assert engine.wait_ready(60)
    engine.library_of("a").add(REFUND)
    live = LiveServer(create_app(engine, settings)).start()
    yield live, engine
    live.stop()
    engine.close()
    mp.undo()


def _get(live: LiveServer, path: str, token: str, **headers: str) -> httpx.Response:
    return httpx.get(
        f"{live.url}{path}", headers={"Authorization": f"Bearer {token}", **headers}, timeout=30
    )


def _inject(live: LiveServer, token: str, path: str = "/v1/inject", **headers: str) -> Any:
    return httpx.post(
        f"{live.url}{path}",
        json={"messages": [{"role": "user", "content": TASK}]},
        headers={"Authorization": f"Bearer {token}", **headers},
        timeout=30,
    )


def test_the_header_and_the_path_prefix_name_the_agent(server: Any) -> None:
    live, _ = server
    by_header = _inject(live, ADMIN, **{"X-MetaClaw-Agent": "a"})
    by_prefix = _inject(live, ADMIN, path="/agents/a/v1/inject")
    assert by_header.status_code == by_prefix.status_code == 200
    assert by_header.json()["skill_ids"] == by_prefix.json()["skill_ids"] == ["refund-policy"]
    assert _inject(live, ADMIN).json()["skill_ids"] == []  # the engine's (default) agent
    assert _inject(live, ADMIN, **{"X-MetaClaw-Agent": "b"}).json()["skill_ids"] == []
    # a token for one agent speaks for it when the request names none
    assert _inject(live, TOKEN_A).json()["skill_ids"] == ["refund-policy"]
    bad = _inject(live, ADMIN, **{"X-MetaClaw-Agent": "not valid!"})
    assert bad.status_code == 400 and "not an agent id" in bad.text
    both = _inject(live, ADMIN, path="/agents/a/v1/inject", **{"X-MetaClaw-Agent": "b"})
    assert both.status_code == 400


def test_a_token_scoped_to_one_agent_cannot_read_another(server: Any, upstream: Any) -> None:
    live, engine = server
    # B's trajectory, captured through B's own token
    made = httpx.post(
        f"{live.url}/v1/trajectories",
        json={"messages": [{"role": "user", "content": "b's private task"}], "output": "ok"},
        headers={"Authorization": f"Bearer {TOKEN_B}"},
        timeout=30,
    )
    assert made.status_code == 200
    b_tid = made.json()["trajectory_id"]
    assert engine.flush(10)
    stored = engine.trajectories.get(b_tid)
    assert stored is not None and stored.agent == "b"
    # A's token cannot rate B's trajectory; B's can (and the reward is stored as B's)
    rate = {"trajectory_id": b_tid, "reward": -1.0}
    for token, status in ((TOKEN_A, 404), (TOKEN_B, 200)):
        r = httpx.post(
            f"{live.url}/v1/feedback",
            json=rate,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert r.status_code == status, r.text
    assert engine.flush(10)
    rated = engine.trajectories.get(b_tid)
    assert rated is not None and [(x.value, x.agent) for x in rated.rewards] == [(-1.0, "b")]
    # A's token asking for B, by header or by prefix: refused before any route runs
    for path, headers in [
        ("/v1/skills", {"X-MetaClaw-Agent": "b"}),
        ("/v1/trajectories", {"X-MetaClaw-Agent": "b"}),
        (f"/v1/trajectories/{b_tid}", {"X-MetaClaw-Agent": "b"}),
        ("/v1/skills/evidence", {"X-MetaClaw-Agent": "b"}),
        ("/agents/b/v1/trajectories", {}),
        ("/agents/b/v1/dashboard/summary", {}),
        ("/v1/skills", {"X-MetaClaw-Agent": "default"}),
    ]:
        r = _get(live, path, TOKEN_A, **headers)
        assert r.status_code == 403, (path, r.status_code, r.text)
        assert b_tid not in r.text and "private" not in r.text
    # as itself, A sees its own and never B's
    mine = _get(live, "/v1/trajectories", TOKEN_A)
    assert mine.status_code == 200 and b_tid not in mine.text
    assert _get(live, f"/v1/trajectories/{b_tid}", TOKEN_A).status_code == 404
    skills = _get(live, "/v1/skills", TOKEN_A).json()
    assert [s["name"] for s in skills["skills"]] == ["refund-policy"]
    assert _get(live, "/v1/skills", TOKEN_B).json()["skills"] == []
    # the service status lists only the agents a scoped token covers; the admin's, all
    listed = _get(live, "/v1/status", TOKEN_A).json()["engine"]["agents"]
    assert set(listed) == {"a"}, listed
    assert {"a", "default"} <= set(_get(live, "/v1/status", ADMIN).json()["engine"]["agents"])
    # the proxy: A's token cannot call the model as B
    client = openai.OpenAI(
        base_url=f"{live.url}/agents/b/v1", api_key=TOKEN_A, max_retries=0, timeout=30
    )
    with pytest.raises(openai.PermissionDeniedError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hello"}])
    assert upstream.chat_requests() == []
    # ... and as A, through its base URL, the block is A's and A's call is captured as A's
    upstream.enqueue(Reply("Refunds within 30 days."))
    client_a = openai.OpenAI(
        base_url=f"{live.url}/agents/a/v1", api_key=TOKEN_A, max_retries=0, timeout=30
    )
    client_a.chat.completions.create(model="m", messages=[{"role": "user", "content": TASK}])
    sent = upstream.chat_requests()[0].body.decode()
    assert "refund-policy" in sent or "Check the order date" in sent
    assert "x-metaclaw-agent" not in {k.lower() for k in upstream.chat_requests()[0].headers}
    # the dashboard's data, under A's token: A's, and the picker offers A alone
    summary = _get(live, "/v1/dashboard/summary", TOKEN_A).json()
    assert summary["agent"] == "a" and summary["trajectories"] == 1 and summary["live_skills"] == 1
    picker = _get(live, "/v1/dashboard/agents", TOKEN_A).json()
    assert [a["agent"] for a in picker["agents"]] == ["a"]
    dash_skills = _get(live, "/v1/dashboard/skills", TOKEN_A).json()["skills"]
    assert [s["name"] for s in dash_skills] == ["refund-policy"]
    assert _get(live, "/v1/dashboard/skills", TOKEN_B).json()["skills"] == []
    everyone = _get(live, "/v1/dashboard/agents", ADMIN).json()["agents"]
    assert {"a", "default"} <= {a["agent"] for a in everyone}
    # the admin token covers every agent
    assert (
        _get(live, f"/v1/trajectories/{b_tid}", ADMIN, **{"X-MetaClaw-Agent": "b"}).json()["id"]
        == b_tid
    )
    assert _get(live, "/v1/skills", "wrong-token-000000").status_code == 401
