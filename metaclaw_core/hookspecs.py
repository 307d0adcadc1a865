"""The pluggy hook specifications: metaclaw-core's extension surface.

Every default behaviour is a plugin in :mod:`metaclaw_core.plugins` implementing these hooks;
replacing one is registering another implementation (``MetaClaw(plugins=[...])`` or the
``metaclaw`` entry-point group). pluggy calls implementations newest-registered first, so a
third-party plugin runs before the built-in one; for ``firstresult`` hooks its non-None answer
wins. Hooks marked *hot path* run inside the host agent's LLM call: keep them fast, and know
that an exception there is logged and the call proceeds without MetaClaw (fail open).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from metaclaw_core.config import Settings
    from metaclaw_core.evolve.report import EvolutionReport
    from metaclaw_core.models import (
        CallContext,
        Generation,
        Reward,
        ScoredSkill,
        Skill,
        Trajectory,
    )
    from metaclaw_core.schedule.signals import IdleSignal, LastCallSource
    from metaclaw_core.skills.index import SkillSnapshot
    from metaclaw_core.skills.verdict import Finding
    from metaclaw_core.skills.vetting import VetContext
    from metaclaw_core.train.backend import TrainingBackend
    from metaclaw_core.vectors import Embedder, Vector

PROJECT = "metaclaw"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def metaclaw_make_embedder(settings: Settings) -> Embedder | None:
    """Build the embedder used for skills and queries (called once, at engine start).

    Return an object satisfying :class:`metaclaw_core.embeddings.Embedder`; first non-None wins.
    """


@hookspec(firstresult=True)
def metaclaw_extract_query(ctx: CallContext, settings: Settings) -> str | None:
    """*Hot path.* Return the text that describes the task of this call, for retrieval.

    It should drop envelopes (time stamps, runtime headers, tool dumps, blocks injected on
    earlier turns). Return "" when the call has no task to retrieve for; first non-None wins.
    """


@hookspec(firstresult=True)
def metaclaw_retrieve(
    query: str,
    query_vector: Vector | None,
    snapshot: SkillSnapshot,
    ctx: CallContext,
    settings: Settings,
) -> list[ScoredSkill] | None:
    """*Hot path.* Choose the skills to inject, best first, from ``snapshot``.

    ``query_vector`` is the unit-length embedding of ``query`` (None if the embedder is not
    ready). ``snapshot`` is one immutable generation of the live library. First non-None wins.
    """


@hookspec(firstresult=True)
def metaclaw_render_injection(
    skills: list[ScoredSkill], ctx: CallContext, settings: Settings
) -> str | None:
    """*Hot path.* Render the chosen skills as the block appended to the system prompt.

    Must be deterministic (same skills → same text) so provider prompt caches keep hitting.
    Return "" for no block; first non-None wins.
    """


@hookspec
def metaclaw_prepare_trajectory(trajectory: Trajectory, settings: Settings) -> bool | None:
    """*Hot path.* Redact or filter a trajectory before anything stores it.

    Modify ``trajectory`` in place (e.g. replace secrets); return ``False`` to drop it (it is
    then neither stored nor observed). Every implementation is called. The trajectory comes
    with the built-in secret redaction already applied; registering any implementation costs
    each call the building of this object (the capture otherwise builds none on the hot path).
    """


@hookspec
def metaclaw_engine_started(engine: Any) -> None:
    """The engine (``engine``: the :class:`~metaclaw_core.MetaClaw`) is built: its settings,
    store, library and plugin manager exist, and its capture writer has not started (nothing
    is replayed yet). A plugin with per-engine state builds it here and registers it on
    ``engine.pm`` (the built-in fast loop does). Every implementation is called; one that
    raises is logged and the engine starts without it.
    """


@hookspec
def metaclaw_engine_closing(engine: Any, timeout: float) -> None:
    """The engine is closing, after its capture writer drained: stop background work within
    ``timeout`` seconds. Every implementation is called; exceptions are logged and swallowed.
    """


@hookspec
def metaclaw_engine_status(engine: Any) -> dict[str, Any] | None:
    """Contribute sections to ``engine.status()`` (``metaclaw status``): return
    ``{section: value}``, or None. Every implementation is called; the dicts are joined."""


@hookspec
def metaclaw_records_stored(records: list[Any]) -> None:
    """Observe the captures this process's writer just committed, as the writer holds them
    (:class:`metaclaw_core.store.records.EncodedTrajectory`: ``id``, ``error``, the lazily
    built ``trajectory``). Background writer thread; keep the work here O(1). The built-in
    fast loop is fed this way; a plugin that wants :class:`Trajectory` objects implements
    ``metaclaw_trajectories_stored`` instead.
    """


@hookspec
def metaclaw_trajectories_stored(trajectories: list[Trajectory]) -> None:
    """Observe trajectories just committed to the store (background writer thread).

    The writer builds these objects from the journal lines only when some plugin implements
    this hook (``metaclaw_records_stored`` gets the records without building them); keep the
    work here O(1).
    """


@hookspec
def metaclaw_reward_recorded(reward: Reward) -> None:
    """Observe a reward just recorded for a trajectory (background writer thread)."""


@hookspec(firstresult=True)
def metaclaw_score_trajectory(trajectory: Trajectory, settings: Settings) -> Reward | None:
    """Score a stored trajectory: return a :class:`Reward` in [-1, 1], or None to pass.

    Called by the fast loop's scorer thread for every stored trajectory without a
    host-reported error (never on the hot path); the reward is then recorded like feedback.
    First non-None wins, in pluggy order: your plugins, then the built-in verifiable check
    (``rewards.check_command``), then the PRM judge (``judge.base_url``) last.
    """


@hookspec
def metaclaw_vet_skill(
    skill: Skill, live: list[Skill], settings: Settings, context: VetContext | None
) -> str | Finding | list[Finding] | None:
    """Check a skill before it joins the live library (every source: evolver, corrections,
    imports, the API, approvals).

    Return None when you find nothing; a :class:`~metaclaw_core.skills.verdict.Finding`
    (or a list of them) whose ``outcome`` is ``"reject"`` (never live) or ``"quarantine"``
    (held for a person: ``metaclaw skills pending``); or a plain string, which rejects (the
    contract of earlier versions). ``live`` is the live library the skill would join (without
    the skill it replaces). ``context`` offers embeddings: ``context.embedder``,
    ``context.closest(skill, live, k, min_similarity)`` (None when the caller has no
    embedder). Implementations may leave out arguments they do not use. Every implementation
    is called; the worst outcome wins; an implementation that raises quarantines the skill.
    """


@hookspec
def metaclaw_review_exemplars(settings: Settings) -> dict[str, list[str]] | None:
    """Add risky-intent exemplars to the built-in meaning review (``vet_intent``).

    Return ``{category: [instruction, ...]}``: short instructions that ask an agent for the
    risky thing, in varied plain wording. A new category name adds a category; an existing one
    extends it. Every implementation is called; the answers are joined. Called when a skill
    is vetted (off the hot path).
    """


@hookspec
def metaclaw_generation_advanced(generation: Generation, skills: list[Skill]) -> None:
    """Observe a new generation of the library (``skills`` is its live set)."""


@hookspec
def metaclaw_session_ended(session_id: str, reason: str | None, trajectory_ids: list[str]) -> None:
    """Observe the end of a host session (``POST /v1/sessions/{id}/end``, OpenClaw's
    ``session_end``): the cue to look at the session's failures.

    ``trajectory_ids`` are the captures of the session this process saw (possibly incomplete
    after a restart). Called off the hot path; exceptions are logged and swallowed.
    """


@hookspec(firstresult=True)
def metaclaw_training_backend(settings: Settings) -> TrainingBackend | None:
    """Build the training backend of the slow loop (called when training or RL serving starts).

    ``settings.train.backend`` names the one wanted (built-ins: ``local``, ``tinker``); return
    an object satisfying :class:`metaclaw_core.train.backend.TrainingBackend` if the name is
    yours, else None. First non-None wins. Loading weights may take a while: it runs off the
    hot path, in the trainer's thread or the CLI.
    """


@hookspec
def metaclaw_idle_signals(
    settings: Settings, last_call_at: LastCallSource
) -> list[IdleSignal] | None:
    """Contribute idle signals to the opportunistic scheduler (called once when it starts).

    Return :class:`metaclaw_core.schedule.signals.IdleSignal` objects (or None). Each reads
    ``away``, ``present`` or ``unknown`` at a given time; a signal of kind ``agent`` says
    whether the agent is quiet. ``last_call_at()`` gives the epoch seconds of the newest agent
    call seen (None if unknown). Every implementation is called; the lists are joined.
    """


@hookspec
def metaclaw_evolution_finished(report: EvolutionReport) -> None:
    """Observe an evolution that ran (not a dry run): ``report`` says which failures it read,
    every candidate with its verdict (``live``, ``pending``, ``rejected``) and reasons, and the
    new generation if one was published. Called on the thread that ran it (the fast loop's
    learner, or the CLI); exceptions are logged and swallowed.
    """


def hook_names() -> list[str]:
    return [name for name in globals() if name.startswith("metaclaw_")]
