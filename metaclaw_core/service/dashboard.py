"""The dashboard: a page at ``/`` that shows what the agent learned, and the JSON it reads.

The page is three static files shipped in the package (``dashboard_assets/``: plain HTML, JS
and CSS, no build step, nothing fetched from elsewhere), served without the token so that it
can load and ask for it; every route under ``/v1/dashboard`` needs the token like the rest of
``/v1``. The page also reads ``/v1/generations`` and ``/v1/trajectories``. Routes that read the
store are plain ``def`` routes (FastAPI runs them on worker threads).
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from metaclaw_core import __version__
from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.engine import MetaClaw
from metaclaw_core.evolve.lifecycle import skill_stats
from metaclaw_core.evolve.record import EvolutionLog
from metaclaw_core.models import SKILL_NAME_RE, Skill
from metaclaw_core.scoring import mean_reward, trajectory_score
from metaclaw_core.service.agent_scope import STATE_ALLOWED, request_agent
from metaclaw_core.service.errors import error_response
from metaclaw_core.service.schemas import GenerationResponse
from metaclaw_core.service.state import ServiceState, service_state
from metaclaw_core.store.db import REWARDS, TRAJECTORIES, Store, agent_filter, sql_in
from metaclaw_core.train.buffer import TRAIN_SAMPLES, QueryBuffer
from metaclaw_core.train.checkpoints import CHECKPOINTS, CheckpointLog

router = APIRouter()
State = Annotated[ServiceState, Depends(service_state)]

# The agent the page shows (its picker sends X-MetaClaw-Agent; a token that does not cover
# that agent was refused before the route, service/agent_scope.py).
Agent = Annotated[str, Depends(request_agent)]
SkillName = Annotated[str, Path(pattern=SKILL_NAME_RE.pattern, description="A skill slug.")]
T = TypeVar("T")

# The page and its files: path -> (file in dashboard_assets/, content type). They hold no
# data; auth.OPEN_PATHS lists the same paths so they load without the token.
ASSETS: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/dashboard/app.css": ("app.css", "text/css; charset=utf-8"),
}
# Nothing but this origin's own script, style and JSON; no inline code, no frames, no forms.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
ASSET_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
# Skill statistics read the newest lifecycle.window trajectories with their vectors: while
# captures keep arriving they are recomputed at most this often (a new generation always
# recomputes them at once).
STATS_MIN_INTERVAL_S = 10.0
PROVENANCE_SHOWN = 5  # trajectories listed per skill (the count says how many there are)
EVOLUTIONS_READ = 200  # newest evolutions searched for a skill's origin
REWARD_CURVE_POINTS = 200  # newest checkpoints with a reward


# -- the page --------------------------------------------------------------------------------
@cache
def _asset_bytes(name: str) -> bytes:
    return resources.files("metaclaw_core.service").joinpath("dashboard_assets", name).read_bytes()


def _asset_route(name: str, media_type: str) -> Callable[[Request], Response]:
    def serve(request: Request) -> Response:
        body = _asset_bytes(name)
        if name == "index.html":
            # Tell the page whether to ask for the token before its first request (a 401
            # would say the same; this spares the user a failed request).
            state: ServiceState = request.app.state.metaclaw
            auth = b"required" if state.settings.service.token is not None else b"off"
            body = body.replace(b'data-auth="unknown"', b'data-auth="' + auth + b'"', 1)
        return Response(body, media_type=media_type, headers=ASSET_HEADERS)

    serve.__name__ = f"dashboard_{name.replace('.', '_')}"
    return serve


for _path, (_name, _type) in ASSETS.items():
    # HEAD too: clients preconnect with `HEAD /` (Claude Code does) and a 405 looks like a fault
    router.add_api_route(
        _path, _asset_route(_name, _type), methods=["GET", "HEAD"], include_in_schema=False
    )


# -- caching of the expensive reads ----------------------------------------------------------
class _Cache:
    """Values keyed by what they depend on, recomputed by one thread at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, tuple[tuple[Any, ...], float, Any]] = {}
        self._computing: dict[str, threading.Lock] = {}

    def get(
        self,
        name: str,
        key: tuple[Any, ...],
        compute: Callable[[], T],
        *,
        reuse_if: Callable[[tuple[Any, ...]], bool] = lambda old: False,
        min_interval_s: float = 0.0,
    ) -> T:
        with self._lock:
            hit = self._items.get(name)
            gate = self._computing.setdefault(name, threading.Lock())
        now = time.monotonic()
        if hit is not None and (
            hit[0] == key or (reuse_if(hit[0]) and now - hit[1] < min_interval_s)
        ):
            return hit[2]  # type: ignore[no-any-return]
        with gate:
            with self._lock:
                hit = self._items.get(name)
            if hit is not None and hit[0] == key:
                return hit[2]  # type: ignore[no-any-return]
            value = compute()
            with self._lock:
                self._items[name] = (key, time.monotonic(), value)
            return value


