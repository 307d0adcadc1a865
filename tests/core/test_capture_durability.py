"""An acknowledged trajectory is never lost: queue overflow, torn writes, kill -9."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from metaclaw_core import CallContext, Message, MetaClaw
from tests.support.engines import SharedEmbedder, make_settings


def ctx(i: int) -> CallContext:
    return CallContext(
        session_id="dur", messages=[Message(role="user", content=f"task number {i}")]
    )


def test_full_queue_spills_to_the_spool_and_nothing_is_lost(
    make_engine: Any, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path / "h", store__queue_size=2, store__batch_size=2)
    engine = make_engine(settings)
    ids = [engine.after_call(ctx(i), "out") for i in range(300)]
    assert all(ids)
    assert engine.flush(60)
    assert engine.writer.stats["spilled"] > 0  # the queue really overflowed
    stored = {t.id for t in engine.trajectories.recent(1000)}
    assert stored == set(ids) and len(stored) == 300
    # and none twice: a spilled record's segment is replayed only after the records of it
    # still queued were committed (the replay found them missing and stored them again)
    assert engine.trajectories.count() == 300


def test_kill_minus_9_after_acknowledgement_loses_nothing(minilm: Any, tmp_path: Path) -> None:
    home = tmp_path / "h"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from metaclaw_core import CallContext, Message, MetaClaw, Settings
        s = Settings(home={str(home)!r}, load_entrypoints=False)
        s.embedding.preload = False
        s.store.flush_interval_s = 3600  # the writer never gets to commit before the kill
        s.store.batch_size = 100000
        engine = MetaClaw(s)
        for i in range(200):
            tid = engine.after_call(
                CallContext(messages=[Message(role="user", content=f"task {{i}}")]), f"out {{i}}"
            )
            print("ACK", tid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == -9, proc.stderr
    acked = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ACK ")]
    assert len(acked) == 200 and "None" not in acked

    with MetaClaw(make_settings(home), plugins=[SharedEmbedder(minilm)]) as engine:
        assert engine.flush(60)
        stored = {t.id for t in engine.trajectories.recent(1000)}
    assert stored == set(acked)
    assert not any((home / "spool").glob("*/seg-*"))  # replayed spool folders are removed


def test_replay_skips_a_torn_record_and_keeps_the_rest(minilm: Any, tmp_path: Path) -> None:
    home = tmp_path / "h"
    settings = make_settings(home, store__flush_interval_s=3600.0, store__batch_size=100000)
    engine = MetaClaw(settings, plugins=[SharedEmbedder(minilm)])
    ids = [engine.after_call(ctx(i), "out") for i in range(10)]
    seg = next((home / "spool").glob("*/seg-*.jsonl"))
    folder = seg.parent
    with open(seg, "ab") as fh:
        fh.write(b'{"k":"t","v":null,"d":{"id":"torn')  # a write cut short by a crash
    # Simulate the process dying: copy its folder away before close() cleans it up.
    dead = home / "spool" / "99999-deadbeef"
    dead.mkdir()
    for p in folder.iterdir():
        (dead / p.name).write_bytes(p.read_bytes())
    engine.writer._stop.set()  # stop without draining, like a crash
    engine.writer._thread.join(5)
    engine.writer.journal.close()
    engine._closed.set()

    with MetaClaw(make_settings(home), plugins=[SharedEmbedder(minilm)]) as again:
        assert again.flush(60)
        assert {t.id for t in again.trajectories.recent(100)} == set(ids)
        assert again.trajectories.count() == 10  # the copy replays without duplicating
