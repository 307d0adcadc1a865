"""``MetaClaw``: the facade every integration calls, around the hot path.

``before_call`` retrieves and renders skills from an in-memory snapshot; ``after_call``
journals the trajectory and enqueues it. Neither waits on the store or the network, and any
internal error is logged (rate-limited) and swallowed: the host's call goes on unmodified.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from metaclaw_core.errors import MetaClawError
from metaclaw_core.faults import FaultLog

if TYPE_CHECKING:
    from metaclaw_core.agents import validate_agent
    from metaclaw_core.call import ModelCall
    from metaclaw_core.capture import encode_call
    from metaclaw_core.config import Settings
    from metaclaw_core.embeddings import Embedder, LoadedEmbedder, Vector
    from metaclaw_core.holdout import Holdout
    from metaclaw_core.models import (
        CallContext,
        Generation,
        Injection,
        ModelOutput,
        Reward,
        ScoredSkill,
        Skill,
        new_id,
        utcnow,
    )
    from metaclaw_core.plugin_manager import make_plugin_manager
    from metaclaw_core.skills.block import choose_within_budget
    from metaclaw_core.skills.index import SkillSnapshot
    from metaclaw_core.skills.library import ImportReport, LibraryState, SkillLibrary
    from metaclaw_core.skills.snapshot_cache import cache_path, load_snapshot, save_snapshot
    from metaclaw_core.skills.verdict import Finding, as_findings
    from metaclaw_core.skills.vetting import VetContext
    from metaclaw_core.store.db import Store
    from metaclaw_core.store.journal import CaptureJournal
    from metaclaw_core.store.records import EncodedTrajectory, encode_trajectory
    from metaclaw_core.store.trajectories import TrajectoryStore
    from metaclaw_core.store.writer import CaptureWriter


def _load_runtime() -> None:
    """Import what an engine runs on, once, when the first engine is made.

    ``from metaclaw_core import MetaClaw`` then costs only this module: the settings
    (pydantic-settings), numpy, the store and the plugins load with the first
    ``MetaClaw(...)``. The names are bound as this module's globals, so the hot path looks
    them up as it would top-level imports.
    """
    if "SkillSnapshot" in globals():
        return
    from metaclaw_core import capture, embeddings, models
    from metaclaw_core.agents import validate_agent
    from metaclaw_core.config import Settings
    from metaclaw_core.holdout import Holdout
    from metaclaw_core.plugin_manager import make_plugin_manager
    from metaclaw_core.skills import library, snapshot_cache, verdict
    from metaclaw_core.skills.block import choose_within_budget
    from metaclaw_core.skills.index import SkillSnapshot
    from metaclaw_core.skills.vetting import VetContext
    from metaclaw_core.store import records
    from metaclaw_core.store.db import Store
    from metaclaw_core.store.journal import CaptureJournal
    from metaclaw_core.store.trajectories import TrajectoryStore
    from metaclaw_core.store.writer import CaptureWriter

    names: dict[str, Any] = {
        "encode_call": capture.encode_call,
        "validate_agent": validate_agent,
        "Settings": Settings,
        "Embedder": embeddings.Embedder,
        "LoadedEmbedder": embeddings.LoadedEmbedder,
        "Holdout": Holdout,
        "VetContext": VetContext,
        "make_plugin_manager": make_plugin_manager,
        "choose_within_budget": choose_within_budget,
        "ImportReport": library.ImportReport,
        "SkillLibrary": library.SkillLibrary,
        "cache_path": snapshot_cache.cache_path,
        "load_snapshot": snapshot_cache.load_snapshot,
        "save_snapshot": snapshot_cache.save_snapshot,
        "Finding": verdict.Finding,
        "as_findings": verdict.as_findings,
        "Store": Store,
        "CaptureJournal": CaptureJournal,
        "EncodedTrajectory": records.EncodedTrajectory,
        "encode_trajectory": records.encode_trajectory,
        "TrajectoryStore": TrajectoryStore,
        "CaptureWriter": CaptureWriter,
    }
    for name in (
        "CallContext",
        "Generation",
        "Injection",
        "ModelOutput",
        "Reward",
        "ScoredSkill",
        "Skill",
    ):
        names[name] = getattr(models, name)
    names["new_id"], names["utcnow"] = models.new_id, models.utcnow
    globals().update(names)
    globals()["SkillSnapshot"] = SkillSnapshot  # last: it marks the runtime as loaded


log = logging.getLogger("metaclaw")
_T = TypeVar("_T")


async def _to_thread(fn: Callable[..., _T], *args: Any) -> _T:
    import asyncio  # only async hosts pay for its import

    return await asyncio.to_thread(fn, *args)


MAX_PENDING_CALLS = 10_000
REDACTION_PLUGIN = "builtin:redact"  # its redaction runs inside capture.encode_call
FASTLOOP_PLUGIN = "builtin:fastloop"  # registered by plugins/fastloop_factory.py
FALLBACK_DIM = 384
# The generation of a call made before the skill library was first read from the store (so
# before anything could be injected) and captured before it was: the store's generation then
# is not known. Such a trajectory is in no generation's query buffer (the RL buffer selects
# ``generation = current``) and is kept as support data; ``metadata["degraded"]`` says why.
GENERATION_UNKNOWN = -1
DEGRADED_LIBRARY = "skill library not loaded yet"
# The key of the snapshot an agent unknown to the library gets: the skills shared with every
# agent. Not a valid agent id (ids start with a letter or digit), so no agent has it.
ANYONE = "*anyone"


class MetaClaw:
    """The engine: skills in before each LLM call, trajectories out after it.

    Args:
        settings: defaults to ``Settings()`` (``$METACLAW_HOME/config.toml`` + env).
        plugins: extra plugin objects or modules implementing :mod:`metaclaw_core.hookspecs`.
        capture: open the capture journal and writer (False for read-only tools).
        agent: the agent of calls whose context names none (default: ``agents.default``,
            ``"default"``). Calls may name another (``CallContext(agent=...)``): each agent
            is served its own skills and the shared ones that reach it.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        plugins: list[Any] | tuple[Any, ...] = (),
        capture: bool = True,
        agent: str | None = None,
    ) -> None:
        _load_runtime()
        self.settings = settings or Settings()
        self.agent: str = validate_agent(agent or self.settings.agents.default)
        self.faults = FaultLog(log)
        self.pm = make_plugin_manager(plugins, load_entrypoints=self.settings.load_entrypoints)
        self.hook = self.pm.hook
        self.embedder: Embedder = self.hook.metaclaw_make_embedder(settings=self.settings)
        if self.settings.embedding.preload and isinstance(self.embedder, LoadedEmbedder):
            self.embedder.start_loading()
        self.store = Store(self.settings)
        self.library = SkillLibrary(
            self.store,
            self.embedder,
            vetter=self._vet,
            listeners=[self._on_generation],
            read_only_reason=(
                "this host is a serving host (role = serving): skills change only on the "
                "learner; run the command there or set METACLAW_ROLE=learner"
                if self.settings.role == "serving"
                else None
            ),
            agent=self.agent,
            groups=self.settings.agents.groups,
        )
        self._last_refresh: float | None = None
        # recorded with each captured query vector (the trajectories' ``embedder`` column)
        self._embedder_id = self.library.embedder_id
        self.trajectories = TrajectoryStore(self.store, default_dim=self._vector_dim)
        self._snapshot = SkillSnapshot(generation=0)  # the engine's own agent's
        # Other agents' snapshots, built with each read of the library (off the hot path);
        # the dict is replaced, never changed.
        self._agent_snapshots: dict[str, SkillSnapshot] = {}
        self._state: LibraryState | None = None
        self._agents_status_cache: tuple[LibraryState, dict[str, dict[str, int]]] | None = None
        self._snapshot_loaded = threading.Event()  # first attempt done (maybe failed)
        self._library_loaded = False  # a snapshot (from the store or its cache) is served
        self._snapshot_from_cache = False  # ...from the cache: the store's read replaces it
        self._cached_generation: int | None = None
        self.library_error: str | None = None  # why the first read failed, until one works
        self._snapshot_lock = threading.Lock()
        self._pending: OrderedDict[str, Injection] = OrderedDict()
        self._pending_lock = threading.Lock()
        self._closed = threading.Event()
        self.last_call_at: float | None = None
        # The slow loop's trained policy while one serves (set by the slow-loop runtime when
        # it serves): replay validation answers with it by default. Anything with ``ready``
        # and ``complete(messages, params)`` (train.policy.PolicyServer).
        self.serving_policy: Any = None
        # ...and per agent, the policy of each agent the slow loop trains a lane for.
        self.serving_policies: dict[str, Any] = {}
        self.writer: CaptureWriter | None = None
        # Plugins with per-engine state (the built-in fast loop) start here, before the
        # writer can replay anything to them.
        try:
            self.hook.metaclaw_engine_started(engine=self)
        except Exception as exc:
            self.faults.record("engine-started plugin", exc)
        self.holdout = Holdout(self, background=capture)
        self.pm.register(self.holdout, name="builtin:holdout")
        if capture:
            try:
                journal = CaptureJournal(
                    self.settings.spool_dir,
                    segment_bytes=self.settings.store.spool_segment_bytes,
                    fsync=self.settings.store.fsync,
                    hold_gil=self.settings.store.journal_holds_gil,
                )
                self.writer = CaptureWriter(
                    journal,
                    self.trajectories,
                    self.settings.store,
                    on_stored=self._on_stored,
                    on_reward=self._on_reward,
                    faults=self.faults,
                )
                self.writer.start()
            except Exception as exc:
                self.faults.record("capture journal (captures are disabled)", exc)
        self._refresher = threading.Thread(
            target=self._refresh_loop, name="metaclaw-skill-refresh", daemon=True
        )
        self._refresher.start()

    @property
    def fastloop(self) -> Any:
        """The built-in fast loop plugin of this engine (``builtin:fastloop``; None if it was
        unregistered). :func:`metaclaw_core.evolve.loop.fastloop_of` is the typed way."""
        return self.pm.get_plugin(FASTLOOP_PLUGIN)

    # -- readiness -----------------------------------------------------------------------
    def wait_ready(self, timeout: float = 120.0) -> bool:
        """Block until the embedder and the first skill snapshot are loaded (not for hot paths)."""
        deadline = time.monotonic() + timeout
        ok = self.embedder.wait_ready(timeout)
        ok = self._snapshot_loaded.wait(max(0.0, deadline - time.monotonic())) and ok
        return ok

    @property
    def ready(self) -> bool:
        """True once calls get skills: the embedder and the skill library are both loaded."""
        return self._library_loaded and self.embedder.ready

    @property
    def library_loaded(self) -> bool:
        return self._library_loaded

    @property
    def snapshot(self) -> SkillSnapshot:
        """The skill index calls are served from right now."""
        return self._snapshot

    @property
    def generation(self) -> int:
        return self._snapshot.generation

    @property
    def store_generation(self) -> int:
        """The store's newest generation number, any agent's, as of the last library read."""
        state = self._state
        return state.number if state is not None else self._snapshot.generation

    # -- hot path ------------------------------------------------------------------------
    def before_call(self, ctx: CallContext) -> Injection:
        """Choose and render the skills for this call. Never raises; never waits on I/O."""
        return self._inject(ctx, None)

    def _inject(self, ctx: CallContext, query: str | None) -> Injection:
        """before_call, with the query given when the caller already extracted it."""
        started = time.perf_counter()
        agent = ctx.agent or self.agent
        # Read the flag before the reference: the snapshot is swapped in before it is set.
        loaded = self._library_loaded
        if agent == self.agent:
            snap = self._snapshot  # one reference: the whole call sees one generation
        else:
            snap, loaded = self._snapshot_of(agent)
        generation = snap.generation if loaded else GENERATION_UNKNOWN
        self.last_call_at = time.time()
        try:
            if query is None:
                query = self._extract_query(ctx)
            qvec = self._query_vector(query) if query and len(snap) else None
            found = self._retrieve(ctx, query, qvec, snap)
            # The randomised holdout of new skills: an in-memory draw, no I/O.
            found, arms = self.holdout.assign(found, agent)
            chosen, text = self._render(ctx, found)
            if arms:  # an "injected" skill the token budget left out was not injected
                names = {c.skill.name for c in chosen}
                arms = {n: a for n, a in arms.items() if a == "held_out" or n in names} or None
            degraded = (
                None if qvec is not None or not query or not len(snap) else "embedder not ready"
            )
            if not loaded and not chosen:
                degraded = DEGRADED_LIBRARY
            injection = Injection(
                call_id=ctx.call_id,
                generation=generation,
                text=text,
                skills=chosen,
                query=query,
                query_vector=qvec,
                started_at=started,
                degraded=degraded,
                holdout=arms,
                agent=agent,
            )
        except Exception as exc:
            self.faults.record("before_call", exc)
            injection = Injection(
                call_id=ctx.call_id,
                generation=generation,
                started_at=started,
                degraded=f"{type(exc).__name__}: {exc}",
                agent=agent,
            )
        self._remember(injection)
        return injection

    def _snapshot_of(self, agent: str) -> tuple[SkillSnapshot, bool]:
        """Another agent's snapshot and whether the library is loaded for it. Every agent
        the library knows (owners of skills, makers of generations, members of groups) has
        one built with each read of the library, off the hot path; any other agent receives
        exactly the skills shared with every agent (``ANYONE``'s snapshot), so a call never
        builds one. Only an agent that the settings' groups name but the last read did not
        know is built here, once, in memory (no I/O)."""
        snapshots = self._agent_snapshots
        snap = snapshots.get(agent)
        if snap is not None:
            return snap, True
        state = self._state
        if state is None:
            return SkillSnapshot(generation=0), False
        if not any(agent in members for members in state.members.values()):
            return snapshots.get(ANYONE) or SkillSnapshot(generation=0), ANYONE in snapshots
        snap = self.library.snapshot_of(state, agent)
        with self._snapshot_lock:
            if self._state is state:  # a newer read would have built it from newer data
                self._agent_snapshots = {**self._agent_snapshots, agent: snap}
        return snap, True

    def _build_snapshots(self, state: LibraryState) -> dict[str, SkillSnapshot]:
        """Every known agent's snapshot from one read of the library (off the hot path)."""
        known = set(state.agents()) | set(self._agent_snapshots) - {ANYONE}
        known |= {a for members in state.members.values() for a in members}
        known.discard(self.agent)
        old = self._agent_snapshots
        out: dict[str, SkillSnapshot] = {}
        for a in [*sorted(known), ANYONE]:
            kept = old.get(a)
            # unchanged since the last read (its generation is what it receives): kept as is
            if kept is not None and kept.generation == state.generation_of(a) and kept.generation:
                out[a] = kept
            else:
                out[a] = self.library.snapshot_of(state, a)
        return out

    def snapshot_for(self, agent: str | None = None) -> SkillSnapshot:
        """The skill index ``agent``'s calls are served from right now."""
        agent = validate_agent(agent) if agent else self.agent
        if agent == self.agent:
            return self._snapshot
        return self._snapshot_of(agent)[0]

    def library_of(self, agent: str | None = None) -> SkillLibrary:
        """The skill library acting for ``agent`` (default: this engine's)."""
        return self.library.for_agent(agent)

    def _retrieve(
        self, ctx: CallContext, query: str, qvec: Vector | None, snap: SkillSnapshot
    ) -> list[ScoredSkill]:
        found = self.hook.metaclaw_retrieve(
            query=query, query_vector=qvec, snapshot=snap, ctx=ctx, settings=self.settings
        )
        return list(found or [])

    def _render(self, ctx: CallContext, found: list[ScoredSkill]) -> tuple[list[ScoredSkill], str]:
        chosen = choose_within_budget(found, self.settings.retrieval.token_budget)
        text = (
            self.hook.metaclaw_render_injection(skills=chosen, ctx=ctx, settings=self.settings)
            or ""
        )
        return chosen, text

    def injection_for(
        self,
        ctx: CallContext,
        *,
        snapshot: SkillSnapshot,
        query: str,
        query_vector: Vector | None,
        include: ScoredSkill | None = None,
    ) -> Injection:
        """What ``before_call`` would inject into ``ctx`` if ``snapshot`` were served (the
        same retrieval, budget and rendering hooks; no holdout), with ``include`` among the
        skills whatever retrieval says. For replay validation, off the hot path."""
        found = self._retrieve(ctx, query, query_vector, snapshot) if len(snapshot) else []
        if include is not None:
            found = [include, *[f for f in found if f.skill.name != include.skill.name]]
        chosen, text = self._render(ctx, found)
        return Injection(
            call_id=ctx.call_id,
            generation=snapshot.generation,
            text=text,
            skills=chosen,
            query=query,
            query_vector=query_vector,
        )

    def _query_vector(self, query: str) -> Vector | None:
        emb = self.embedder
        if not emb.ready:
            cached = getattr(emb, "cached_query", None)
            vec = cached(query) if cached is not None else None
            if vec is not None:
                return vec  # type: ignore[no-any-return]
            wait = self.settings.retrieval.wait_for_model_s
            if wait <= 0 or not emb.wait_ready(wait):
                return None
        return emb.embed_query(query)

    def _extract_query(self, ctx: CallContext) -> str:
        return self.hook.metaclaw_extract_query(ctx=ctx, settings=self.settings) or ""

    def _query_for_capture(self, ctx: CallContext) -> str:
        try:
            return self._extract_query(ctx)
        except Exception as exc:  # a broken extractor must not cost the capture
            self.faults.record("query extraction", exc)
            return ""

    def _remember(self, injection: Injection) -> None:
        with self._pending_lock:
            self._pending[injection.call_id] = injection
            if len(self._pending) > MAX_PENDING_CALLS:
                self._pending.popitem(last=False)

    def after_call(
        self,
        ctx: CallContext,
        output: ModelOutput | str | None,
        *,
        injection: Injection | None = None,
        error: str | BaseException | None = None,
        latency_ms: float | None = None,
    ) -> str | None:
        """Capture the call. Returns the trajectory id once it is durable (journaled), or None
        if it was filtered out or capture failed. Never raises; never waits on the store."""
        try:
            with self._pending_lock:
                pending = self._pending.pop(ctx.call_id, None)
            inj = injection or pending
            if latency_ms is None and inj is not None and inj.started_at:
                latency_ms = (time.perf_counter() - inj.started_at) * 1000.0
            err = (
                None
                if error is None
                else (error if isinstance(error, str) else f"{type(error).__name__}: {error}")
            )
            hooks = self.hook.metaclaw_prepare_trajectory.get_hookimpls()
            builtin_redaction = any(h.plugin_name == REDACTION_PLUGIN for h in hooks)
            host_plugins = len(hooks) - builtin_redaction
            tid = new_id()
            agent = ctx.agent or (inj.agent if inj is not None else None) or self.agent
            generation = inj.generation if inj is not None else self._served_generation(agent)
            if generation == GENERATION_UNKNOWN and self._library_loaded:
                # Loaded since before_call (an LLM call outlasts the first store read): the
                # generation the store was at, the one the call would have been served from.
                generation = self._served_generation(agent)
            metadata = ctx.metadata
            if inj is not None and inj.degraded:
                metadata = {**metadata, "degraded": inj.degraded}  # the trajectory says so
            if inj is not None and inj.holdout:
                metadata = {**metadata, "holdout": inj.holdout}
            record = encode_call(
                trajectory_id=tid,
                created_at=utcnow(),
                messages=ctx.messages,
                output=output,
                fields={
                    "session_id": ctx.session_id,
                    "framework": ctx.framework,
                    "model": ctx.model,
                    "injected_skills": inj.skill_names if inj is not None else [],
                    "generation": generation,
                    "query": inj.query if inj is not None else self._query_for_capture(ctx),
                    "latency_ms": latency_ms,
                    "error": err,
                    "outcome": "error" if err else "unknown",
                    "agent": agent,
                },
                metadata=metadata,
                vector=inj.query_vector if inj is not None else None,
                caps=self.settings.capture,
                redact=builtin_redaction and self.settings.capture.redact_secrets,
                embedder=self._embedder_id,
            )
            if host_plugins:
                # A plugin of the host's: it gets the documented Trajectory, then the record
                # is made again from what it left.
                traj = record.trajectory
                verdicts = self.hook.metaclaw_prepare_trajectory(
                    trajectory=traj, settings=self.settings
                )
                if any(v is False for v in verdicts):
                    return None
                record = encode_trajectory(traj, record.vector, self._embedder_id)
                tid = traj.id
            if self.writer is None:
                raise MetaClawError("capture is disabled (the spool could not be opened)")
            self.writer.submit_trajectory(record)
            if inj is not None and inj.holdout:
                self.holdout.record(tid, inj.holdout, agent)  # an append; written off the hot path
            return tid
        except Exception as exc:
            self.faults.record("after_call", exc)
            return None

    def _served_generation(self, agent: str | None = None) -> int:
        if agent is None or agent == self.agent:
            return self._snapshot.generation if self._library_loaded else GENERATION_UNKNOWN
        snap, loaded = self._snapshot_of(agent)
        return snap.generation if loaded else GENERATION_UNKNOWN

    def feedback(
        self, trajectory_id: str, reward: float, *, source: str = "user", detail: str | None = None
    ) -> Reward:
        """Record a reward in [-1, 1] for a captured trajectory (durable when this returns)."""
        r = Reward(trajectory_id=trajectory_id, value=reward, source=source, detail=detail)
        if self.writer is None:
            raise MetaClawError("metaclaw: capture is disabled, so feedback cannot be stored")
        self.writer.submit_reward(r)
        return r

    # -- a host's model call, wrapped ----------------------------------------------------
    def model_call(self, ctx: CallContext | None, **options: Any) -> ModelCall:
        """inject → the host's call → capture, as one sync or async context manager that
        fails open (:class:`metaclaw_core.call.ModelCall`, whose arguments ``options`` are)."""
        from metaclaw_core.call import ModelCall

        return ModelCall(self, ctx, **options)

    def record_fault(self, where: str, exc: BaseException) -> None:
        """Count and log (rate-limited) an internal failure of an adapter, and let the
        host's call go on: what ``metaclaw status`` reports under ``faults``."""
        try:
            self.faults.record(where, exc)
        except Exception:  # the recorder itself must not fail the host either
            log.warning("metaclaw: %s failed, the call goes on without it: %r", where, exc)

    # -- async twins ---------------------------------------------------------------------
    async def abefore_call(self, ctx: CallContext) -> Injection:
        """Like :meth:`before_call`; a query not in the cache is embedded on a worker thread
        so the event loop is not held for the forward pass."""
        query: str | None = None
        try:
            agent = ctx.agent or self.agent
            snap = self._snapshot if agent == self.agent else self._snapshot_of(agent)[0]
            if len(snap) and self.embedder.ready:
                query = self._extract_query(ctx)
                cached = getattr(self.embedder, "cached_query", None)
                if query and cached is not None and cached(query) is None:
                    return await _to_thread(self._inject, ctx, query)
        except Exception as exc:
            self.faults.record("before_call", exc)
        return self._inject(ctx, query)

    async def aafter_call(
        self,
        ctx: CallContext,
        output: ModelOutput | str | None,
        *,
        injection: Injection | None = None,
        error: str | BaseException | None = None,
        latency_ms: float | None = None,
    ) -> str | None:
        return self.after_call(ctx, output, injection=injection, error=error, latency_ms=latency_ms)

    async def afeedback(
        self, trajectory_id: str, reward: float, *, source: str = "user", detail: str | None = None
    ) -> Reward:
        return self.feedback(trajectory_id, reward, source=source, detail=detail)

    async def aclose(self) -> None:
        await _to_thread(self.close)

    # -- skills --------------------------------------------------------------------------
    def add_skills(self, skills: Skill | list[Skill], *, reason: str = "add") -> Generation:
        """Add skills; the next call sees them (the snapshot is rebuilt before this returns)."""
        return self.library.add(skills, reason=reason)

    def reembed(self) -> dict[str, Any]:
        """Migrate the store to this engine's embedder (off the hot path; waits for the model):
        live skills whose vectors another model made, or that do not say, get new versions as
        one generation; captured query vectors of another model are re-embedded in place.
        Returns what changed: ``{"embedder", "generation", "skills", "trajectories"}``."""
        if not self.embedder.wait_ready(120):
            why = getattr(self.embedder, "load_error", None)
            raise MetaClawError(f"metaclaw: the embedder is not available ({why})")
        gen = self.library.reembed()
        done = self.trajectories.reembed(
            lambda texts: self.embedder.embed_documents(texts), self._embedder_id
        )
        return {
            "embedder": self._embedder_id,
            "generation": gen.number if gen is not None else self.library.current_generation(),
            "skills": list(gen.updated) if gen is not None else [],
            "trajectories": done,
        }

    def import_skills(
        self,
        path: str | Path,
        *,
        replace: bool = False,
        strict: bool = False,
        allow_flagged: bool = False,
    ) -> ImportReport:
        """Import SKILL.md folders, each judged on its own (see ``SkillLibrary.import_dir``)."""
        return self.library.import_dir(
            Path(path), replace=replace, strict=strict, allow_flagged=allow_flagged
        )

    def vet_context(self, agent: str | None = None) -> VetContext:
        """What vetting checks may consult: the embedder, the live snapshot's vectors, and
        the risky-intent exemplars plugins add (``metaclaw_review_exemplars``)."""
        extra: dict[str, list[str]] = {}
        try:
            for contributed in self.hook.metaclaw_review_exemplars(settings=self.settings):
                for category, texts in (contributed or {}).items():
                    extra.setdefault(str(category), []).extend(str(t) for t in texts)
        except Exception as exc:  # a broken plugin must not open the gate: its checks still run
            self.faults.record("review exemplars", exc)
        snap = self._snapshot if agent is None else self.snapshot_for(agent)
        return VetContext(self.embedder, snap, exemplars=extra)

    def vet(
        self, skill: Skill, live: list[Skill], context: VetContext | None = None
    ) -> list[Finding]:
        """Every ``metaclaw_vet_skill`` answer about ``skill``, as findings.

        A check that raises is a finding too (quarantine): when a check cannot decide, the
        skill waits for a person rather than going live.
        """
        try:
            answers = self.hook.metaclaw_vet_skill(
                skill=skill,
                live=live,
                settings=self.settings,
                context=context or self.vet_context(),
            )
        except Exception as exc:
            self.faults.record("vetting", exc)
            return [
                Finding(
                    "quarantine",
                    f"a vetting check failed ({type(exc).__name__}: {exc})",
                    "vetting",
                )
            ]
        return as_findings(answers)

    def _vet(self, skill: Skill, live: list[Skill]) -> list[Finding]:
        agent = skill.agent if skill.agent != self.agent else None
        return self.vet(skill, live, self.vet_context(agent))

    def _on_generation(self, generation: Generation, skills: list[Skill]) -> None:
        self.refresh_snapshot()
        try:
            self.hook.metaclaw_generation_advanced(generation=generation, skills=skills)
        except Exception as exc:
            self.faults.record("generation observer", exc)

    def refresh_snapshot(self) -> SkillSnapshot:
        """Rebuild the index from the store and swap it in by reference (off the hot path)."""
        # Build outside the lock: the library takes its own lock, and a library change calls
        # back into here while holding it (lock-order inversion otherwise).
        state = self.library.state()
        snap = self.library.snapshot_of(state, self.agent)
        others = self._build_snapshots(state)
        with self._snapshot_lock:
            first_read = not self._library_loaded or self._snapshot_from_cache
            newer = self._state is None or state.number >= self._state.number
            if newer or first_read:
                self._state = state
                self._agent_snapshots = others
            if snap.generation >= self._snapshot.generation or first_read:
                self._snapshot = snap
            self._library_loaded = True
            self._snapshot_from_cache = False
            self.library_error = None
            self._snapshot_loaded.set()
            served = self._snapshot
        self._cache_snapshot(served)
        return served

    def _snapshot_cache_path(self) -> Path:
        return cache_path(self.settings.home, self.settings.store_uri, self.agent)

    def _serve_cached_snapshot(self) -> None:
        """Serve the snapshot cached by the last run until the store's first read (below)."""
        if not self.settings.store.snapshot_cache_max_skills:
            return
        snap = load_snapshot(
            self._snapshot_cache_path(),
            store_uri=self.settings.store_uri,
            embedder_id=self.library.embedder_id,
        )
        if snap is None:
            return
        with self._snapshot_lock:
            if not self._library_loaded:
                self._snapshot = snap
                self._snapshot_from_cache = self._library_loaded = True
                self._cached_generation = snap.generation

    def _cache_snapshot(self, snap: SkillSnapshot) -> None:
        cap = self.settings.store.snapshot_cache_max_skills
        if not cap or len(snap) > cap:
            return
        if snap.generation == self._cached_generation:
            return
        try:
            save_snapshot(
                self._snapshot_cache_path(),
                snap,
                store_uri=self.settings.store_uri,
                embedder_id=self.library.embedder_id,
                agents=self._state.agents() if self._state is not None else None,
            )
            self._cached_generation = snap.generation
        except Exception as exc:  # a cache: the next start reads the store, as without one
            self.faults.record("snapshot cache", exc)

    def _refresh_loop(self) -> None:
        interval = self.settings.store.refresh_interval_s
        try:
            self._serve_cached_snapshot()
        except Exception as exc:
            self.faults.record("snapshot cache", exc)
        while not self._closed.is_set():
            try:
                if not self._library_loaded or self._snapshot_from_cache:  # the store's first read
                    self.refresh_snapshot()
                else:
                    self.library.refresh()
                    known = self._state.number if self._state is not None else None
                    if self.library.store_generation() != known:
                        self.refresh_snapshot()
                self._last_refresh = time.monotonic()
            except Exception as exc:
                self.faults.record("skill refresh", exc)
                if not self._library_loaded:
                    self.library_error = f"{type(exc).__name__}: {exc}"
                self._snapshot_loaded.set()  # serve the empty library rather than wait forever
            self._closed.wait(interval)

    # -- observers -----------------------------------------------------------------------
    def _on_stored(self, records: list[EncodedTrajectory]) -> None:
        """Captures just committed (writer thread). ``metaclaw_records_stored`` takes the
        records as they are (the built-in fast loop); the observer hook gets Trajectory
        objects, built only when some plugin implements it."""
        try:
            self.hook.metaclaw_records_stored(records=records)
        except Exception as exc:
            self.faults.record("fast loop", exc)
        if self.hook.metaclaw_trajectories_stored.get_hookimpls():
            self.hook.metaclaw_trajectories_stored(trajectories=[r.trajectory for r in records])

    def _on_reward(self, reward: Reward) -> None:
        self.hook.metaclaw_reward_recorded(reward=reward)

    def _vector_dim(self) -> int:
        try:
            return self.embedder.dimension()
        except Exception:
            return FALLBACK_DIM

    # -- lifecycle -----------------------------------------------------------------------
    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every acknowledged capture is in the store (tests, CLI, shutdown)."""
        return self.writer.flush(timeout) if self.writer is not None else True

    def close(self, timeout: float = 30.0) -> None:
        """Drain captures to the store and stop background threads. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self.writer is not None:
            self.writer.close(timeout)
        try:
            self.hook.metaclaw_engine_closing(engine=self, timeout=min(timeout, 10.0))
        except Exception as exc:
            self.faults.record("engine-closing plugin", exc)
        self.holdout.close()
        self._refresher.join(timeout=5)

    def __enter__(self) -> MetaClaw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _agents_status(self) -> dict[str, dict[str, int]]:
        """Per agent the library knows (and this engine's): own live skills, shared skills
        received, generation; from the last read of the library (no I/O)."""
        state = self._state
        cached = self._agents_status_cache
        if state is not None and cached is not None and cached[0] is state:
            return cached[1]
        if state is None:
            return {
                self.agent: {
                    "live_skills": len(self._snapshot),
                    "received": 0,
                    "generation": self._snapshot.generation,
                }
            }
        out = {
            a: {
                "live_skills": len(state.own_rows(a)),
                "received": len(state.received_rows(a)),
                "generation": state.generation_of(a),
            }
            for a in sorted(set(state.agents()) | {self.agent})
        }
        self._agents_status_cache = (state, out)  # one per read of the library
        return out

    def status(self) -> dict[str, Any]:
        """Paths, counts, generation, model, health: what `metaclaw status` prints."""
        snap = self._snapshot
        writer = self.writer
        out: dict[str, Any] = {
            "home": str(self.settings.home),
            "store_uri": self.settings.store_uri,
            "generation": snap.generation,
            "live_skills": len(snap),
            "role": self.settings.role,
            # How old the view of the shared library may be: the last successful check of
            # the store for a newer generation (bounded by store.refresh_interval_s).
            "staleness_s": (
                None
                if self._last_refresh is None
                else round(time.monotonic() - self._last_refresh, 3)
            ),
            "staleness_bound_s": self.settings.store.refresh_interval_s,
            "embedding_model": getattr(self.embedder, "model_name", type(self.embedder).__name__),
            "embedder_ready": self.embedder.ready,
            "embedder_backend": getattr(self.embedder, "backend", None),
            "library_loaded": self._library_loaded,
            "snapshot_source": (
                None
                if not self._library_loaded
                else "cache"
                if self._snapshot_from_cache
                else "store"
            ),
            "ready": self.ready,
            "capture": {
                "enabled": writer is not None,
                "queue_depth": writer.queue_depth if writer else 0,
                "spool_pending": writer.journal.pending if writer else 0,
                "spool_bytes": writer.journal.size_bytes() if writer else 0,
                "store_healthy": writer.healthy if writer else False,
                **(dict(writer.stats) if writer else {}),
            },
            "faults": dict(self.faults.counts),
            "holdout": self.holdout.status(),
            "last_error": self.faults.last_error,
            "agent": self.agent,
            "agents": self._agents_status(),
        }
        try:
            for section in self.hook.metaclaw_engine_status(engine=self):
                out.update(section or {})
        except Exception as exc:
            self.faults.record("status plugin", exc)
        try:
            out["trajectories"] = self.trajectories.count()
        except Exception as exc:
            out["trajectories"] = None
            out["store_error"] = str(exc)
        return out
