"""The background capture writer: bounded queue in, batched LanceDB commits out.

The hot path (``submit_*``) journals the record and enqueues it without waiting. The writer
thread commits a batch when one is full, when a flush waits, or every ``flush_interval_s`` (it
does not wake per capture), settles journal segments, replays records that missed the queue
or a commit, and at start replays the spool folders of processes that died.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metaclaw_core.config import StoreSettings
from metaclaw_core.faults import FaultLog
from metaclaw_core.models import Reward
from metaclaw_core.store.journal import (
    CaptureJournal,
    read_records,
    release_orphan,
    segment_files,
)
from metaclaw_core.store.records import (
    KIND_REWARD,
    KIND_TRAJECTORY,
    EncodedTrajectory,
    decode,
    encode_reward,
)
from metaclaw_core.store.trajectories import TrajectoryStore

log = logging.getLogger("metaclaw.writer")

# ((journal segment, offset in it), kind, EncodedTrajectory or Reward)
_Item = tuple[tuple[int, int], str, Any]


class CaptureWriter:
    """Owns the capture queue, the journal and the writer thread."""

    def __init__(
        self,
        journal: CaptureJournal,
        trajectories: TrajectoryStore,
        settings: StoreSettings,
        *,
        on_stored: Callable[[list[EncodedTrajectory]], None] | None = None,
        on_reward: Callable[[Reward], None] | None = None,
        faults: FaultLog | None = None,
    ) -> None:
        self.journal = journal
        self.trajectories = trajectories
        self.settings = settings
        self.on_stored = on_stored
        self.on_reward = on_reward
        self.faults = faults or FaultLog(log)
        # A deque, not a queue.Queue: append and popleft are atomic, and the hot path takes
        # no lock and wakes nobody (the writer sleeps on _wake). The bound is checked before
        # the append, so concurrent callers may pass it by a few items.
        self._queue: deque[_Item] = deque()
        self._queue_size = settings.queue_size
        self._batch_size = settings.batch_size
        # Set when a batch is full or a flush/close is waiting: the writer otherwise sleeps
        # for flush_interval_s instead of waking for every capture (see _take_batch).
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._busy = threading.Event()
        self._recovered = threading.Event()
        self._healthy = True
        self._retry_at = 0.0
        self._commits = 0
        self.stats: Counter[str] = Counter()
        self._thread = threading.Thread(
            target=self._run, name="metaclaw-capture-writer", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    # -- hot path ------------------------------------------------------------------------
    def submit_trajectory(self, record: EncodedTrajectory) -> None:
        """Durable once this returns (journaled); raises only if the journal write failed."""
        seg = self.journal.append(record.line)
        self._enqueue((seg, KIND_TRAJECTORY, record))

    def submit_reward(self, reward: Reward) -> None:
        seg = self.journal.append(encode_reward(reward))
        self._enqueue((seg, KIND_REWARD, reward))

    def _enqueue(self, item: _Item) -> None:
        depth = len(self._queue)
        if depth >= self._queue_size:
            # Already journaled: the writer replays it from the segment file.
            self.journal.mark_dirty([item[0]])
            self.stats["spilled"] += 1
            self._wake.set()
            return
        self._queue.append(item)
        if depth + 1 >= self._batch_size and not self._wake.is_set():
            self._wake.set()

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    @property
    def healthy(self) -> bool:
        return self._healthy

    # -- control -------------------------------------------------------------------------
    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every acknowledged record is committed; False on timeout or store down."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._wake.set()  # commit what is queued now rather than at the next interval
            if (
                self._recovered.is_set()
                and not self._queue
                and not self._busy.is_set()
                and self.journal.pending == 0
                and self.journal.dirty_segments == 0
            ):
                return True
            if not self._thread.is_alive():
                return False
            time.sleep(0.005)
        return False

    def close(self, timeout: float = 30.0) -> bool:
        """Drain and stop. What could not be committed stays in the spool for the next start."""
        done = self.flush(timeout) if self._thread.is_alive() else False
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.journal.close()
        return done

    # -- writer thread -------------------------------------------------------------------
    def _run(self) -> None:
        self._recover_orphans()
        self._recovered.set()
        interval = self.settings.flush_interval_s
        while True:
            items = self._take_batch(interval)
            if items:
                self._busy.set()
                try:
                    self._commit(items)
                finally:
                    self._busy.clear()
            self._maintain()
            if self._stop.is_set() and not self._queue:
                break

    def _take_batch(self, wait_s: float) -> list[_Item]:
        """Up to batch_size items, once a batch is full, a flush waits, or ``wait_s`` passed.

        The writer does not wake for each capture: on a small machine every wake-up of this
        thread while a host thread runs Python is a GIL hand-over that the host thread pays
        for (up to the interpreter's switch interval), and one commit per capture costs far
        more store work than one commit per batch. A capture waits at most ``wait_s``.
        """
        if len(self._queue) < self._batch_size:
            self._wake.wait(wait_s)
        self._wake.clear()
        self._busy.set()
        items: list[_Item] = []
        while len(items) < self._batch_size:
            try:
                items.append(self._queue.popleft())
            except IndexError:
                break
        if not items:
            self._busy.clear()
        return items

    def _commit(self, items: list[_Item]) -> None:
        places = [place for place, *_ in items]
        if not self._healthy and time.monotonic() < self._retry_at:
            self.journal.mark_dirty(places)
            return
        trajs = [p for _, k, p in items if k == KIND_TRAJECTORY]
        rewards = [p for _, k, p in items if k == KIND_REWARD]
        try:
            self.trajectories.write(trajs)
            self.trajectories.write_rewards(rewards)
        except Exception as exc:
            self._mark_unhealthy(exc)
            self.journal.mark_dirty(places)
            return
        self._healthy = True
        self.journal.settle(Counter(seg for seg, _ in places))
        self.stats["stored"] += len(trajs)
        self.stats["rewards"] += len(rewards)
        self._after_commit(trajs, rewards)

    def _after_commit(self, trajs: list[EncodedTrajectory], rewards: list[Reward]) -> None:
        self._commits += 1
        every = self.settings.optimize_every_commits
        if every and self._commits % every == 0:
            try:
                self.trajectories.optimize()
            except Exception as exc:
                self.faults.record("store compaction", exc)
        if trajs and self.on_stored is not None:
            try:
                self.on_stored(trajs)
            except Exception as exc:
                self.faults.record("trajectory observer", exc)
        if self.on_reward is not None:
            for r in rewards:
                try:
                    self.on_reward(r)
                except Exception as exc:
                    self.faults.record("reward observer", exc)

    def _mark_unhealthy(self, exc: Exception) -> None:
        self._healthy = False
        self._retry_at = time.monotonic() + self.settings.retry_interval_s
        self.stats["write_failures"] += 1
        self.faults.record("store write (records kept in the spool)", exc)

    def _maintain(self) -> None:
        if not self._healthy and time.monotonic() < self._retry_at:
            return
        self.journal.rotate()
        for path, offsets in self.journal.sweep():
            if self._replay_file(path, offsets):
                self.journal.replayed(path)
            else:
                return

    def _replay_file(self, path: Path, offsets: list[int] | None = None) -> bool:
        """Commit every record of ``path`` (or those at ``offsets``) not already stored; True
        if all are in now."""
        trajs: list[EncodedTrajectory] = []
        rewards: list[Reward] = []
        try:
            for lineno, line in read_records(path, offsets):
                try:
                    kind, payload = decode(line)
                except Exception as exc:
                    self.stats["corrupt_records"] += 1
                    log.warning(
                        "metaclaw: skipping unreadable spool record %s:%d: %s", path, lineno, exc
                    )
                    continue
                if kind == KIND_TRAJECTORY:
                    trajs.append(payload)
                else:
                    rewards.append(payload)
            have = self.trajectories.existing_ids([e.id for e in trajs])
            missing = [e for e in trajs if e.id not in have]
            have_r = self.trajectories.existing_rewards(rewards)
            missing_r = [
                r for r in rewards if (r.trajectory_id, r.source, str(r.created_at)) not in have_r
            ]
            bs = self.settings.batch_size
            for i in range(0, len(missing), bs):
                self.trajectories.write(missing[i : i + bs])
            self.trajectories.write_rewards(missing_r)
        except Exception as exc:
            self._mark_unhealthy(exc)
            return False
        self._healthy = True
        self.stats["replayed"] += len(missing)
        if missing or missing_r:
            self._after_commit(missing, missing_r)
        return True

    def _recover_orphans(self) -> None:
        try:
            for folder, fd in self.journal.orphaned_folders():
                ok = all(self._replay_file(p) for p in segment_files(folder))
                release_orphan(folder, fd, remove=ok)
                if ok:
                    log.info("metaclaw: replayed the capture spool %s", folder)
        except Exception as exc:
            self.faults.record("spool recovery", exc)
