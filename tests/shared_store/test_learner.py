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


def test_only_the_learner_scores_and_it_scores_every_hosts_traffic(
    minilm: Any, tmp_path: Path
) -> None:
    shared = str(tmp_path / "shared-db")

    def host(name: str, role: str) -> MetaClaw:
        s = make_settings(tmp_path / name, role=role, store__refresh_interval_s=0.2)
        s.store.uri = shared
        s.rewards.check_command = "true"  # a verifiable check: exit 0 scores +1
        return MetaClaw(s, plugins=[SharedEmbedder(minilm)])

    learner, serving = host("learner", "learner"), host("serving", "serving")
    try:
        c = CallContext(session_id="s", messages=[Message(role="user", content=TASK)])
        tid = serving.after_call(c, "done")
        assert tid is not None and serving.flush(30)
        deadline = time.monotonic() + 60
        while True:
            t = learner.trajectories.get(tid)
            if t is not None and t.rewards:
                break
            assert time.monotonic() < deadline, learner.status()["fastloop"]
            time.sleep(0.1)
        assert [(r.source, r.value) for r in t.rewards] == [(t.rewards[0].source, 1.0)]
        assert serving.fastloop.stats.get("scored", 0) == 0
        assert learner.fastloop.stats["scored"] == 1
    finally:
        serving.close()
        learner.close()


def test_store_upkeep_compacts_without_breaking_a_reader_of_an_older_version(
    make_engine: Any, tmp_path: Path
) -> None:
    """The writer compacts every few commits; a learner still reading an older version of
    the table (a batch it has not finished) can go on reading it."""
    engine = make_engine(make_settings(tmp_path / "h", store__optimize_every_commits=3))
    for i in range(3):
        engine.after_call(CallContext(messages=[Message(role="user", content=f"a{i}")]), "x")
        assert engine.flush(30)
    table = engine.store.table("trajectories")
    reader = engine.store.connect().open_table("trajectories")  # the learner's batch
    pinned = reader.version
    before = len(table.list_versions())
    for i in range(12):  # more commits: at least one compaction runs
        engine.after_call(CallContext(messages=[Message(role="user", content=f"b{i}")]), "x")
        assert engine.flush(30)
    assert engine.trajectories.count() == 15
    assert len(table.list_versions()) > before  # commits and compactions made versions
    assert reader.version == pinned
    assert reader.count_rows() == 3  # the old version is still fully readable
    reader.checkout_latest()
    assert reader.count_rows() == 15
    stats = table.stats()
    assert stats["fragment_stats"]["num_fragments"] < 15  # compaction merged the fragments
