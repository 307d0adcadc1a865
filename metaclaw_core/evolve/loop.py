"""``FastLoop``: the background half of the fast loop, fed by the capture writer.

It is a plugin: :mod:`metaclaw_core.plugins.fastloop_factory` builds one per engine when the
engine starts (``metaclaw_engine_started``) and registers it as ``builtin:fastloop``; the engine
reaches it only through hooks (committed captures: ``metaclaw_records_stored``; rewards,
sessions, status, closing). The observers run on the capture writer's thread and do O(1)
work: append to a bounded queue and return. Two daemon workers,
started on first use, do the rest: the *scorer* asks the reward sources
(``metaclaw_score_trajectory``: checks, the PRM judge) for a score and records it; the
*learner* counts failures and runs the evolver on its triggers (N failures, a session ending
with failures, an explicit correction).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from metaclaw_core.engine import FASTLOOP_PLUGIN
from metaclaw_core.errors import MetaClawError
from metaclaw_core.evolve.report import EvolutionReport
from metaclaw_core.evolve.support import CORRECTION
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Reward, Trajectory
from metaclaw_core.store.records import EncodedTrajectory

if TYPE_CHECKING:
    from metaclaw_core.engine import MetaClaw
    from metaclaw_core.evolve.evolver import SkillEvolver

log = logging.getLogger("metaclaw.fastloop")

_EVENTS_MAX = 10_000
_SEEN_MAX = 50_000
_STOP = ("stop", None)
# A stored trajectory: a local capture as the writer committed it, or one read from the store.
Stored = EncodedTrajectory | Trajectory


class FastLoop:
    """Scoring queue and evolution triggers of one engine (bounded, never on the hot path)."""

    def __init__(self, engine: MetaClaw) -> None:
        self.engine = engine
        self.settings = engine.settings
        self.stats: Counter[str] = Counter()
        self.last_report: EvolutionReport | None = None
        self.last_error: str | None = None
        self._evolver: SkillEvolver | None = None
        self._evolvers: dict[str, SkillEvolver] = {}  # other agents' (each learns for its own)
        self._agents: OrderedDict[str, str] = OrderedDict()  # recent trajectory id → agent
        self._failures_of: Counter[str] = Counter()  # per agent, since its last evolution
        # One evolution at a time per engine, whichever evolver object runs it: two would
        # propose against the same library and consume the same failures.
        self.evolution_lock = threading.Lock()
        self._stop = threading.Event()
        self._start_lock = threading.Lock()
        # scorer: batches of stored trajectories, bounded by the number of trajectories
        self._to_score: deque[Sequence[Stored]] = deque()
        self._to_score_n = 0
        self._score_cond = threading.Condition()
        self._scoring_busy = False
        self._scoring: bool | None = None
        # learner: events in arrival order
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=_EVENTS_MAX)
        self._learning_busy = False
        self._failures_since = 0
        self._seen_failures: OrderedDict[str, None] = OrderedDict()
        self._last_evolution = float("-inf")
        self._wanted: str | None = None  # a trigger that fired but waits for min_interval_s
        self._wanted_agent: str | None = None  # ... and the agent whose failures fired it
        self._threads: dict[str, threading.Thread] = {}
        self._tailing = False
        self._observed: OrderedDict[str, None] = OrderedDict()

    @property
    def evolver(self) -> SkillEvolver:
        """The engine's one evolver (built on first use)."""
        with self._start_lock:
            if self._evolver is None:
                # imported on first use: the evolver brings the LLM client, the skill readers
                # and the vetting models, which an engine that never evolves does not need
                from metaclaw_core.evolve.evolver import SkillEvolver

                self._evolver = SkillEvolver(self.engine, lock=self.evolution_lock)
            return self._evolver

    def evolver_for(self, agent: str | None) -> SkillEvolver:
        """The evolver that learns for ``agent`` (its failures; candidates it owns)."""
        if agent is None or agent == self.engine.agent:
            return self.evolver
        with self._start_lock:
            found = self._evolvers.get(agent)
            if found is None:
                from metaclaw_core.evolve.evolver import SkillEvolver

                found = SkillEvolver(self.engine, lock=self.evolution_lock, agent=agent)
                self._evolvers[agent] = found
            return found

    def _agent_of(self, trajectory_id: str) -> str:
        agent = self._agents.get(trajectory_id)
        if agent is None:
            try:
                agent = self.engine.trajectories.agents_of([trajectory_id]).get(trajectory_id)
            except Exception as exc:
                self.engine.faults.record("fast loop: agent of a trajectory", exc)
            agent = agent or self.engine.agent
        return agent

    # -- the engine's hooks ------------------------------------------------------------------
    @hookimpl
    def metaclaw_records_stored(self, records: list[EncodedTrajectory]) -> None:
        self.take_stored(records)

    @hookimpl
    def metaclaw_engine_status(self, engine: MetaClaw) -> dict[str, Any] | None:
        return {"fastloop": self.status()} if engine is self.engine else None

    @hookimpl
    def metaclaw_engine_closing(self, engine: MetaClaw, timeout: float) -> None:
        if engine is self.engine:
            self.close(timeout=timeout)

    # -- observers (writer thread: O(1) each) ----------------------------------------------
    def take_stored(self, records: list[EncodedTrajectory]) -> None:
        """Captures just committed (``metaclaw_records_stored``): the
        records as the writer has them. The learner reads only their ids and errors, and the
        scorer builds each Trajectory on its own thread, so the writer builds none for the
        fast loop."""
        if self._stop.is_set():
            return
        if self._tailing:
            for r in records:
                _remember(self._observed, r.id)
        self._take(records)

    def _take(self, trajectories: Sequence[Stored]) -> None:
        if self._scoring_enabled():
            with self._score_cond:
                if self._to_score_n + len(trajectories) <= self.settings.rewards.queue_size:
                    self._to_score.append(trajectories)
                    self._to_score_n += len(trajectories)
                    self._score_cond.notify()
                else:
                    self.stats["score_dropped"] += len(trajectories)
            self._ensure("scorer", self._score_loop)
        self._post("stored", trajectories)

    @hookimpl
    def metaclaw_reward_recorded(self, reward: Reward) -> None:
        if self._tailing:
            _remember(self._observed, _reward_key(reward))
        self._post("reward", reward)

    # -- the learner of a shared store: follow what the other hosts capture ----------------
    def start_store_tail(self) -> None:
        """On ``role = "learner"``: poll the shared store for trajectories and rewards that
        other hosts wrote (their observer hooks fire in their processes, not here) and feed
        them to the scorer and the evolution triggers like local ones."""
        if self.settings.role == "learner" and not self._stop.is_set():
            self._tailing = True
            self._ensure("store-tail", self._tail_loop)

    def _tail_loop(self) -> None:
        interval = self.settings.store.refresh_interval_s
        # Rows commit a little after they are created (batching, clock skew between hosts):
        # look back further than that and drop what was already seen.
        lookback = timedelta(seconds=max(60.0, 10 * interval))
        t_mark = r_mark = datetime.now(UTC)
        while not self._stop.wait(interval):
            try:
                store = self.engine.trajectories
                fresh = [t for t in store.since(t_mark - lookback) if t.id not in self._observed]
                for t in fresh:
                    _remember(self._observed, t.id)
                if fresh:
                    t_mark = max(t_mark, fresh[-1].created_at)
                    self.stats["tailed_trajectories"] += len(fresh)
                    self._take(fresh)
                for r in store.rewards_since(r_mark - lookback):
                    key = _reward_key(r)
                    if key in self._observed:
                        continue
                    _remember(self._observed, key)
                    r_mark = max(r_mark, r.created_at)
                    self.stats["tailed_rewards"] += 1
                    self._post("reward", r)
            except Exception as exc:
                self.engine.faults.record("following the shared store", exc)

    @hookimpl
    def metaclaw_session_ended(
        self, session_id: str, reason: str | None, trajectory_ids: list[str]
    ) -> None:
        self._post("session", list(trajectory_ids))

    def _post(self, kind: str, payload: Any) -> None:
        if self._stop.is_set():
            return
        try:
            self._events.put_nowait((kind, payload))
        except queue.Full:
            self.stats["events_dropped"] += 1
            return
        self._ensure("learner", self._learn_loop)

    # -- workers ---------------------------------------------------------------------------
    def _ensure(self, name: str, target: Any) -> None:
        t = self._threads.get(name)
        if t is not None and t.is_alive():
            return
        with self._start_lock:
            t = self._threads.get(name)
            if (t is None or not t.is_alive()) and not self._stop.is_set():
                t = threading.Thread(target=target, name=f"metaclaw-{name}", daemon=True)
                self._threads[name] = t
                t.start()

    def _scoring_enabled(self) -> bool:
        if self._scoring is None and self.settings.role == "serving":
            # With a shared store the learner follows every host's trajectories and scores
            # them; scoring here too would pay the judge twice for each.
            self._scoring = False
        if self._scoring is None:
            s = self.settings
            judge = s.judge.enabled and bool(s.judge.base_url) and s.judge.sample_rate > 0
            impls = self.engine.pm.hook.metaclaw_score_trajectory.get_hookimpls()
            third_party = any(
                not (self.engine.pm.get_name(i.plugin) or "").startswith("builtin:") for i in impls
            )
            self._scoring = judge or bool(s.rewards.check_command) or third_party
        return self._scoring

    def _score_loop(self) -> None:
        while not self._stop.is_set():
            with self._score_cond:
                while not self._to_score and not self._stop.is_set():
                    self._score_cond.wait(0.5)
                if self._stop.is_set():
                    return
                batch = self._to_score.popleft()
                self._to_score_n -= len(batch)
                self._scoring_busy = True
            try:
                for t in batch:
                    if self._stop.is_set():
                        return
                    self._score_one(t)
            finally:
                with self._score_cond:
                    self._scoring_busy = False
                    self._score_cond.notify_all()

    def _score_one(self, item: Stored) -> None:
        if item.error:
            return  # a host-reported error is a failure already; no judge needed
        t = item if isinstance(item, Trajectory) else item.trajectory
        try:
            reward = self.engine.hook.metaclaw_score_trajectory(
                trajectory=t, settings=self.settings
            )
        except Exception as exc:
            self.stats["score_errors"] += 1
            self.engine.faults.record("reward source", exc)
            return
        if reward is None:
            self.stats["unscored"] += 1
            return
        try:
            self.engine.feedback(t.id, reward.value, source=reward.source, detail=reward.detail)
            self.stats["scored"] += 1
        except Exception as exc:
            self.engine.faults.record("recording a reward", exc)

    def _learn_loop(self) -> None:
        while not self._stop.is_set():
            try:
                kind, payload = self._events.get(timeout=1.0 if self._wanted else 0.5)
            except queue.Empty:
                if self._wanted:
                    self._learning_busy = True
                    try:
                        self._guarded(self._evolve_wanted)
                    finally:
                        self._learning_busy = False
                continue
            try:
                if kind == "stop":
                    return
                self._guarded(self._handle, kind, payload)
            finally:
                self._events.task_done()

    def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            self.stats["learner_errors"] += 1
            self.last_error = str(exc)
            self.engine.faults.record("fast loop", exc)

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "stored":
            for t in payload:
                _remember_agent(self._agents, t.id, t.agent)
                if t.error:
                    self._failure(t.id)
        elif kind == "reward":
            r: Reward = payload
            if r.source == CORRECTION and (r.detail or "").strip():
                self._from_correction(r)
            elif r.value <= 0:
                self._failure(r.trajectory_id)
        elif kind == "session":
            self._session_ended(payload)

    def _failure(self, trajectory_id: str) -> None:
        if trajectory_id in self._seen_failures:
            return
        self._seen_failures[trajectory_id] = None
        if len(self._seen_failures) > _SEEN_MAX:
            self._seen_failures.popitem(last=False)
        self.stats["failures"] += 1
        self._failures_since += 1
        agent = self._agent_of(trajectory_id)
        self._failures_of[agent] += 1
        n = self.settings.evolver.failure_threshold
        if self._failures_of[agent] >= n:  # each agent learns from its own failures
            self._maybe_evolve(f"{self._failures_of[agent]} failures", agent=agent)

    def _may_change_skills(self) -> bool:
        return self.settings.role != "serving"  # serving hosts never write the library

    def _from_correction(self, reward: Reward) -> None:
        if not (self.settings.evolver.feedback_auto and self._may_change_skills()):
            return
        try:
            evolver = self.evolver_for(self._agent_of(reward.trajectory_id))
            report = evolver.from_corrections(
                trajectory_ids=[reward.trajectory_id], trigger="correction"
            )
        except Exception as exc:
            self._evolution_failed(exc)
            return
        self._evolved(report, evolver.agent)

    def _session_ended(self, trajectory_ids: list[str]) -> None:
        s = self.settings.evolver
        if not (s.on_session_end and s.auto and s.base_url and trajectory_ids):
            return
        if not self._may_change_skills():
            return
        consumed, _ = self.evolver.log.consumed()
        by_agent: dict[str, list[str]] = {}
        for tid in trajectory_ids:
            by_agent.setdefault(self._agent_of(tid), []).append(tid)
        for agent, ids in sorted(by_agent.items()):
            failed = self.evolver_for(agent).support.failures(ids=ids, exclude=consumed)
            if failed:
                self._maybe_evolve(
                    "session end", prefer=[f.id for f in failed], force=True, agent=agent
                )

    def _evolve_wanted(self) -> None:
        if self._wanted:
            self._maybe_evolve(self._wanted, agent=self._wanted_agent)

    def _maybe_evolve(
        self,
        trigger: str,
        *,
        prefer: list[str] | None = None,
        force: bool = False,
        agent: str | None = None,
    ) -> None:
        s = self.settings.evolver
        if not (s.auto and s.base_url and self._may_change_skills()):
            self._wanted = None
            if not s.base_url and not self.stats["evolver_unconfigured"]:
                log.info("metaclaw: failures are accumulating but no evolver LLM is configured")
            self.stats["evolver_unconfigured"] += 1
            return
        wait = self._last_evolution + s.min_interval_s - time.monotonic()
        if wait > 0 and not force:
            self._wanted, self._wanted_agent = trigger, agent
            return
        self._wanted = None
        agent = agent or self.engine.agent
        self._failures_since = max(0, self._failures_since - self._failures_of.pop(agent, 0))
        self._last_evolution = time.monotonic()
        try:
            report = self.evolver_for(agent).evolve(trigger=trigger, prefer=prefer)
        except Exception as exc:
            self._evolution_failed(exc)
            return
        self._evolved(report, agent)

    def _evolved(self, report: EvolutionReport, agent: str | None = None) -> None:
        self.stats["evolutions"] += 1
        self.stats["skills_live"] += len(report.live)
        self.stats["skills_pending"] += len(report.pending)
        self.stats["candidates_rejected"] += len(report.rejected)
        self.last_report = report
        if report.live and self.settings.lifecycle.retire_unhelpful:
            from metaclaw_core.evolve.lifecycle import retire_unhelpful

            try:
                retire_unhelpful(self.engine, agent=agent)
            except Exception as exc:
                self.engine.faults.record("skill retirement", exc)

    def _evolution_failed(self, exc: Exception) -> None:
        self.stats["evolution_errors"] += 1
        self.last_error = str(exc)
        self.engine.faults.record("evolver", exc)

    # -- control -----------------------------------------------------------------------------
    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until every queued score and event is handled (tests, CLI, shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._score_cond:
                scoring = bool(self._to_score) or self._scoring_busy
            # unfinished_tasks counts an event from put() until it has been handled
            if not scoring and not self._events.unfinished_tasks and not self._learning_busy:
                return True
            time.sleep(0.01)
        return False

    def status(self) -> dict[str, Any]:
        with self._score_cond:
            waiting = self._to_score_n
        return {
            "scoring_queue": waiting,
            "events_queue": self._events.qsize(),
            "failures_since_evolution": self._failures_since,
            "last_error": self.last_error,
            **dict(self.stats),
        }

    def close(self, timeout: float = 10.0) -> None:
        """Stop the workers after the job in hand; what is still queued is not processed."""
        self._stop.set()
        with self._score_cond:
            self._score_cond.notify_all()
        with contextlib.suppress(queue.Full):
            self._events.put_nowait(_STOP)
        deadline = time.monotonic() + timeout
        for t in list(self._threads.values()):
            t.join(max(0.0, deadline - time.monotonic()))
        if self._evolver is not None:
            self._evolver.client.close()


def _reward_key(r: Reward) -> str:
    return f"{r.trajectory_id}|{r.source}|{r.created_at.astimezone(UTC).isoformat()}"


def _remember_agent(agents: OrderedDict[str, str], key: str, agent: str) -> None:
    agents[key] = agent
    if len(agents) > _SEEN_MAX:
        agents.popitem(last=False)


def _remember(seen: OrderedDict[str, None], key: str) -> None:
    seen[key] = None
    if len(seen) > _SEEN_MAX:
        seen.popitem(last=False)


def fastloop_of(engine: MetaClaw) -> FastLoop:
    """The fast loop plugin of ``engine`` (raises if ``builtin:fastloop`` was unregistered)."""
    loop = engine.pm.get_plugin(FASTLOOP_PLUGIN)
    if not isinstance(loop, FastLoop):
        raise MetaClawError(f"metaclaw: this engine has no fast loop ({FASTLOOP_PLUGIN})")
    return loop


def evolver_of(engine: MetaClaw) -> SkillEvolver:
    """The one :class:`SkillEvolver` of ``engine``, reached through its fast loop."""
    return fastloop_of(engine).evolver
