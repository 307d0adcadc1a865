"""The dashboard end to end in headless Debian chromium, driven by playwright-core (e2e.mjs),
against real uvicorn servers in front of a seeded engine: it loads without console errors,
search filters the skills, approving a candidate and rolling back change the generation (seen
through the HTTP API too), untrusted text stays text, and the token prompt works.

The screenshots and results.json are copied to tests/dashboard/artifacts/ (gitignored)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.conftest import ARTIFACTS, TOKEN, Browser, Dashboard
from tests.dashboard.seed import HOSTILE_TASK

E2E = Path(__file__).with_name("e2e.mjs")
SEARCH = "timestamp"
OTHER_AGENT = "helpdesk"
OTHER_SKILL = {
    "name": "greet-by-name",
    "description": "When a customer writes to the help desk",
    "body": "Greet the customer by name before you answer.",
}


@pytest.fixture(scope="module")
def run(
    browser: Browser, dashboard: Dashboard, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Run the whole browser session once; the tests below read what it recorded."""
    out = tmp_path_factory.mktemp("e2e")
    seeded = dashboard.seeded
    config = {
        "openUrl": dashboard.open.url + "/",
        "guardedUrl": dashboard.guarded.url + "/",
        "token": TOKEN,
        "chromium": str(browser.chromium),
        "playwrightCore": str(browser.playwright_core),
        "outDir": str(out),
        "search": SEARCH,
        "evolved": seeded.evolved,
        "candidate": seeded.candidate,
        "otherAgent": OTHER_AGENT,
        "otherSkill": OTHER_SKILL,
        "timeoutMs": 30000,
    }
    (out / "config.json").write_text(json.dumps(config))
    proc = subprocess.run(
        [browser.node, str(E2E), str(out / "config.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    ARTIFACTS.mkdir(exist_ok=True)
    for f in out.iterdir():
        if f.suffix in (".png", ".json") and f.name != "config.json":
            shutil.copy2(f, ARTIFACTS / f.name)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    assert "fatal" not in results, results["fatal"]
    return results


def _phase(entries: list[dict[str, Any]], *phases: str) -> list[dict[str, Any]]:
    return [e for e in entries if e["phase"] in phases]


GOOD_PHASES = (
    "load",
    "search",
    "approve",
    "rollback",
    "agents",
    "auth-prompt",
    "auth-ok",
    "auth-reload",
)


def test_page_loads_with_no_console_errors_and_nothing_offsite(run: dict[str, Any]) -> None:
    assert _phase(run["console"], *GOOD_PHASES) == []
    assert run["pageErrors"] == []
    assert run["failedRequests"] == []
    assert _phase(run["httpErrors"], *GOOD_PHASES) == []
    assert run["offsite"] == []  # no CDN, no fonts, nothing from the internet
    load = run["steps"]["load"]
    assert load["authHidden"] and load["appVisible"]


def test_page_shows_every_panel_with_the_seeded_data(
    run: dict[str, Any], dashboard: Dashboard
) -> None:
    seeded = dashboard.seeded
    load = run["steps"]["load"]
    assert load["badge"] == f"generation {seeded.generation}"
    assert sorted(load["skills"]) == sorted(seeded.live)
    assert seeded.retired not in load["skills"]
    assert load["candidates"] == [seeded.candidate]
    assert load["generations"] == [str(g) for g in range(seeded.generation, 0, -1)]
    assert load["rollbackButtons"] == seeded.generation - 1  # every generation but the live one
    assert f"− {seeded.retired}" in load["timeline"] and f"+ {seeded.evolved}" in load["timeline"]
    assert load["trajectories"] == 10
    assert "iso-timestamps" in load["trajectoryText"]  # injected skills per trajectory
    assert "+1.00" in load["trajectoryText"]
    for words in ("capture queue", "spool", "embedder", "ready", "No faults"):
        assert words in load["health"]
    assert "not running" in load["training"]
    assert "query buffer" in load["training"] and "sampler-000005" in load["training"]
    # the evolved skill is under its randomised holdout; the curve has a row per generation
    assert load["evidence"] == [seeded.evolved]
    assert "holdout" in load["evidenceText"] and "not validated" in load["evidenceText"]
    assert "Learning curve per generation" in load["evidenceText"]


def test_provenance_names_the_failures_a_skill_was_learned_from(run: dict[str, Any]) -> None:
    text = run["steps"]["provenance"]
    assert "added in generation 2" in text
    assert "trigger: 2 failures" in text
    assert "Overwrite config.yaml with the new settings" in text
    assert "the agent deleted /srv/data without asking" in text


def test_untrusted_text_is_shown_as_text_and_never_runs(run: dict[str, Any]) -> None:
    hostile = run["steps"]["hostile"]
    assert hostile["xss"] is None
    assert hostile["images"] == 0 and hostile["scripts"] == 0
    assert HOSTILE_TASK in hostile["queries"]


def test_search_filters_the_skill_list(run: dict[str, Any], dashboard: Dashboard) -> None:
    search = run["steps"]["search"]
    assert search["skills"] == ["iso-timestamps"]
    assert search["count"] == f"1 of {len(dashboard.seeded.live)}"
    assert search["none"] == ["No live skill matches the search."]
    assert sorted(search["cleared"]) == sorted(dashboard.seeded.live)


def test_approving_a_candidate_advances_the_generation(
    run: dict[str, Any], dashboard: Dashboard
) -> None:
    seeded = dashboard.seeded
    approve = run["steps"]["approve"]
    assert approve["before"] == seeded.generation
    assert approve["badge"] == f"generation {seeded.generation + 1}"
    assert seeded.candidate in approve["skills"] and approve["candidates"] == []
    assert f"+ {seeded.candidate}" in approve["newest"]
    with dashboard.client() as http:  # the same change, seen through the HTTP API
        history = http.get("/v1/generations").json()
    approved = next(g for g in history if g["number"] == seeded.generation + 1)
    assert approved["added"] == [seeded.candidate]
    assert approved["reason"] == f"approve {seeded.candidate} (dashboard)"


def test_rollback_restores_the_earlier_library_as_a_new_generation(
    run: dict[str, Any], dashboard: Dashboard
) -> None:
    seeded = dashboard.seeded
    rollback = run["steps"]["rollback"]
    assert rollback["notice"] is None
    assert rollback["badge"] == f"generation {seeded.generation + 2}"
    assert sorted(rollback["skills"]) == sorted(seeded.live)
    assert f"rollback to generation {seeded.generation}" in rollback["newest"]
    with dashboard.client() as http:
        skills = http.get("/v1/skills").json()
        last = http.get("/v1/generations").json()[-1]
    assert skills["generation"] == seeded.generation + 2
    assert sorted(s["name"] for s in skills["skills"]) == sorted(seeded.live)
    assert last["retired"] == [seeded.candidate]
    assert dashboard.engine.generation == seeded.generation + 2


def test_the_agent_picker_shows_another_agents_skills_and_back(
    run: dict[str, Any], dashboard: Dashboard
) -> None:
    seeded = dashboard.seeded
    agents = run["steps"]["agents"]
    assert agents["added"] == 201
    assert agents["options"] == sorted(["default", OTHER_AGENT])
    assert agents["pickedBefore"] == "default"
    assert agents["skills"] == [OTHER_SKILL["name"]]  # only that agent's
    assert agents["candidates"] == []  # the default agent's candidate is not its
    other_generation = dashboard.engine.library_of(OTHER_AGENT).current_generation()
    assert agents["badge"] == f"generation {other_generation}"
    assert agents["sent"] == [OTHER_AGENT] and agents["stored"] == OTHER_AGENT
    assert sorted(agents["back"]) == sorted(seeded.live)
    # the other agent's change was not a generation of the default agent
    assert dashboard.engine.generation == seeded.generation + 2


def test_with_a_token_the_page_asks_for_it_and_then_shows_data(
    run: dict[str, Any], dashboard: Dashboard
) -> None:
    steps = run["steps"]
    prompt = steps["authPrompt"]
    assert prompt["appHidden"] and prompt["skillCards"] == 0
    assert "needs its token" in prompt["prompt"]
    assert prompt["apiCalls"] == 0  # it asked before sending anything
    assert steps["authWrong"]["appHidden"]
    assert "refused" in steps["authWrong"]["error"]
    # the refused request is the only error of the whole session
    assert {(e["status"], e["phase"]) for e in run["httpErrors"]} == {(401, "auth-wrong")}
    ok = steps["authOk"]
    assert ok["authHidden"] and ok["stored"] == TOKEN
    assert sorted(ok["skills"]) == sorted(s.name for s in dashboard.engine.library.live())
    assert ok["calls"] and all(c["auth"] == f"Bearer {TOKEN}" for c in ok["calls"])
    assert steps["authReload"]["authHidden"]  # the token lives on in the tab
    assert steps["authForget"]["appHidden"] and steps["authForget"]["stored"] is None


def test_screenshots_are_saved_as_artefacts(run: dict[str, Any]) -> None:
    for name in (
        "dashboard.png",
        "dashboard-after-rollback.png",
        "dashboard-other-agent.png",
        "dashboard-auth.png",
    ):
        shot = ARTIFACTS / name
        assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
