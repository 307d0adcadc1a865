"""The randomised holdout of new skills: causal lift from the first N eligible calls.

When a learned skill goes live, its first ``holdout.calls`` *eligible* calls (retrieval chose
it) are assigned at random: injected with probability ``holdout.probability``, held out
otherwise. The draw is a hash of (seed, skill, eligible-call index), so a run is reproducible
for a seed and a restart continues the sequence where the store says it stopped. The hot path
only draws and appends to an in-memory list; a daemon thread writes the assignments to the
``holdout_calls`` table and decides, from the rewards of the two arms, to promote the skill
(the lift's interval is above zero) or retire it (below zero, or N calls without a gain).
Each decision is a generation with its reason and numbers, and a row of ``holdouts``.

Agents: a holdout is of one agent's skill, counted over that agent's calls. Its key in the
tables is the skill's name for the default agent (as before agents) and ``agent/name`` for any
other (names are per agent; a slug has no ``/``), see :func:`holdout_key`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import statistics
import threading
from collections import deque
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.hookspecs import hookimpl
from metaclaw_core.models import Generation, ScoredSkill, Skill, utcnow
from metaclaw_core.store.db import HOLDOUT_CALLS, HOLDOUTS, REPLAYS, sql_in, sql_str

if TYPE_CHECKING:
    import pyarrow as pa

    from metaclaw_core.engine import MetaClaw

log = logging.getLogger("metaclaw.holdout")

INJECTED = "injected"
HELD_OUT = "held_out"


def holdouts_schema() -> pa.Schema:
    import pyarrow as pa

    from metaclaw_core.store.db import timestamp_type

    ts = timestamp_type()
    return pa.schema(
        [
            pa.field("skill", pa.string(), nullable=False),
            pa.field("state", pa.string()),  # holdout | promoted | retired | ended
            pa.field("started_at", ts),
            pa.field("started_generation", pa.int64()),
            pa.field("decided_at", ts),
            pa.field("decided_generation", pa.int64()),
            pa.field("reason", pa.string()),
            pa.field("numbers_json", pa.string()),
        ],
        metadata={"metaclaw_schema_version": "1"},
    )


def holdout_calls_schema() -> pa.Schema:
    import pyarrow as pa

    from metaclaw_core.store.db import timestamp_type

    return pa.schema(
        [
            pa.field("trajectory_id", pa.string(), nullable=False),
            pa.field("skill", pa.string(), nullable=False),
            pa.field("arm", pa.string()),
            pa.field("created_at", timestamp_type()),
        ],
        metadata={"metaclaw_schema_version": "1"},
    )


def holdout_key(agent: str | None, name: str) -> str:
    """The key of ``agent``'s skill ``name`` in the holdout tables."""
    return name if agent in (None, DEFAULT_AGENT) else f"{agent}/{name}"


def split_key(key: str) -> tuple[str, str]:
    """(agent, skill name) of a holdout key."""
    agent, sep, name = key.rpartition("/")
    return (agent, name) if sep else (DEFAULT_AGENT, key)


def draw(seed: int, skill: str, index: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, skill, index): the arm of one call."""
    h = hashlib.blake2b(f"{seed}:{skill}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64


@dataclass
class Lift:
    """The two arms' rewards and the difference of their means with an interval."""

    injected: int
    held_out: int
    mean_injected: float | None
    mean_held_out: float | None
    lift: float | None
    low: float | None
    high: float | None
    confidence: float
    eligible: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if self.lift is None or self.low is None or self.high is None:
            return f"{self.injected} injected vs {self.held_out} held out (too few rewards)"
        return (
            f"lift {self.lift:+.2f} [{self.low:+.2f}, {self.high:+.2f}] at "
            f"{self.confidence:.0%}, {self.injected} injected vs {self.held_out} held out"
        )


def lift_of(injected: list[float], held_out: list[float], confidence: float, eligible: int) -> Lift:
    """Mean reward with minus without, and a Welch (normal-approximation) interval."""
    mi = statistics.fmean(injected) if injected else None
    mh = statistics.fmean(held_out) if held_out else None
    lift = low = high = None
    if mi is not None and mh is not None and len(injected) >= 2 and len(held_out) >= 2:
        lift = mi - mh
        se = math.sqrt(
            statistics.variance(injected) / len(injected)
            + statistics.variance(held_out) / len(held_out)
        )
        z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
        low, high = lift - z * se, lift + z * se
    return Lift(
        injected=len(injected),
        held_out=len(held_out),
        mean_injected=mi,
        mean_held_out=mh,
        lift=lift,
        low=low,
        high=high,
        confidence=confidence,
        eligible=eligible,
    )


