"""What a user reads: per-skill evidence (replays, holdout) and the learning curve.

``skill_evidence`` folds the ``replays`` and ``holdouts`` tables into one record per skill:
fixed and regressed replays, calls per arm, lift, interval and the holdout's state.
``learning_curve`` is the mean reward and failure rate per generation and per day, from the
trajectories and rewards in the store; ``plot_curve`` draws it as a PNG (matplotlib).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.evolve.validation import replay_rows
from metaclaw_core.store.db import HOLDOUTS, REWARDS, TRAJECTORIES, agent_filter

if TYPE_CHECKING:
    from metaclaw_core.engine import MetaClaw


def skill_evidence(
    engine: MetaClaw, name: str | None = None, *, agent: str | None = None
) -> list[dict[str, Any]]:
    """One record per skill that has replays or a holdout (or ``name``'s alone); with
    ``agent``, only the skills that agent owns (or owned, or has pending)."""
    replays = replay_rows(engine, name, limit=100_000)
    holdout = engine.holdout
    lib = engine.library_of(agent)
    states = (
        {r["skill"]: r for r in holdout.states(name, agent=lib.agent)}
        if _has(engine, HOLDOUTS)
        else {}
    )
    live = {s.name for s in lib.live()}
    names = sorted({r["skill"] for r in replays} | set(states) | ({name} if name else set()))
    if agent is not None:
        # The evidence tables name skills, not agents: keep the names this agent owns.
        owned = {s.name for s in lib.all_versions()} | {s.name for s in lib.pending()}
        names = [n for n in names if n in owned or n == name]
    out = []
    for n in names:
        mine = [r for r in replays if r["skill"] == n]
        counts = {k: sum(1 for r in mine if r["outcome"] == k) for k in OUTCOMES}
        newest = mine[0]["evolution_id"] if mine else None
        last = [r for r in mine if r["evolution_id"] == newest]
        state = states.get(n)
        record: dict[str, Any] = {
            "skill": n,
            "live": n in live,
            "replays": {
                "total": len(mine),
                **counts,
                "last_evolution": newest,
                "last": {k: sum(1 for r in last if r["outcome"] == k) for k in OUTCOMES},
                "rows": [_replay_json(r) for r in mine[:20]],
            },
            "holdout": None,
        }
        if state is not None:
            lift = state["numbers"] or (
                holdout.lift(state["key"], state["started_at"]).to_json()
                if state["state"] == "holdout"
                else None
            )
            record["holdout"] = {
                "state": state["state"],
                "reason": state["reason"],
                "started_at": state["started_at"],
                "started_generation": state["started_generation"],
                "decided_at": state["decided_at"],
                "decided_generation": state["decided_generation"],
                **(lift or {}),
            }
        out.append(record)
    return out


OUTCOMES = ("fixed", "not-fixed", "kept", "regressed", "unscored", "error", "skipped")


def _replay_json(r: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "created_at",
        "evolution_id",
        "kind",
        "trajectory_id",
        "outcome",
        "source",
        "original_reward",
        "new_reward",
        "model",
        "error",
        "latency_ms",
    )
    return {k: r.get(k) for k in keep} | {"output": (r.get("output_text") or "")[:300]}


def _has(engine: MetaClaw, table: str) -> bool:
    try:
        return bool(engine.store.has_table(table))
    except Exception:
        return False


def learning_curve(engine: MetaClaw, agent: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Mean reward and failure rate per generation and per day (UTC); only ``agent``'s
    calls when given (its generations).

    A call counts when it has a reward or a host-reported error (scored -1, as the fast loop
    does); it is a failure when that value is <= 0. ``calls`` counts every captured call.
    """
    store = engine.store
    if not _has(engine, TRAJECTORIES):
        return {"generations": [], "days": []}
    store.refresh(TRAJECTORIES)
    table = store.table(TRAJECTORIES)
    query = table.search()
    if agent is not None:
        if "agent" in table.schema.names:
            query = query.where(agent_filter(agent))
        elif agent != DEFAULT_AGENT:
            query = query.where("FALSE")  # a table from before agents: the default's only
    data = (
        query.select(["id", "created_at", "generation", "error"]).limit(None).to_arrow().to_pylist()
    )
    rewards: dict[str, list[float]] = {}
    if _has(engine, REWARDS):
        store.refresh(REWARDS)
        for r in (
            store.table(REWARDS)
            .search()
            .select(["trajectory_id", "value"])
            .limit(None)
            .to_arrow()
            .to_pylist()
        ):
            rewards.setdefault(r["trajectory_id"], []).append(float(r["value"]))
    by_gen: dict[int, list[float | None]] = {}
    by_day: dict[str, list[float | None]] = {}
    for t in data:
        got = rewards.get(t["id"])
        value = sum(got) / len(got) if got else (-1.0 if t["error"] else None)
        by_gen.setdefault(int(t["generation"] or 0), []).append(value)
        by_day.setdefault(t["created_at"].strftime("%Y-%m-%d"), []).append(value)
    return {
        "generations": [{"generation": g, **_row(v)} for g, v in sorted(by_gen.items())],
        "days": [{"day": d, **_row(v)} for d, v in sorted(by_day.items())],
    }


def _row(values: list[float | None]) -> dict[str, Any]:
    scored = [v for v in values if v is not None]
    return {
        "calls": len(values),
        "scored": len(scored),
        "mean_reward": round(sum(scored) / len(scored), 4) if scored else None,
        "failure_rate": round(sum(1 for v in scored if v <= 0) / len(scored), 4)
        if scored
        else None,
    }


def plot_curve(curve: dict[str, list[dict[str, Any]]], path: Path) -> Path:
    """The learning curve as a PNG: mean reward and failure rate, per generation and day.

    Raises ImportError with an install hint when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "metaclaw: `metaclaw report --png` needs matplotlib; pip install "
            "'metaclaw-core[report]' (or matplotlib)"
        ) from exc
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, label in (
        (axes[0], "generations", "generation"),
        (axes[1], "days", "day"),
    ):
        rows = [r for r in curve[key] if r["scored"]]
        xs = [str(r[label]) for r in rows]
        ax.plot(xs, [r["mean_reward"] for r in rows], marker="o", label="mean reward")
        ax.plot(xs, [r["failure_rate"] for r in rows], marker="s", label="failure rate")
        ax.set_xlabel(label)
        ax.set_ylim(-1.05, 1.05)
        ax.axhline(0, color="grey", linewidth=0.5)
        ax.set_title(f"per {label}")
        ax.legend(loc="lower left")
        if key == "days":
            ax.tick_params(axis="x", labelrotation=45)
    fig.suptitle("MetaClaw learning curve")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
