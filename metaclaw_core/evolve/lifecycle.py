"""Skill effectiveness and the retirement policy (`metaclaw skills stats [--retire]`).

For each live skill: how often it was injected, the mean reward of those trajectories, and
the mean reward of *comparable* trajectories without it — ones whose task is at least
``lifecycle.comparable_similarity`` similar to the skill (so they could have used it). The
gain is the difference. A trajectory's reward is its score (:mod:`metaclaw_core.scoring`): the
mean of its rewards, or -1 if the host reported an error and nobody scored it; unscored
trajectories do not count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.models import Generation
from metaclaw_core.scoring import trajectory_score
from metaclaw_core.store.db import REWARDS, TRAJECTORIES, agent_filter

if TYPE_CHECKING:
    from metaclaw_core.engine import MetaClaw

Verdict = Literal["helps", "does-not-help", "too-few-samples"]
MAX_EMBED_FOR_STATS = 500  # trajectories captured while the library was empty have no vector


@dataclass
class SkillStats:
    """One live skill's record over the statistics window."""

    name: str
    source: str
    generation_added: int | None
    injected: int
    rewarded_with: int
    mean_with: float | None
    comparable_without: int
    mean_without: float | None
    gain: float | None
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("mean_with", "mean_without", "gain"):
            if out[key] is not None:
                out[key] = round(out[key], 4)
        return out


def _mean(values: np.ndarray[Any, Any]) -> float | None:
    return float(values.mean()) if values.size else None


def skill_stats(engine: MetaClaw, agent: str | None = None) -> list[SkillStats]:
    """Statistics for every skill ``agent`` is served now (default: the engine's agent), over
    that agent's trajectories (reads the store)."""
    s = engine.settings.lifecycle
    snap = engine.refresh_snapshot()
    if agent is not None and agent != engine.agent:
        snap = engine.snapshot_for(agent)
    who = agent or engine.agent
    if not len(snap):
        return []
    store = engine.store
    rows: list[dict[str, Any]] = []
    if store.has_table(TRAJECTORIES):
        store.refresh(TRAJECTORIES)
        table = store.table(TRAJECTORIES)
        query = table.search()
        if "agent" in table.schema.names:
            query = query.where(agent_filter(who))
        elif who != DEFAULT_AGENT:
            query = query.where("FALSE")  # a table from before agents: the default's only
        data = (
            query.select(["id", "created_at", "injected_skills", "error", "query", "vector"])
            .limit(None)
            .to_arrow()
        )
        if data.num_rows:
            data = data.sort_by([("created_at", "descending")]).slice(0, s.window)
            rows = data.to_pylist()
    rewards: dict[str, list[float]] = {}
    if rows and store.has_table(REWARDS):
        store.refresh(REWARDS)
        wanted = {r["id"] for r in rows}
        rdata = store.table(REWARDS).search().select(["trajectory_id", "value"]).limit(None)
        for r in rdata.to_arrow().to_pylist():
            if r["trajectory_id"] in wanted:
                rewards.setdefault(r["trajectory_id"], []).append(float(r["value"]))
    n = len(rows)
    outcome = np.full(n, np.nan, dtype=np.float64)
    for i, r in enumerate(rows):
        score = trajectory_score(rewards.get(r["id"], ()), r["error"])
        if score is not None:
            outcome[i] = score
    dim = snap.matrix.shape[1]
    vectors = np.zeros((n, dim), dtype=np.float32)
    has_vec = np.zeros(n, dtype=bool)
    missing: list[int] = []
    for i, r in enumerate(rows):
        v = r["vector"]
        if v is not None and len(v) == dim and any(v):
            vectors[i] = v
            has_vec[i] = True
        elif r["query"] and not np.isnan(outcome[i]):
            missing.append(i)
    missing = missing[:MAX_EMBED_FOR_STATS]
    if missing:
        embedded = engine.embedder.embed_documents([rows[i]["query"] for i in missing])
        for i, v in zip(missing, embedded, strict=True):
            vectors[i] = v
            has_vec[i] = True
    sims = vectors @ snap.matrix.T if n else np.zeros((0, len(snap)), dtype=np.float32)
    rewarded = ~np.isnan(outcome)
    out: list[SkillStats] = []
    # records, not snap.skills: materialising every skill would stay cached on the served
    # snapshot (it keeps skills as plain tuples for the garbage collector's sake)
    for j, (name, _d, _b, _c, source, _p, added, _t) in enumerate(snap.records):
        used = np.array([name in (r["injected_skills"] or []) for r in rows], dtype=bool)
        with_vals = outcome[used & rewarded]
        comparable = ~used & rewarded & has_vec & (sims[:, j] >= s.comparable_similarity)
        without_vals = outcome[comparable]
        mean_with, mean_without = _mean(with_vals), _mean(without_vals)
        gain = None if mean_with is None or mean_without is None else mean_with - mean_without
        enough = with_vals.size >= s.min_samples and without_vals.size >= s.min_samples
        verdict: Verdict = "too-few-samples"
        if enough and gain is not None:
            verdict = "does-not-help" if gain <= s.retire_max_gain else "helps"
        out.append(
            SkillStats(
                name=name,
                source=source,
                generation_added=added,
                injected=int(used.sum()),
                rewarded_with=int(with_vals.size),
                mean_with=mean_with,
                comparable_without=int(without_vals.size),
                mean_without=mean_without,
                gain=gain,
                verdict=verdict,
            )
        )
    return out


def retire_unhelpful(
    engine: MetaClaw, stats: list[SkillStats] | None = None, agent: str | None = None
) -> Generation | None:
    """Retire every live skill of ``agent``'s own judged ``does-not-help``: one new
    generation (or None). A shared skill it receives is its owner's to retire."""
    stats = skill_stats(engine, agent) if stats is None else stats
    lib = engine.library_of(agent)
    own = {sk.name for sk in lib.live()}
    losers = [st for st in stats if st.verdict == "does-not-help" and st.name in own]
    if not losers:
        return None
    detail = ", ".join(f"{st.name} (gain {st.gain:+.2f})" for st in losers)
    return lib.retire([st.name for st in losers], reason=f"lifecycle: no gain from {detail}")
