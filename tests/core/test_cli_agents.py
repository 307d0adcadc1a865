"""`metaclaw ... --agent`, `metaclaw skills share` and `metaclaw status` with several agents."""

from __future__ import annotations

import json
from pathlib import Path

from tests.core import test_cli

home = test_cli.home  # the CLI tests' fixture: a fresh METACLAW_HOME
run = test_cli.run


def names(*args: str) -> list[str]:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return [s["name"] for s in json.loads(r.stdout)["skills"]]


def test_agents_through_the_cli(home: Path) -> None:
    r = run(
        "skills", "add", "refund-policy", "-d", "When a customer asks for a refund",
        "-b", "Refunds are possible within 30 days of the order.", "--agent", "support",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    r = run(
        "skills", "add", "sql-safety", "-d", "When writing SQL",
        "-b", "Use bound parameters.", "--agent", "coder",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert names("skills", "list", "--agent", "support") == ["refund-policy"]
    assert names("skills", "list", "--agent", "coder") == ["sql-safety"]
    assert names("skills", "list") == []  # the default agent's
    hit = json.loads(
        run("retrieve", "a customer wants a refund", "--json", "--agent", "support").stdout
    )
    assert [s["name"] for s in hit["skills"]] == ["refund-policy"]
    miss = json.loads(
        run("retrieve", "a customer wants a refund", "--json", "--agent", "coder").stdout
    )
    assert miss["skills"] == []

    bad = run("skills", "list", "--agent", "Not Valid!")
    assert bad.exit_code == 1 and "not an agent id" in bad.output

    r = run("skills", "share", "sql-safety", "--from", "coder", "--json")
    assert r.exit_code == 0, r.output
    gen = json.loads(r.stdout)["generation"]
    assert gen["agent"] == "coder" and gen["shared_with"] == []
    assert names("skills", "list", "--agent", "support") == ["refund-policy", "sql-safety"]
    listed = json.loads(run("skills", "list", "--agent", "support", "--json").stdout)
    shared = next(s for s in listed["skills"] if s["name"] == "sql-safety")
    assert shared["agent"] == "coder" and shared["shared"] is True
    assert listed["generation"] == gen["number"]
    r = run("skills", "share", "nope", "--from", "coder")
    assert r.exit_code == 1 and "no live skill named 'nope'" in r.output

    history = json.loads(run("skills", "history", "--agent", "support", "--json").stdout)
    assert [g["agent"] for g in history["generations"]] == ["support"]

    status = json.loads(run("status", "--json").stdout)
    assert status["agents"]["support"] == {"live_skills": 1, "received": 1, "generation": 3}
    assert status["agents"]["coder"]["live_skills"] == 1
    assert status["agents"]["default"] == {"live_skills": 0, "received": 1, "generation": 3}
    text = run("status").stdout
    assert "agents" in text and "support" in text and "coder" in text


def test_skills_import_for_an_agent(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "lib" / "iso-times"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: iso-times\ndescription: Use when writing a date or time.\n---\n"
        "Write times as ISO 8601 with the UTC offset.\n",
        encoding="utf-8",
    )
    r = run("skills", "import", str(tmp_path / "lib"), "--agent", "support")
    assert r.exit_code == 0, r.output
    assert names("skills", "list", "--agent", "support") == ["iso-times"]
    assert names("skills", "list") == [] and names("skills", "list", "--agent", "coder") == []
