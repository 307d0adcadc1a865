"""One learner, many serving hosts: what a serving host captures teaches the learner."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from metaclaw_core import CallContext, Message, MetaClaw
from tests.support.engines import SharedEmbedder, make_settings

TASK = "Write the date and time of the meeting in the log"


def test_a_correction_on_a_serving_host_becomes_a_skill_on_every_host(
    minilm: Any, tmp_path: Path
) -> None:
    shared = str(tmp_path / "shared-db")  # any LanceDB URI; S3 is covered next door

    def host(name: str, role: str) -> MetaClaw:
        s = make_settings(tmp_path / name, role=role, store__refresh_interval_s=0.2)
        s.store.uri = shared
        engine = MetaClaw(s, plugins=[SharedEmbedder(minilm)])
        assert engine.wait_ready(60)
        return engine

    learner = host("learner", "learner")
    serving = host("serving", "serving")
    try:
        c = CallContext(session_id="s", messages=[Message(role="user", content=TASK)])
        tid = serving.after_call(c, "Logged 9:30 tomorrow")
        assert tid is not None
        serving.feedback(
            tid,
            -1.0,
            source="correction",
            detail="Write every timestamp in ISO 8601 with the +08:00 offset.",
        )
        assert serving.flush(30)
        deadline = time.monotonic() + 60
        while not learner.library.live():
            assert time.monotonic() < deadline, learner.status()["fastloop"]
            time.sleep(0.1)
        skill = learner.library.live()[0]
        assert tid in skill.provenance
        assert learner.fastloop.stats["tailed_rewards"] >= 1
        assert serving.fastloop.stats.get("tailed_rewards", 0) == 0  # serving hosts do not follow
        while skill.name not in serving.before_call(c).skill_names:
            assert time.monotonic() < deadline, "the learned skill never reached the serving host"
            time.sleep(0.05)
    finally:
        serving.close()
        learner.close()