class Holdout:
    """The holdout of one engine: the draw on the hot path, the bookkeeping off it."""

    def __init__(self, engine: MetaClaw, *, background: bool = True) -> None:
        """``background``: run the bookkeeping thread (engines that capture; a read-only
        command's engine only reads the holdout's tables)."""
        self.engine = engine
        self.settings = engine.settings
        self.store = engine.store
        # skill name → eligible calls assigned so far (the store's count plus this process's)
        self._active: dict[str, int] = {}
        self._pending: deque[tuple[str, dict[str, str], datetime]] = deque()
        self._lock = threading.Lock()  # store writes, never the hot path
        # the counts above: held for a dict update only (the hot path's draw and the thread's
        # reload), so an increment made during a reload is never lost
        self._count_lock = threading.Lock()
        self._step_lock = threading.RLock()  # one round of decisions at a time
        self._wake = threading.Event()
        self._closed = threading.Event()
        self.decisions = 0
        self._checked_generation: int | None = None
        self.last_error: str | None = None
        self._thread: threading.Thread | None = None
        if self.settings.holdout.enabled and background:
            self._thread = threading.Thread(target=self._run, name="metaclaw-holdout", daemon=True)
            self._thread.start()

    # -- hot path ------------------------------------------------------------------------
    def assign(
        self, found: list[ScoredSkill], agent: str | None = None
    ) -> tuple[list[ScoredSkill], dict[str, str] | None]:
        """Drop the held-out skills from ``found`` (a call of ``agent``); return it and the
        arms drawn (by skill name)."""
        if not self._active or not found:
            return found, None
        h = self.settings.holdout
        arms: dict[str, str] = {}
        kept: list[ScoredSkill] = []
        for s in found:
            name = s.skill.name
            key = holdout_key(agent, name)
            with self._count_lock:
                n = self._active.get(key)
                if n is not None and n < h.calls:
                    self._active[key] = n + 1
            if n is None or n >= h.calls:
                kept.append(s)
                continue
            if draw(h.seed, key, n) < h.probability:
                arms[name] = INJECTED
                kept.append(s)
            else:
                arms[name] = HELD_OUT
        return kept, arms or None

    def record(self, trajectory_id: str, arms: dict[str, str], agent: str | None = None) -> None:
        """Remember a captured call's arms (an append; the thread writes them)."""
        if agent not in (None, DEFAULT_AGENT):
            arms = {holdout_key(agent, n): a for n, a in arms.items()}
        self._pending.append((trajectory_id, arms, utcnow()))

    # -- the store -----------------------------------------------------------------------
    def _table(self, name: str, create: bool) -> Any:
        if not create and not self.store.has_table(name):
            return None
        schema = holdouts_schema() if name == HOLDOUTS else holdout_calls_schema()
        table = self.store.table(name, schema)
        self.store.refresh(name)
        return table

    def _rows(self, name: str, where: str | None = None) -> list[dict[str, Any]]:
        table = self._table(name, create=False)
        if table is None:
            return []
        q = table.search()
        if where:
            q = q.where(where)
        return list(q.limit(None).to_arrow().to_pylist())

    def _put_state(self, row: dict[str, Any]) -> None:
        import pyarrow as pa

        table = self._table(HOLDOUTS, create=True)
        data = pa.Table.from_pylist([row], schema=table.schema)
        table.merge_insert("skill").when_matched_update_all().when_not_matched_insert_all().execute(
            data
        )

    def flush(self) -> int:
        """Write the pending assignments to ``holdout_calls``; returns how many rows."""
        import pyarrow as pa

        rows: list[dict[str, Any]] = []
        taken: list[tuple[str, dict[str, str], datetime]] = []
        while self._pending:
            taken.append(self._pending.popleft())
        for tid, arms, at in taken:
            rows += [
                {"trajectory_id": tid, "skill": n, "arm": a, "created_at": at}
                for n, a in sorted(arms.items())
            ]
        if not rows:
            return 0
        try:
            with self._lock:
                table = self._table(HOLDOUT_CALLS, create=True)
                table.add(pa.Table.from_pylist(rows, schema=table.schema))
        except Exception:
            self._pending.extendleft(reversed(taken))  # kept for the next try
            raise
        return len(rows)

    def reload(self) -> None:
        """Read which skills are under holdout, and their counts, from the store."""
        # Under the store lock: a holdout started (state written, count set) while this reads
        # is either seen here or set after the swap below, never dropped by it.
        with self._lock:
            self._reload()

    def _reload(self) -> None:
        states = self._rows(HOLDOUTS, "state = 'holdout'")
        ok = self._snapshot_ok()
        counts: dict[str, int] = {}
        names = [r["skill"] for r in states if not ok or self._is_live(r["skill"])]
        since = {r["skill"]: r["started_at"] for r in states}
        if names:
            for r in self._rows(HOLDOUT_CALLS, sql_in("skill", names)):
                if since.get(r["skill"]) is None or r["created_at"] >= since[r["skill"]]:
                    counts[r["skill"]] = counts.get(r["skill"], 0) + 1
        with self._count_lock:
            # this process may have drawn calls not yet written: never count backwards
            self._active = {n: max(counts.get(n, 0), self._active.get(n, 0)) for n in names}

    def _set_count(self, key: str, value: int | None) -> None:
        """Start (0) or end (None) the in-memory count of a holdout's eligible calls."""
        with self._count_lock:
            active = dict(self._active)
            if value is None:
                active.pop(key, None)
            else:
                active[key] = value
            self._active = active

    def _snapshot_ok(self) -> bool:
        return bool(self.engine.library_loaded)

    def _is_live(self, key: str) -> bool:
        """Whether the holdout's skill is served to its agent now (from memory)."""
        agent, name = split_key(key)
        return name in set(self.engine.snapshot_for(agent).names)

    # -- starting and deciding -----------------------------------------------------------
    @hookimpl
    def metaclaw_generation_advanced(self, generation: Generation, skills: list[Skill]) -> None:
        """A learned skill that just went live starts its holdout (learner only)."""
        h = self.settings.holdout
        if not h.enabled or self.settings.role == "serving" or not generation.added:
            return
        by_name = {s.name: s for s in skills}
        for name in generation.added:
            s = by_name.get(name)
            if s is None or s.source not in h.sources:
                continue
            key = holdout_key(generation.agent, name)
            with self._lock:
                self._put_state(
                    {
                        "skill": key,
                        "state": "holdout",
                        "started_at": utcnow(),
                        "started_generation": generation.number,
                        "decided_at": None,
                        "decided_generation": None,
                        "reason": f"holdout of its first {h.calls} eligible calls (p = "
                        f"{h.probability})",
                        "numbers_json": None,
                    }
                )
                self._set_count(key, 0)

    def arms(
        self, skill: str, since: datetime | None = None
    ) -> tuple[list[float], list[float], int]:
        """The rewards of the skill's injected and held-out calls, and its eligible calls
        (those of the holdout that started at ``since``, when given)."""
        calls = self._rows(HOLDOUT_CALLS, f"skill = {sql_str(skill)}")
        if since is not None:
            calls = [c for c in calls if c["created_at"] >= since]
        if not calls:
            return [], [], 0
        rewards = self.engine.trajectories.rewards_for([c["trajectory_id"] for c in calls])
        inj: list[float] = []
        held: list[float] = []
        for c in calls:
            got = rewards.get(c["trajectory_id"])
            if not got:
                continue
            value = sum(r.value for r in got) / len(got)
            (inj if c["arm"] == INJECTED else held).append(value)
        return inj, held, len(calls)

    def lift(self, skill: str, since: datetime | None = None) -> Lift:
        inj, held, eligible = self.arms(skill, since)
        return lift_of(inj, held, self.settings.holdout.confidence, eligible)

    def evaluate(self) -> list[tuple[str, str, Lift]]:
        """Decide every skill under holdout whose numbers allow it: (name, decision, lift)."""
        if self.settings.role == "serving":
            return []
        h = self.settings.holdout
        out: list[tuple[str, str, Lift]] = []
        for row in self._rows(HOLDOUTS, "state = 'holdout'"):
            name = row["skill"]
            lift = self.lift(name, row["started_at"])
            enough = lift.injected >= h.min_per_arm and lift.held_out >= h.min_per_arm
            done = lift.eligible >= h.calls and lift.injected + lift.held_out >= h.calls
            decision = None
            if enough and lift.low is not None and lift.low > 0:
                decision = "promoted"
            elif (enough and lift.high is not None and lift.high < 0) or done:
                decision = "retired"
            if decision is None:
                continue
            self._decide(row, decision, lift)
            out.append((name, decision, lift))
        return out

    def _recheck_stale(self) -> None:
        """Hold out again a promoted skill whose evidence went stale: its lift was measured
        long ago (the library, the traffic and the model have changed since), or every
        failure it was distilled from has since been fixed by other skills' replays."""
        after = self.settings.holdout.recheck_after_generations
        promoted = [
            r for r in self._rows(HOLDOUTS, "state = 'promoted'") if self._is_live(r["skill"])
        ]
        if not promoted:
            return
        provenance: dict[str, dict[str, list[str]]] = {}  # agent → skill → its failures
        for row in promoted:
            decided = row["decided_generation"]
            agent, name = split_key(row["skill"])
            lib = self.engine.library_of(agent)
            current = lib.current_generation()
            if agent not in provenance:
                provenance[agent] = {s.name: s.provenance for s in lib.live()}
            why = None
            if after and decided is not None and current - decided >= after:
                why = (
                    f"re-check: its lift was measured at generation {decided}, "
                    f"{current - decided} generations ago"
                )
            else:
                # the replays name skills, not agents: the bare name (failures are the agent's)
                fixers = self._fixed_by_others(
                    name, provenance[agent].get(name, []), row["decided_at"]
                )
                if fixers:
                    why = (
                        "re-check: every failure it was distilled from was since fixed by "
                        f"another skill's replays ({', '.join(fixers)})"
                    )
            if why is None:
                continue
            with self._lock:
                self._put_state(
                    {
                        **row,
                        "state": "holdout",
                        "started_at": utcnow(),
                        "started_generation": current,
                        "decided_at": None,
                        "decided_generation": None,
                        "reason": why,
                        "numbers_json": None,
                    }
                )
                self._set_count(row["skill"], 0)

    def _fixed_by_others(self, skill: str, failures: list[str], since: Any) -> list[str]:
        """The other skills whose replays, after ``since``, fixed every one of ``failures``
        (empty when any failure is still fixed only by ``skill``, or there are none)."""
        if not failures or since is None or not self.store.has_table(REPLAYS):
            return []
        self.store.refresh(REPLAYS)
        rows = (
            self.store.table(REPLAYS)
            .search()
            .where(
                f"kind = 'failure' AND outcome = 'fixed' AND skill != {sql_str(skill)} AND "
                + sql_in("trajectory_id", failures)
            )
            .select(["skill", "trajectory_id", "created_at"])
            .limit(None)
            .to_arrow()
            .to_pylist()
        )
        fixed: dict[str, set[str]] = {}
        for r in rows:
            if r["created_at"] is not None and r["created_at"] > since:
                fixed.setdefault(r["trajectory_id"], set()).add(r["skill"])
        if set(failures) - set(fixed):
            return []
        return sorted(set().union(*fixed.values()))

    def _decide(self, row: dict[str, Any], decision: str, lift: Lift) -> None:
        key = row["skill"]
        agent, name = split_key(key)
        lib = self.engine.library_of(agent)
        live = {s.name: s for s in lib.live()}
        gen: Generation | None = None
        if decision == "promoted":
            reason = f"holdout: promote {name}: {lift.describe()}"
            if name in live:
                gen = lib.apply(updated=[live[name]], reason=reason, vet=False)
        else:
            why = "it hurts" if lift.high is not None and lift.high < 0 else "no gain"
            reason = f"holdout: retire {name} ({why} after {lift.eligible} calls): " + (
                lift.describe()
            )
            if name in live:
                gen = lib.retire([name], reason=reason)
        with self._lock:
            self._put_state(
                {
                    **row,
                    "state": decision if name in live else "ended",
                    "decided_at": utcnow(),
                    "decided_generation": gen.number if gen else None,
                    "reason": reason,
                    "numbers_json": json.dumps(lift.to_json()),
                }
            )
            self._set_count(key, None)
        self.decisions += 1
        log.info("metaclaw: %s", reason)

    def states(self, skill: str | None = None, agent: str | None = None) -> list[dict[str, Any]]:
        """Rows of ``holdouts`` of ``agent``'s skills (one skill's, or all; default: the
        default agent's), with their numbers decoded; ``skill`` is the bare name and ``key``
        the row's key."""
        agent = agent or DEFAULT_AGENT
        where = None if skill is None else f"skill = {sql_str(holdout_key(agent, skill))}"
        out = []
        for r in self._rows(HOLDOUTS, where):
            owner, name = split_key(r["skill"])
            if owner != agent:
                continue
            r["key"], r["skill"], r["agent"] = r["skill"], name, owner
            r["numbers"] = json.loads(r.pop("numbers_json") or "null")
            out.append(r)
        return sorted(out, key=lambda r: str(r["started_at"]))

    # -- the thread ----------------------------------------------------------------------
    def step(self) -> None:
        """One round of bookkeeping: write assignments, re-read states, decide."""
        with self._step_lock:
            self.flush()
            generation = self.engine.store_generation  # any agent's change
            if generation != self._checked_generation and self.settings.role != "serving":
                self._recheck_stale()  # only when the library moved: a read of `holdouts`
                self._checked_generation = generation
            self.reload()
            if self._active:
                self.evaluate()

    def _run(self) -> None:
        interval = self.settings.holdout.flush_interval_s
        while not self._closed.is_set():
            try:
                if self.engine.library_loaded:
                    self.step()
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                self.engine.faults.record("holdout", exc)
            self._wake.wait(interval)
            self._wake.clear()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.flush()
        except Exception as exc:
            self.engine.faults.record("holdout", exc)

    def status(self) -> dict[str, Any]:
        return {
            "active": dict(self._active),
            "pending": len(self._pending),
            "decisions": self.decisions,
            "last_error": self.last_error,
        }
