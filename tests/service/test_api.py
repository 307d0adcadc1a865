"""The engine API over real HTTP: inject, capture, feedback, sessions, skills, status, metrics."""

from __future__ import annotations

import re

import pytest

from tests.service.conftest import Service

OPENCLAW_TASK = (
    "[Mon 2026-11-30 02:55 UTC] Plan a three-day trip to Kyoto in autumn\n\n"
    "Runtime: agent=main | session=agent:main:explicit:s | sessionId=s | host=vm"
)
SKILLS = [
    {
        "name": "travel-itinerary",
        "description": "Planning trips, travel itineraries and day-by-day schedules",
        "body": "Give a day-by-day plan with morning, afternoon and evening; name the area.",
        "category": "travel",
    },
    {
        "name": "sql-migrations",
        "description": "Writing database schema migrations in SQL",
        "body": "Make every migration reversible and test the down step.",
    },
]


@pytest.fixture(scope="module")
def seeded(service: Service) -> Service:
    r = service.http.post("/v1/skills", json={"skills": SKILLS, "reason": "test seed"})
    assert r.status_code == 201, r.text
    return service


def test_inject_returns_block_skill_ids_and_generation(seeded: Service) -> None:
    r = seeded.http.post(
        "/v1/inject", json={"task": OPENCLAW_TASK, "session_id": "s", "framework": "openclaw"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["skill_ids"] == ["travel-itinerary"]
    assert "## travel-itinerary" in body["text"] and body["text"].startswith("<metaclaw-skills>")
    assert body["generation"] == seeded.engine.generation >= 1
    assert body["query"] == "Plan a three-day trip to Kyoto in autumn"  # envelope stripped
    assert body["call_id"] and body["degraded"] is None


def test_inject_from_messages_and_top_k_zero(seeded: Service) -> None:
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Write a SQL migration that adds an index"},
    ]
    r = seeded.http.post("/v1/inject", json={"messages": messages})
    assert r.json()["skill_ids"] == ["sql-migrations"]
    r = seeded.http.post("/v1/inject", json={"messages": messages, "top_k": 0})
    assert r.json()["skill_ids"] == [] and r.json()["text"] == ""


def test_inject_extracts_the_task_from_recent_messages_after_a_continue_prompt(
    seeded: Service,
) -> None:
    """What the OpenClaw plugin sends: the current message and the recent user messages; the
    service, not the plugin, decides the query (a continue prompt is no task)."""
    resume = (
        "[Mon 2026-11-30 10:55 UTC] Continue the current task from the existing transcript, "
        "preserving completed work."
    )
    recent = [
        {"role": "user", "content": "Write a SQL migration that adds an index"},
        {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nstate"},
    ]
    r = seeded.http.post(
        "/v1/inject", json={"task": resume, "messages": recent, "framework": "openclaw"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["query"] == "Write a SQL migration that adds an index"
    assert r.json()["skill_ids"] == ["sql-migrations"]
    alone = seeded.http.post("/v1/inject", json={"task": resume}).json()
    assert alone["query"].startswith("Continue the current task")  # nothing better to use


@pytest.mark.parametrize(
    ("payload", "status", "says"),
    [
        ({}, 422, "give 'task' or 'messages'"),
        ({"task": "x", "tpo_k": 3}, 422, "tpo_k"),
        ({"task": "x", "top_k": 99}, 422, "top_k"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, 422, "messages.0.role"),
        ({"task": "x", "call_id": "bad id with spaces"}, 422, "call_id"),
    ],
)
def test_inject_rejects_bad_payloads_with_a_clear_message(
    seeded: Service, payload: dict[str, object], status: int, says: str
) -> None:
    r = seeded.http.post("/v1/inject", json=payload)
    assert r.status_code == status, r.text
    assert says in r.json()["error"]["message"]


def test_malformed_json_is_400(seeded: Service) -> None:
    r = seeded.http.post(
        "/v1/inject", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_json"


def test_capture_with_call_id_keeps_injection_and_feedback_finds_it(seeded: Service) -> None:
    inj = seeded.http.post(
        "/v1/inject", json={"task": OPENCLAW_TASK, "session_id": "trip", "framework": "openclaw"}
    ).json()
    r = seeded.http.post(
        "/v1/trajectories",
        json={
            "call_id": inj["call_id"],
            "session_id": "trip",
            "framework": "openclaw",
            "messages": [
                {"role": "user", "content": "Plan a three-day trip to Kyoto in autumn"},
                {"role": "assistant", "content": "Day 1: Higashiyama ..."},
            ],
            "success": True,
            "latency_ms": 1234.5,
        },
    )
    assert r.status_code == 200, r.text
    tid = r.json()["trajectory_id"]
    assert r.json()["captured"] and r.json()["call_id"] == inj["call_id"]

    t = seeded.http.get(f"/v1/trajectories/{tid}").json()
    assert t["session_id"] == "trip" and t["framework"] == "openclaw"
    assert t["injected_skills"] == ["travel-itinerary"]
    assert t["generation"] == inj["generation"]
    assert t["output"]["text"] == "Day 1: Higashiyama ..."  # trailing assistant = the output
    assert [m["role"] for m in t["messages"]] == ["user"]
    assert t["metadata"]["success"] is True and t["error"] is None

    by_call = seeded.http.post("/v1/feedback", json={"call_id": inj["call_id"], "reward": 1})
    assert by_call.status_code == 200 and by_call.json()["trajectory_id"] == tid
    by_session = seeded.http.post(
        "/v1/feedback", json={"session_id": "trip", "reward": -0.5, "detail": "too long"}
    )
    assert by_session.json()["trajectory_id"] == tid
    rewards = seeded.http.get(f"/v1/trajectories/{tid}").json()["rewards"]
    assert sorted(r["value"] for r in rewards) == [-0.5, 1.0]


def test_failed_run_is_captured_as_an_error(seeded: Service) -> None:
    r = seeded.http.post(
        "/v1/trajectories",
        json={
            "session_id": "broken",
            "messages": [{"role": "user", "content": "x"}],
            "success": False,
        },
    )
    t = seeded.http.get(f"/v1/trajectories/{r.json()['trajectory_id']}").json()
    assert t["outcome"] == "error" and "failed" in t["error"]


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"trajectory_id": "abc", "reward": 2}, 422),
        ({"reward": 1}, 422),
        ({"call_id": "never-seen", "reward": 1}, 404),
        ({"session_id": "never-seen", "reward": 1}, 404),
    ],
)
def test_feedback_rejects_what_it_cannot_record(
    seeded: Service, payload: dict[str, object], status: int
) -> None:
    r = seeded.http.post("/v1/feedback", json=payload)
    assert r.status_code == status, r.text
    assert r.json()["error"]["message"]


def test_session_end_reports_captures_and_tells_observers(seeded: Service) -> None:
    ids = []
    for outcome in (True, False):
        r = seeded.http.post(
            "/v1/trajectories",
            json={
                "session_id": "ending",
                "messages": [{"role": "user", "content": "hi"}],
                "success": outcome,
            },
        )
        ids.append(r.json()["trajectory_id"])
    r = seeded.http.post("/v1/sessions/ending/end", json={"reason": "idle"})
    assert r.status_code == 200, r.text
    assert r.json() == {"session_id": "ending", "captured": 2, "failures": 1, "trajectory_ids": ids}
    assert seeded.observer.ended[-1] == {
        "session_id": "ending",
        "reason": "idle",
        "trajectory_ids": ids,
    }
    # A body is optional.
    assert seeded.http.post("/v1/sessions/other/end").json()["captured"] == 0


def test_skills_list_get_add_retire(seeded: Service) -> None:
    listed = seeded.http.get("/v1/skills").json()
    assert {s["name"] for s in listed["skills"]} >= {"travel-itinerary", "sql-migrations"}
    assert seeded.http.get("/v1/skills/sql-migrations").json()["category"] is None
    assert seeded.http.get("/v1/skills/nope").status_code == 404

    new = {"name": "tmp-skill", "description": "A temporary skill", "body": "Do the thing."}
    added = seeded.http.post("/v1/skills", json={"skills": [new]})
    assert added.status_code == 201 and added.json()["generation"]["added"] == ["tmp-skill"]
    again = seeded.http.post("/v1/skills", json={"skills": [new]})
    assert again.status_code == 409 and "already live" in again.json()["error"]["message"]
    bad = seeded.http.post("/v1/skills", json={"skills": [{**new, "name": "Not A Slug"}]})
    assert bad.status_code == 422 and "slug" in bad.json()["error"]["message"]
    twice = seeded.http.post("/v1/skills", json={"skills": [new, new]})
    assert twice.status_code == 422 and "more than once" in twice.json()["error"]["message"]

    gone = seeded.http.delete("/v1/skills/tmp-skill")
    assert gone.status_code == 200 and gone.json()["generation"]["retired"] == ["tmp-skill"]
    assert seeded.http.get("/v1/skills/tmp-skill").status_code == 404
    assert seeded.http.post("/v1/skills/retire", json={"names": ["tmp-skill"]}).status_code == 404
    history = seeded.http.get("/v1/generations").json()
    assert history[-1]["retired"] == ["tmp-skill"]


def test_status_healthz_and_docs(seeded: Service) -> None:
    assert seeded.http.get("/healthz").json()["ok"] is True
    status = seeded.http.get("/v1/status").json()
    assert status["engine"]["live_skills"] >= 2
    assert status["service"]["auth"] is False
    assert status["service"]["proxy"]["upstream_base_url"] == seeded.upstream.base_url
    assert seeded.http.get("/docs").status_code == 200
    paths = seeded.http.get("/openapi.json").json()["paths"]
    assert {"/v1/inject", "/v1/trajectories", "/v1/chat/completions", "/metrics"} <= set(paths)


_SAMPLE = re.compile(r'^[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? [-+0-9.eInf]+$')


def test_metrics_are_prometheus_text(seeded: Service) -> None:
    seeded.http.post("/v1/inject", json={"task": "trip to Kyoto"})
    r = seeded.http.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = [ln for ln in r.text.splitlines() if ln and not ln.startswith("#")]
    bad = [ln for ln in lines if not _SAMPLE.match(ln)]
    assert not bad, bad[:5]
    text = r.text
    assert 'metaclaw_http_requests_total{route="/v1/inject",method="POST",status="200"}' in text
    assert 'metaclaw_injections_total{framework="http",result="injected"}' in text
    assert "metaclaw_skill_generation " in text and "metaclaw_live_skills " in text


def test_oversized_bodies_get_413_declared_or_streamed(seeded: Service) -> None:
    big = b'{"task": "' + b"x" * (300 * 1024) + b'"}'
    declared = seeded.http.post(
        "/v1/inject", content=big, headers={"content-type": "application/json"}
    )
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "request_too_large"

    def chunks():  # no Content-Length: the limit must hold while the body streams in
        for i in range(0, len(big), 64 * 1024):
            yield big[i : i + 64 * 1024]

    streamed = seeded.http.post(
        "/v1/inject", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413
    proxied = seeded.http.post(
        "/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"}
    )
    assert proxied.status_code == 413
