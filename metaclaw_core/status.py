"""``metaclaw status`` without opening LanceDB, when the answer is known without it.

What the command prints for a local store is: counts (trajectories: the table's manifest,
:mod:`metaclaw_core.store.manifest`), the current generation and its live skills, and
settings. The generation and the live skills come from the engine's snapshot cache
(:mod:`metaclaw_core.skills.snapshot_cache`) when it is provably current: it is of this
store and this embedder, and its generation is the store's newest (generations are numbered
1, 2, ... and never deleted, so the generations table holds as many rows as the newest
number; a generation's live set never changes once published). Otherwise, or for an object
store, entry-point plugins (which may bring another embedder) or anything unexpected,
:func:`quick_status` returns None and the command reads the store through an engine, as it
always did. The dict is the one a fresh read-only engine's ``status()`` gives, plus the
config file fields the command adds; a test compares the two on the same store.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metaclaw_core.config import Settings

log = logging.getLogger("metaclaw.status")


def _has_entrypoint_plugins(group: str) -> bool:
    from importlib.metadata import entry_points

    return bool(entry_points(group=group))


def quick_status(settings: Settings) -> dict[str, Any] | None:
    """The status dict of ``metaclaw status``, or None if it needs the store opened."""
    try:
        return _quick_status(settings)
    except Exception as exc:  # never an error of its own: the full path decides
        log.info("metaclaw: status reads the store (%s)", exc)
        return None


def _quick_status(settings: Settings) -> dict[str, Any] | None:
    from metaclaw_core import hookspecs

    uri = settings.store_uri
    if "://" in uri or not settings.store.snapshot_cache_max_skills:
        return None
    if settings.load_entrypoints and _has_entrypoint_plugins(hookspecs.PROJECT):
        return None
    from metaclaw_core.embeddings import make_embedder
    from metaclaw_core.skills.snapshot_cache import cache_path, cached_agents, load_snapshot
    from metaclaw_core.store.db import GENERATIONS, HOLDOUTS, TRAJECTORIES
    from metaclaw_core.store.manifest import table_rows

    embedder = make_embedder(settings.embedding)  # made, not loaded
    generations = table_rows(uri, GENERATIONS) or 0
    if generations:
        snap = load_snapshot(
            cache_path(settings.home, uri, settings.agents.default),
            store_uri=uri,
            embedder_id=embedder.model_id,
        )
        if snap is None or snap.generation != generations:
            return None
        path = cache_path(settings.home, uri, settings.agents.default)
        if set(cached_agents(path) or ["?"]) - {settings.agents.default}:
            return None  # several agents (or not recorded): the store says which
        generation, live = snap.generation, len(snap)
    else:
        generation, live = 0, 0
    trajectories = table_rows(uri, TRAJECTORIES) or 0
    if table_rows(uri, HOLDOUTS):
        return None  # a skill under holdout: its counts are read from the store
    return {
        "home": str(settings.home),
        "store_uri": uri,
        "generation": generation,
        "live_skills": live,
        "role": settings.role,
        "staleness_s": None,
        "staleness_bound_s": settings.store.refresh_interval_s,
        "embedding_model": embedder.model_name,
        "embedder_ready": False,
        "embedder_backend": embedder.backend,
        "library_loaded": True,
        "snapshot_source": "store",
        "ready": False,
        "capture": {
            "enabled": False,
            "queue_depth": 0,
            "spool_pending": 0,
            "spool_bytes": 0,
            "store_healthy": False,
        },
        "faults": {},
        "fastloop": {
            "scoring_queue": 0,
            "events_queue": 0,
            "failures_since_evolution": 0,
            "last_error": None,
        },
        "holdout": {"active": {}, "pending": 0, "decisions": 0, "last_error": None},
        "last_error": None,
        # only one agent's generations in the store (the cache's generation is the newest)
        "agent": settings.agents.default,
        "agents": {
            settings.agents.default: {"live_skills": live, "received": 0, "generation": generation}
        },
        "trajectories": trajectories,
        "config_file": str(settings.config_file),
        "config_file_exists": settings.config_file.exists(),
    }
