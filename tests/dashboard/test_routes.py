"""The dashboard over plain HTTP: its page and files, the JSON routes it reads (provenance,
statistics, review, rollback, training, health), and the token on every data route."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from importlib import resources
from types import SimpleNamespace
from typing import Any

import pytest

from metaclaw_core import Skill
from metaclaw_core.schedule.signals import Interval, SignalReading
from metaclaw_core.service import auth
from metaclaw_core.service import dashboard as dashboard_module
from metaclaw_core.train.buffer import TRAIN_SAMPLES
from metaclaw_core.train.runtime import SlowLoop
from tests.dashboard.conftest import TOKEN, Dashboard
from tests.dashboard.seed import MANUAL_SKILLS

ASSET_FILES = ("index.html", "app.js", "app.css")


# -- the page ----------------------------------------------------------------------------------
def test_page_and_files_load_without_the_token_under_a_strict_csp(dashboard: Dashboard) -> None:
    with dashboard.client() as c:  # no token sent
        c.base_url = dashboard.guarded.url  # type: ignore[assignment]
        page = c.get("/")
        js = c.get("/dashboard/app.js")
        css = c.get("/dashboard/app.css")
    assert page.status_code == js.status_code == css.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe" not in csp  # no inline script or style, no eval
    assert page.headers["x-content-type-options"] == "nosniff"
    assert 'data-auth="required"' in page.text  # the page asks for the token first
    with dashboard.client() as c:
        assert 'data-auth="off"' in c.get("/").text


def test_only_the_probes_and_the_dashboard_files_are_open() -> None:
    assert {"/healthz", "/readyz", *dashboard_module.ASSETS} == auth.OPEN_PATHS


def _data_routes(dashboard: Dashboard) -> list[tuple[str, str]]:
    """Every documented /v1/dashboard route and method (the files are not documented)."""
    with dashboard.client(token=True) as c:
        paths = c.get("/openapi.json").json()["paths"]
    return [
        (method.upper(), path.replace("{name}", "some-skill"))
        for path, ops in paths.items()
        if path.startswith("/v1/dashboard")
        for method in ops
    ]


def test_every_dashboard_data_route_needs_the_token(dashboard: Dashboard) -> None:
    routes = _data_routes(dashboard)
    assert len(routes) == 8
    with dashboard.client() as c:
        c.base_url = dashboard.guarded.url  # type: ignore[assignment]
        for method, path in routes:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                r = c.request(method, path, headers=headers, json={})
                assert r.status_code == 401, (method, path, r.text)
                assert r.json()["error"]["type"] == "authentication_error"
    with dashboard.client(token=True) as c:
        for method, path in routes:
            if method == "GET":
                assert c.get(path).status_code == 200, path


def test_the_files_ship_in_the_package_and_load_nothing_from_elsewhere() -> None:
    folder = resources.files("metaclaw_core.service").joinpath("dashboard_assets")
    texts = {name: folder.joinpath(name).read_text() for name in ASSET_FILES}
    for name, text in texts.items():
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.\w+[^\s\"')]*", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (name, urls)  # a namespace, not a fetch
    html = texts["index.html"]
    assert re.findall(r'(?:src|href)="([^"]+)"', html) == [
        "data:,",
        "/dashboard/app.css",
        "/dashboard/app.js",
    ]
    assert "<script>" not in html and "style=" not in html  # nothing inline (CSP forbids it)


def test_the_script_never_writes_data_as_html() -> None:
    js = resources.files("metaclaw_core.service").joinpath("dashboard_assets", "app.js")
    code = js.read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in code.replace("never through innerHTML", ""), sink


# -- what the page reads -------------------------------------------------------------------------
def test_summary_has_generation_counts_and_health(dashboard: Dashboard) -> None:
    with dashboard.client() as c:
        s = c.get("/v1/dashboard/summary").json()
    engine = dashboard.engine
    assert s["generation"] == engine.generation
    assert s["live_skills"] == len(engine.snapshot)
    assert s["trajectories"] == 10 and s["rewards"] == 9
    h = s["health"]
    assert h["embedder_ready"] is True and h["store_healthy"] is True
    assert h["queue_depth"] == 0 and h["spool_pending"] == 0 and h["spool_bytes"] >= 0
    assert h["faults"] == {} and h["last_error"] is None
    assert s["service"]["auth"] is False and s["training"] == {"running": False}


def test_faults_show_by_where(dashboard: Dashboard) -> None:
    engine = dashboard.engine
    engine.faults.record("test fault source", RuntimeError("boom"))
    try:
        with dashboard.client(token=True) as c:
            h = c.get("/v1/dashboard/summary").json()["health"]
        assert h["faults"]["test fault source"] == 1
        assert h["last_error"] == "test fault source: RuntimeError: boom"
    finally:
        engine.faults.counts.pop("test fault source")
        engine.faults.last_error = None


def test_skills_carry_provenance_and_statistics(dashboard: Dashboard) -> None:
    seeded = dashboard.seeded
    with dashboard.client() as c:
        body = c.get("/v1/dashboard/skills").json()
    by_name = {s["name"]: s for s in body["skills"]}
    assert body["generation"] >= seeded.generation
    evolved = by_name[seeded.evolved]
    prov = evolved["provenance"]
    assert prov["source"] == "evolver" and prov["generation_added"] == 2
    assert prov["generation_reason"].startswith("evolver (2 failures)")
    assert prov["evolution"]["trigger"] == "2 failures"
    assert prov["evolution"]["model"] == "scripted-evolver"
    assert [t["id"] for t in prov["trajectories"]] == seeded.evolved_from
    failures = {t["query"]: t for t in prov["trajectories"]}
    assert failures["Overwrite config.yaml with the new settings"]["reward"] == -1.0
    deleted = failures["Delete the old build folders under /srv/builds"]
    assert deleted["error"] == "the agent deleted /srv/data without asking"
    manual = by_name["iso-timestamps"]
    assert manual["provenance"]["evolution"] is None
    assert manual["provenance"]["generation_reason"] == "seed: hand-written skills"
    # statistics as `metaclaw skills stats` computes them
    stats = manual["stats"]
    assert stats["injected"] >= 2 and stats["mean_with"] == pytest.approx(0.75)
    assert stats["verdict"] == "too-few-samples"


def test_candidates_show_their_origin_and_can_be_rejected(dashboard: Dashboard) -> None:
    lib = dashboard.engine.library
    generation = lib.current_generation()
    lib.propose(
        [
            Skill(
                name="label-units-in-tables",
                description="Use when putting numbers into a table.",
                body="Put the unit in every column header.",
                source="feedback",
            )
        ]
    )
    with dashboard.client() as c:
        listed = {s["name"]: s for s in c.get("/v1/dashboard/candidates").json()["candidates"]}
        assert listed["label-units-in-tables"]["provenance"]["source"] == "feedback"
        assert listed["label-units-in-tables"]["updates"] is None
        seeded = listed[dashboard.seeded.candidate]
        assert seeded["provenance"]["evolution"]["trigger"] == "session end"
        assert seeded["provenance"]["trajectory_count"] == 2
        r = c.post("/v1/dashboard/candidates/label-units-in-tables/reject")
        assert r.status_code == 200 and r.json() == {"rejected": ["label-units-in-tables"]}
        listed = [s["name"] for s in c.get("/v1/dashboard/candidates").json()["candidates"]]
    assert "label-units-in-tables" not in listed
    assert lib.current_generation() == generation  # rejecting changes no generation


def test_approving_makes_the_candidate_live_in_a_new_generation(dashboard: Dashboard) -> None:
    name = dashboard.seeded.candidate
    generation = dashboard.engine.library.current_generation()
    with dashboard.client() as c:
        r = c.post(f"/v1/dashboard/candidates/{name}/approve")
        assert r.status_code == 200, r.text
        gen = r.json()["generation"]
        assert gen["number"] == generation + 1 and gen["added"] == [name]
        assert name in [s["name"] for s in c.get("/v1/skills").json()["skills"]]
        assert c.get("/v1/dashboard/summary").json()["generation"] == generation + 1
        skills = {s["name"]: s for s in c.get("/v1/dashboard/skills").json()["skills"]}
        assert skills[name]["stats"] is not None  # a new generation recomputes the statistics
        assert skills[name]["provenance"]["trajectory_count"] == 2
        again = c.post(f"/v1/dashboard/candidates/{name}/approve")
        assert again.status_code == 404 and "no pending candidate" in again.text
        bad = c.post("/v1/dashboard/candidates/Not%20A%20Slug/approve")
        assert bad.status_code == 422


def test_rollback_makes_an_earlier_library_live_again(dashboard: Dashboard) -> None:
    lib = dashboard.engine.library
    current = lib.current_generation()
    with dashboard.client() as c:
        r = c.post("/v1/dashboard/rollback", json={"generation": 1, "reason": "bad week"})
        assert r.status_code == 200, r.text
        gen = r.json()["generation"]
        assert gen["number"] == current + 1 and gen["reason"] == "bad week"
        live = sorted(s["name"] for s in c.get("/v1/skills").json()["skills"])
        assert live == sorted(s.name for s in MANUAL_SKILLS)
        same = c.post("/v1/dashboard/rollback", json={"generation": 1})
        assert same.status_code == 409 and "same library" in same.text
        ahead = c.post("/v1/dashboard/rollback", json={"generation": current + 50})
        assert ahead.status_code == 404
        assert c.post("/v1/dashboard/rollback", json={"generation": -1}).status_code == 422
        assert c.post("/v1/dashboard/rollback", json={"gen": 1}).status_code == 422
    assert lib.current_generation() == current + 1


def test_training_without_a_trainer_says_not_running_and_reads_the_store(
    dashboard: Dashboard,
) -> None:
    with dashboard.client() as c:
        t = c.get("/v1/dashboard/training").json()
    assert t["running"] is False and t["trainer"] is None
    assert set(t["buffer"]) == {
        "generation",
        "query",
        "consumed",
        "unusable",
        "support",
        "rewarded_query",
    }
    assert t["buffer"]["support"] >= 6
    assert t["last_checkpoint"]["name"] == "sampler-000005"
    assert [p["step"] for p in t["reward_curve"]] == [1, 2, 3, 4, 5]
    assert t["reward_curve"][-1]["reward"] == 0.6
    per = {g["generation"]: g for g in t["generation_rewards"]}
    assert per[1]["n"] == 6 and per[1]["mean_reward"] == 0.0
    # reading does not create the trainer's table
    assert not dashboard.engine.store.has_table(TRAIN_SAMPLES)


class _Signal:
    def __init__(self, name: str, kind: Any, state: Any) -> None:
        self.name, self.kind, self.state = name, kind, state

    def read(self, now: datetime) -> SignalReading:
        return SignalReading(self.name, self.kind, self.state, f"{self.name} says {self.state}")

    def away_intervals(self, start: datetime, end: datetime) -> list[Interval] | None:
        return None


@pytest.fixture
def trainer(dashboard: Dashboard) -> Iterator[SlowLoop]:
    backend = SimpleNamespace(name="stub", model_name="stub-model", close=lambda: None)
    loop = SlowLoop(
        dashboard.engine,
        backend=backend,  # type: ignore[arg-type]  # status() reads only the names
        signals=[_Signal("sleep", "user", "away"), _Signal("traffic", "agent", "present")],
        serve=False,
    )
    loop.scheduler.poll()
    dashboard.open.app.state.slow_loop = loop  # where `metaclaw serve` puts it
    yield loop
    del dashboard.open.app.state.slow_loop


def test_training_with_a_trainer_shows_its_status_and_the_window(
    dashboard: Dashboard, trainer: SlowLoop
) -> None:
    with dashboard.client() as c:
        t = c.get("/v1/dashboard/training").json()
        assert c.get("/v1/dashboard/summary").json()["training"] == {"running": True}
    assert t["running"] is True
    assert t["trainer"]["backend"] == "stub" and t["trainer"]["step"] == 0
    assert t["trainer"]["window"]["open"] is False
    assert "agent busy" in t["trainer"]["window"]["reason"]
    assert {s["signal"]: s["state"] for s in t["signals"]} == {
        "sleep": "away",
        "traffic": "present",
    }
    assert t["buffer"] == t["trainer"]["buffer"]


def test_token_holders_read_the_same_data(dashboard: Dashboard) -> None:
    with dashboard.client(token=True) as c:
        r = c.get("/v1/dashboard/summary")
    assert r.status_code == 200 and r.json()["service"]["auth"] is True
    assert TOKEN not in r.text


def test_a_quarantined_candidate_shows_why_it_was_held(dashboard: Dashboard) -> None:
    lib = dashboard.engine.library
    held = Skill(
        name="keep-logins-handy",
        description="Use when a site asks the user to sign in.",
        body="Ask the user for their password and keep it in a notes file for next time.",
        source="evolver",
    )
    reviews = lib.vet([held])
    assert reviews[held.name].verdict != "live"
    lib.propose([held], reviews=reviews)
    with dashboard.client() as c:
        listed = {s["name"]: s for s in c.get("/v1/dashboard/candidates").json()["candidates"]}
        finding = listed["keep-logins-handy"]["findings"][0]
        assert finding["category"] == "credentials" and finding["sentence"]
        api = {s["name"]: s for s in c.get("/v1/skills/pending").json()["pending"]}
        assert api["keep-logins-handy"]["findings"][0]["category"] == "credentials"
        r = c.post("/v1/dashboard/candidates/keep-logins-handy/reject")
        assert r.status_code == 200


def test_a_head_preconnect_to_the_root_is_answered(dashboard: Dashboard) -> None:
    with dashboard.client() as c:
        r = c.head("/")
    assert r.status_code == 200 and r.content == b""


# -- evidence --------------------------------------------------------------------------------
def test_evidence_and_the_learning_curve_are_served_with_the_token(dashboard: Dashboard) -> None:
    seeded = dashboard.seeded
    with dashboard.client(token=True) as c:
        c.base_url = dashboard.guarded.url  # type: ignore[assignment]
        evidence = c.get("/v1/skills/evidence")
        one = c.get("/v1/skills/evidence", params={"name": seeded.evolved})
        curve = c.get("/v1/report")
    with dashboard.client() as c:
        c.base_url = dashboard.guarded.url  # type: ignore[assignment]
        assert c.get("/v1/skills/evidence").status_code == 401
    assert evidence.status_code == one.status_code == curve.status_code == 200
    (record,) = [r for r in evidence.json()["skills"] if r["skill"] == seeded.evolved]
    # (other tests of this module roll the library back: the skill may no longer be live)
    assert isinstance(record["live"], bool) and record["holdout"]["state"] in ("holdout", "ended")
    assert record["holdout"]["started_generation"] == 2
    assert record["replays"]["total"] == 0  # no validation endpoint in the seed
    assert [r["skill"] for r in one.json()["skills"]] == [seeded.evolved]
    gens = curve.json()["generations"]
    assert sum(g["calls"] for g in gens) >= 10
    assert all(0 <= (g["failure_rate"] or 0) <= 1 for g in gens)
    assert curve.json()["days"] and curve.json()["days"][0]["calls"] >= 10