_caches: weakref.WeakKeyDictionary[MetaClaw, _Cache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _cache_of(engine: MetaClaw) -> _Cache:
    with _caches_lock:
        c = _caches.get(engine)
        if c is None:
            c = _caches[engine] = _Cache()
        return c


# -- store reads -----------------------------------------------------------------------------
def _count(store: Store, table: str, agent: str | None = None) -> int:
    if not store.has_table(table):
        return 0
    store.refresh(table)
    tbl = store.table(table)
    if agent is None:
        return int(tbl.count_rows())
    if "agent" not in tbl.schema.names:  # a table from before agents: the default's only
        return int(tbl.count_rows()) if agent == DEFAULT_AGENT else 0
    return int(tbl.count_rows(agent_filter(agent)))


def _fingerprint(engine: MetaClaw, agent: str) -> tuple[int, int, int]:
    """What an agent's statistics depend on: its generation, trajectories and rewards."""
    return (
        engine.library_of(agent).current_generation(),
        engine.trajectories.count(agent),
        _count(engine.store, REWARDS, agent),
    )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _trajectory_briefs(engine: MetaClaw, ids: list[str]) -> dict[str, dict[str, Any]]:
    """id -> {query, error, outcome, reward, created_at, generation} for the ids that exist."""
    store = engine.store
    if not ids or not store.has_table(TRAJECTORIES):
        return {}
    store.refresh(TRAJECTORIES)
    rows = (
        store.table(TRAJECTORIES)
        .search()
        .where(sql_in("id", ids))
        .select(["id", "created_at", "query", "error", "outcome", "generation"])
        .limit(None)
        .to_arrow()
        .to_pylist()
    )
    rewards = engine.trajectories.rewards_for([r["id"] for r in rows])
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        got = rewards.get(r["id"], [])
        out[r["id"]] = {
            "id": r["id"],
            "created_at": r["created_at"].isoformat() if r["created_at"] else None,
            "query": r["query"] or "",
            "error": r["error"],
            "outcome": r["outcome"],
            "generation": r["generation"],
            "reward": _rounded(mean_reward(x.value for x in got)),
        }
    return out


def _evolutions(store: Store, agent: str | None = None) -> list[dict[str, Any]]:
    """The newest evolutions (``agent``'s), newest first, without their full reports."""
    rows = EvolutionLog(store).recent(EVOLUTIONS_READ, agent=agent)
    out = []
    for r in rows:
        try:
            report = json.loads(r.get("report_json") or "{}")
        except ValueError:
            report = {}
        reasons = {
            c["skill"]["name"]: c.get("reasons") or []
            for c in report.get("candidates") or []
            if isinstance(c, dict) and isinstance(c.get("skill"), dict)
        }
        out.append(
            {
                "id": r["id"],
                "created_at": r["created_at"].isoformat() if r["created_at"] else None,
                "mode": r["mode"],
                "trigger": r["trigger"],
                "model": r["model"],
                "generation": r["generation"],
                "failure_ids": list(r["failure_ids"] or []),
                "live": list(r["live"] or []),
                "pending": list(r["pending"] or []),
                "rejected": list(r["rejected"] or []),
                "reasons": reasons,
            }
        )
    return out


def _origin(skill: Skill, evolutions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The evolution that produced ``skill`` (live: made it live; pending: proposed it)."""
    ids = set(skill.provenance)
    matches = [
        e
        for e in evolutions
        if (
            skill.name in e["live"]
            and (skill.generation_added is None or e["generation"] == skill.generation_added)
        )
        or skill.name in e["pending"]
    ]
    matches = matches or [e for e in evolutions if ids & set(e["failure_ids"])]
    if not matches:
        return None
    e = matches[0]
    return {
        "id": e["id"],
        "created_at": e["created_at"],
        "mode": e["mode"],
        "trigger": e["trigger"],
        "model": e["model"],
        "generation": e["generation"],
        "failures": len(e["failure_ids"]),
        "reasons": e["reasons"].get(skill.name, []),
    }


def _provenance(
    skill: Skill,
    evolutions: list[dict[str, Any]],
    briefs: dict[str, dict[str, Any]],
    reasons: dict[int, str],
) -> dict[str, Any]:
    shown = skill.provenance[:PROVENANCE_SHOWN]
    return {
        "source": skill.source,
        "generation_added": skill.generation_added,
        "generation_reason": reasons.get(skill.generation_added or -1),
        "evolution": _origin(skill, evolutions),
        "trajectory_count": len(skill.provenance),
        "trajectories": [briefs.get(i, {"id": i, "missing": True}) for i in shown],
    }


def _skill_json(skill: Skill) -> dict[str, Any]:
    return skill.model_dump(
        mode="json",
        include={
            "name",
            "description",
            "body",
            "category",
            "source",
            "status",
            "generation_added",
            "created_at",
        },
    )


def _with_provenance(engine: MetaClaw, skills: list[Skill], agent: str) -> list[dict[str, Any]]:
    evolutions = _evolutions(engine.store, agent)
    reasons = {g.number: g.reason for g in engine.library_of(agent).history()}
    ids = list(dict.fromkeys(i for s in skills for i in s.provenance[:PROVENANCE_SHOWN]))
    briefs = _trajectory_briefs(engine, ids)
    return [
        {**_skill_json(s), "provenance": _provenance(s, evolutions, briefs, reasons)}
        for s in skills
    ]


def _generation_rewards(store: Store, agent: str) -> list[dict[str, Any]]:
    """Mean reward of the trajectories of each generation (the fast loop's reward curve).

    A trajectory scores by :func:`metaclaw_core.scoring.trajectory_score` (as in the skill
    statistics): the mean of its rewards, or -1 when the host reported an error and nobody
    scored it; unscored ones do not count.
    """
    if not store.has_table(TRAJECTORIES):
        return []
    store.refresh(TRAJECTORIES)
    table = store.table(TRAJECTORIES)
    query = table.search()
    if "agent" in table.schema.names:
        query = query.where(agent_filter(agent))
    elif agent != DEFAULT_AGENT:
        return []
    rows = query.select(["id", "generation", "error"]).limit(None).to_arrow().to_pylist()
    values: dict[str, list[float]] = {}
    if store.has_table(REWARDS):
        store.refresh(REWARDS)
        data = store.table(REWARDS).search().select(["trajectory_id", "value"]).limit(None)
        for r in data.to_arrow().to_pylist():
            values.setdefault(r["trajectory_id"], []).append(float(r["value"]))
    per: dict[int, list[float]] = {}
    for r in rows:
        score = trajectory_score(values.get(r["id"], ()), r["error"])
        if score is not None:
            per.setdefault(int(r["generation"] or 0), []).append(score)
    return [
        {"generation": g, "mean_reward": round(sum(v) / len(v), 4), "n": len(v)}
        for g, v in sorted(per.items())
    ]


class _StoreOnlyBuffer(QueryBuffer):
    """The query buffer as read by a process that does not train: it never creates the
    ``train_samples`` table (no table yet means nothing was consumed)."""

    def _consumed(self, generation: int) -> set[str]:
        if not self.store.has_table(TRAIN_SAMPLES):
            return set()
        return super()._consumed(generation)


class TrainerView(Protocol):
    """What the dashboard reads of a running slow loop (:class:`~metaclaw_core.train.runtime.
    SlowLoop`; ``metaclaw serve`` puts it at ``app.state.slow_loop``)."""

    def status(self) -> dict[str, Any]: ...


# -- routes ----------------------------------------------------------------------------------
@router.get("/v1/dashboard/agents", tags=["dashboard"])
def agents(request: Request, state: State, agent: Agent) -> dict[str, Any]:
    """The agents the page may pick (those the request's token covers), each with its
    generation and skill counts; ``agent`` is the one this request is for."""
    engine = state.engine
    known = engine.status()["agents"]
    allowed = getattr(request.state, STATE_ALLOWED, None)
    names = sorted(set(known) | {agent, engine.agent})
    if allowed is not None:
        names = [n for n in names if n in allowed]
    empty = {"live_skills": 0, "received": 0, "generation": 0}
    return {
        "agent": agent,
        "default": engine.agent,
        "agents": [{"agent": n, **known.get(n, empty)} for n in names],
    }


@router.get("/v1/dashboard/summary", tags=["dashboard"])
def summary(request: Request, state: State, agent: Agent) -> dict[str, Any]:
    """The agent's generation and counts, and the service's health, cheap enough to poll
    every few seconds."""
    engine = state.engine
    st = engine.status()
    cap = st["capture"]
    trainer = getattr(request.app.state, "slow_loop", None)
    snap = engine.snapshot_for(agent)
    return {
        "agent": agent,
        "generation": snap.generation,
        "live_skills": len(snap),
        "pending": len(engine.library_of(agent).pending()),
        "trajectories": engine.trajectories.count(agent),
        "rewards": _count(engine.store, REWARDS, agent),
        "health": {
            "embedder_ready": st["embedder_ready"],
            "embedding_model": st["embedding_model"],
            "capture_enabled": cap["enabled"],
            "queue_depth": cap["queue_depth"],
            "spool_pending": cap["spool_pending"],
            "spool_bytes": cap["spool_bytes"],
            "store_healthy": cap["store_healthy"],
            "faults": st["faults"],
            "last_error": st["last_error"],
            "store_error": st.get("store_error"),
            "role": st["role"],
            "staleness_s": st["staleness_s"],
            "fastloop": st["fastloop"],
        },
        "service": {
            "version": __version__,
            "uptime_s": round(time.time() - state.started_at, 3),
            "auth": state.settings.service.token is not None,
        },
        "training": {"running": trainer is not None},
    }


@router.get("/v1/dashboard/skills", tags=["dashboard"])
def skills(state: State, agent: Agent) -> dict[str, Any]:
    """The agent's skills (its own and the shared ones it receives) with their provenance
    and statistics (injections, mean reward with and without the skill; see
    ``metaclaw skills stats``)."""
    engine = state.engine
    key = _fingerprint(engine, agent)
    stats = _cache_of(engine).get(
        f"skill_stats:{agent}",
        key,
        lambda: {s.name: s.to_json() for s in skill_stats(engine, agent)},
        reuse_if=lambda old: old[0] == key[0],
        min_interval_s=STATS_MIN_INTERVAL_S,
    )
    visible = engine.library_of(agent).visible()
    out = _with_provenance(engine, visible, agent)
    for s, skill in zip(out, visible, strict=True):
        s["stats"] = stats.get(s["name"])
        s["scope"] = "own" if skill.agent == agent else f"shared by {skill.agent}"
    return {"agent": agent, "generation": key[0], "skills": out}


@router.get("/v1/dashboard/candidates", tags=["dashboard"])
def candidates(state: State, agent: Agent) -> dict[str, Any]:
    """The agent's candidates waiting for review, with where they came from."""
    engine = state.engine
    lib = engine.library_of(agent)
    held = lib.pending_reviews()
    live = {s.name for s in lib.live()}
    out = _with_provenance(engine, [skill for skill, _ in held], agent)
    for s, (_, review) in zip(out, held, strict=True):
        s["updates"] = s["name"] if s["name"] in live else None
        # why the review held it (empty: it waits because vetting.review = manual)
        s["findings"] = [f.to_json() for f in review.findings]
    return {"candidates": out}


@router.post(
    "/v1/dashboard/candidates/{name}/approve",
    response_model=GenerationResponse,
    tags=["dashboard"],
)
def approve(name: SkillName, state: State, agent: Agent) -> GenerationResponse:
    """Make a pending candidate live (vetted again): one new generation."""
    gen = state.engine.library_of(agent).approve([name], reason=f"approve {name} (dashboard)")
    return GenerationResponse(generation=gen)


@router.post("/v1/dashboard/candidates/{name}/reject", tags=["dashboard"])
def reject(name: SkillName, state: State, agent: Agent) -> dict[str, Any]:
    """Mark a pending candidate rejected (kept for the record, never live)."""
    lib = state.engine.library_of(agent)
    return {"rejected": lib.reject([name], reason="rejected in the dashboard")}


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    generation: int = Field(ge=0, description="The generation whose library becomes live.")
    reason: str | None = Field(None, max_length=500)


def _library_key(skills: list[Skill]) -> set[tuple[str, str]]:
    return {(s.name, s.created_at.isoformat()) for s in skills}


@router.post(
    "/v1/dashboard/rollback",
    response_model=GenerationResponse,
    tags=["dashboard"],
    responses={404: {"description": "no such generation"}, 409: {"description": "no change"}},
)
def rollback(req: RollbackRequest, state: State, agent: Agent) -> GenerationResponse | JSONResponse:
    """Make the agent's live library that of an earlier generation, as a new generation."""
    lib = state.engine.library_of(agent)
    current = lib.current_generation()
    if req.generation > current:
        return error_response(
            404, f"no generation {req.generation} (current is {current})", type="not_found"
        )
    # A version row's created_at is unique to it: equal keys mean the same library.
    if _library_key(lib.live(req.generation)) == _library_key(lib.live(current)):
        return error_response(
            409,
            f"generation {req.generation} has the same library as the current one "
            f"({current}): nothing to roll back",
            type="conflict",
        )
    gen = lib.rollback(req.generation, reason=req.reason)
    return GenerationResponse(generation=gen)


@router.get("/v1/dashboard/training", tags=["dashboard"])
def training(request: Request, state: State, agent: Agent) -> dict[str, Any]:
    """The slow loop: trainer and scheduler window when one runs in this process; buffer
    sizes, checkpoints and reward curves from the store either way."""
    engine = state.engine
    store = engine.store
    trainer: TrainerView | None = getattr(request.app.state, "slow_loop", None)
    out: dict[str, Any] = {"running": trainer is not None, "trainer": None, "signals": []}
    if trainer is not None:
        try:
            out["trainer"] = trainer.status()
        except Exception as exc:  # a broken trainer must not take the dashboard down
            out["trainer"] = {"error": f"{type(exc).__name__}: {exc}"}
        window = getattr(getattr(trainer, "scheduler", None), "state", None)
        if window is not None:
            out["signals"] = [
                {"signal": r.signal, "kind": r.kind, "state": r.state, "reason": r.reason}
                for r in window.readings
            ]
    trained = out["trainer"] or {}
    lanes = trained.get("lanes") or []
    buffer = trained.get("buffer") if [lane.get("agent") for lane in lanes] == [agent] else None
    if buffer is None:  # the agent's buffer as the store has it
        lib = engine.library_of(agent)
        buffer = _StoreOnlyBuffer(store, lib.current_generation, agent=agent).sizes().__dict__
    out["buffer"] = buffer
    checkpoints = CheckpointLog(store).history(agent=agent) if store.has_table(CHECKPOINTS) else []
    last = checkpoints[-1] if checkpoints else None
    out["last_checkpoint"] = (
        None if last is None else {**last.__dict__, "created_at": last.created_at.isoformat()}
    )
    out["reward_curve"] = [
        {"step": c.step, "reward": c.reward, "kind": c.kind}
        for c in checkpoints
        if c.reward is not None
    ][-REWARD_CURVE_POINTS:]
    key = _fingerprint(engine, agent)
    out["generation_rewards"] = _cache_of(engine).get(
        f"generation_rewards:{agent}",
        key,
        lambda: _generation_rewards(store, agent),
        reuse_if=lambda old: old[0] == key[0],
        min_interval_s=STATS_MIN_INTERVAL_S,
    )
    return out
