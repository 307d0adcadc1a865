"""The skill library on LanceDB: live skills, persisted generations, rollback, SKILL.md I/O.

The ``generations`` table is the source of truth. Each generation row names the skill
versions it makes live (``versions``: row ids in the ``skills`` table) and the skills it
retires; the live set of generation g is the fold of generations 1..g. Skill rows are
immutable versions, written before the generation that references them, so a reader never
sees half a change, and a crash mid-change leaves only unreferenced rows (never live).

A generation number is claimed with a conditional insert (LanceDB ``merge_insert`` on the
table's primary key ``number``): when two writers race — two processes, or two hosts on one
object store — exactly one wins and the other gets :class:`GenerationConflictError` with
nothing published. Generation numbers never fork.

Agents (docs/architecture.md, "Agents"): every skill row and generation row names its owner
agent (null in rows written before agents: the default agent). A library object acts for one
agent (``for_agent`` makes another agent's view over the same store): its live set is the fold
of *its* generations, and what it serves is that plus the *shared* skills of other agents that
reach it (every agent, or the groups named in the settings). Generation numbers are still
claimed from one store-wide sequence (one compare-and-set); an agent's generation is the newest
number that changed what it receives, so a change to agent A's library leaves agent B's
generation, and B's query data, as they were, and a change to a shared skill is a generation of
every agent that receives it.
"""

from __future__ import annotations

import copy
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from metaclaw_core.agents import DEFAULT_AGENT, agent_of, receives, validate_agent
from metaclaw_core.embeddings import Embedder
from metaclaw_core.errors import EmbedderError, SkillFormatError, SkillNotFoundError, StoreError
from metaclaw_core.models import Generation, Skill
from metaclaw_core.skills.index import SkillSnapshot
from metaclaw_core.skills.reviews import ReviewLog
from metaclaw_core.skills.skillmd import read_skill_files, write_skill_dir
from metaclaw_core.skills.verdict import Finding, Review
from metaclaw_core.store.db import (
    GENERATIONS,
    SKILLS,
    Store,
    agent_filter,
    generations_schema,
    skills_schema,
    sql_in,
)

log = logging.getLogger("metaclaw.skills")

Vetter = Callable[[Skill, list[Skill]], list[Finding]]
GenerationListener = Callable[[Generation, list[Skill]], None]


class SkillRejectedError(SkillFormatError):
    """A vetting check refused a skill; nothing was written."""

    def __init__(self, message: str, *, reviews: dict[str, Review] | None = None) -> None:
        super().__init__(message)
        self.reviews = reviews or {}


class SkillQuarantinedError(SkillRejectedError):
    """A vetting check held a skill for a person (nothing went live); see ``reviews``.

    Whether the skill now waits in ``metaclaw skills pending`` depends on the caller: the
    evolver and ``skills import`` put it there; ``apply`` itself writes nothing.
    """


@dataclass
class ImportReport:
    """What ``import_dir`` did with each file: live, held for a person, or refused."""

    generation: Generation | None = None
    live: list[str] = field(default_factory=list)
    quarantined: dict[str, Review] = field(default_factory=dict)
    rejected: dict[str, list[str]] = field(default_factory=dict)  # name or path → reasons
    files: dict[str, str] = field(default_factory=dict)  # name → file

    @property
    def held_back(self) -> bool:
        return bool(self.quarantined or self.rejected)

    def to_json(self) -> dict[str, Any]:
        verdicts: list[dict[str, Any]] = []
        for name in self.live:
            verdicts.append({"name": name, "file": self.files.get(name), "verdict": "live"})
        for name, review in self.quarantined.items():
            verdicts.append(
                {
                    "name": name,
                    "file": self.files.get(name),
                    "verdict": "quarantined",
                    "findings": [f.to_json() for f in review.findings],
                }
            )
        for name, reasons in self.rejected.items():
            verdicts.append(
                {
                    "name": name,
                    "file": self.files.get(name),
                    "verdict": "rejected",
                    "reasons": reasons,
                }
            )
        return {
            "generation": None
            if self.generation is None
            else self.generation.model_dump(mode="json"),
            "live": list(self.live),
            "quarantined": sorted(self.quarantined),
            "rejected": sorted(self.rejected),
            "files": verdicts,
        }


class GenerationConflictError(StoreError):
    """Another writer published the same generation number first; nothing was published."""


@dataclass(frozen=True)
class _GenerationRow:
    generation: Generation
    versions: tuple[str, ...]


def _name_of(row_id: str) -> str:
    return row_id.rsplit("@", 1)[0]


def _shared_row(row: dict[str, Any]) -> bool:
    return bool(row.get("shared"))


def _reach(touched: list[list[str]]) -> list[str] | None:
    """The ``shared_with`` of a change touching shared skills of these scopes (None: none)."""
    if not touched:
        return None
    if any(not groups for groups in touched):
        return []  # one of them reaches every agent
    return sorted({g for groups in touched for g in groups})


@dataclass(frozen=True)
class LibraryState:
    """One read of the whole library (every agent): what per-agent snapshots are built from
    without touching the store again (the engine builds an agent's snapshot from it lazily,
    on that agent's first call)."""

    number: int  # the store's newest generation number (any agent)
    gens: tuple[_GenerationRow, ...]
    live: dict[str, dict[str, str]]  # owner agent → name → row id of the live version
    rows: dict[str, dict[str, Any]]  # row id → skill row (the live ones)
    members: dict[str, list[str]]  # group → agents (settings [agents] groups)

    def generation_of(self, agent: str) -> int:
        """The newest generation that changed what ``agent`` receives (0: none yet)."""
        return _generation_of(self.gens, agent, self.members)

    def own_rows(self, agent: str) -> list[dict[str, Any]]:
        live = self.live.get(agent, {})
        return sorted((self.rows[rid] for rid in live.values()), key=lambda r: r["name"])

    def received_rows(self, agent: str) -> list[dict[str, Any]]:
        """Shared skills of other agents that reach ``agent`` (its own names shadow them)."""
        own = set(self.live.get(agent, {}))
        out: dict[str, dict[str, Any]] = {}
        for owner in sorted(self.live):
            if owner == agent:
                continue
            for name, rid in self.live[owner].items():
                row = self.rows[rid]
                if (
                    name not in own
                    and name not in out
                    and _shared_row(row)
                    and receives(agent, row.get("groups") or (), self.members)
                ):
                    out[name] = row
        return [out[n] for n in sorted(out)]

    def visible_rows(self, agent: str) -> list[dict[str, Any]]:
        return sorted(self.own_rows(agent) + self.received_rows(agent), key=lambda r: r["name"])

    def agents(self) -> list[str]:
        """Agents that own live skills or made a generation."""
        found = {agent_of(g.generation.agent) for g in self.gens} | set(self.live)
        return sorted(found)


def _generation_of(
    gens: Iterable[_GenerationRow], agent: str, members: dict[str, list[str]], upto: int = -1
) -> int:
    best = 0
    for g in gens:
        gen = g.generation
        if 0 <= upto < gen.number:
            continue
        if gen.agent == agent or (
            gen.shared_with is not None and receives(agent, gen.shared_with, members)
        ):
            best = max(best, gen.number)
    return best


class SkillLibrary:
    """CRUD over skills where every change to the live set is a new, persisted generation."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        vetter: Vetter | None = None,
        listeners: Iterable[GenerationListener] = (),
        read_only_reason: str | None = None,
        agent: str = DEFAULT_AGENT,
        groups: dict[str, list[str]] | None = None,
    ) -> None:
        self.agent = validate_agent(agent)
        self.groups = dict(groups or {})
        self.read_only_reason = read_only_reason
        self.store = store
        self.embedder = embedder
        self.vetter = vetter
        self.reviews = ReviewLog(store)
        self.listeners = list(listeners)
        self._lock = threading.RLock()
        self.writer_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    def for_agent(self, agent: str | None) -> SkillLibrary:
        """The same library acting for ``agent`` (same store, lock, vetter and listeners)."""
        agent = validate_agent(agent) if agent else self.agent
        if agent == self.agent:
            return self
        view = copy.copy(self)
        view.agent = agent
        return view

    # -- tables --------------------------------------------------------------------------
    def _skills_table(self, create: bool = False) -> Any:
        if not self.store.has_table(SKILLS):
            if not create:
                return None
            return self.store.table(SKILLS, skills_schema(self.embedder.dimension()))
        dim = self.store.vector_dim(SKILLS)  # an existing table: migrated to the schema once
        return self.store.table(SKILLS, skills_schema(dim or self.embedder.dimension()))

    def _generations_table(self) -> Any:
        tbl = self.store.table(GENERATIONS, generations_schema())
        return tbl

    def refresh(self) -> None:
        """See changes made by other processes."""
        for name in (SKILLS, GENERATIONS):
            if self.store.has_table(name):
                self.store.table(name)
                self.store.refresh(name)

    # -- reading -------------------------------------------------------------------------
    def _generation_rows(self) -> list[_GenerationRow]:
        rows = self._generations_table().search().limit(None).to_arrow().to_pylist()
        out = [
            _GenerationRow(
                Generation(
                    number=r["number"],
                    created_at=r["created_at"],
                    reason=r["reason"] or "",
                    added=r["added"] or [],
                    retired=r["retired"] or [],
                    updated=r["updated"] or [],
                    agent=agent_of(r.get("agent")),
                    shared_with=r.get("shared_with"),
                ),
                tuple(r.get("versions") or ()),
            )
            for r in rows
        ]
        return sorted(out, key=lambda g: g.generation.number)

    def store_generation(self) -> int:
        """The store's newest generation number, whichever agent made it (0: none yet)."""
        tbl = self._generations_table()
        if tbl.count_rows() == 0:
            return 0
        rows = tbl.search().select(["number"]).limit(None).to_arrow()
        return int(max(rows["number"].to_pylist()))

    def current_generation(self) -> int:
        """This agent's generation: the newest one that changed what it receives (its own
        skills or shared ones reaching it; 0 for an empty, new library)."""
        tbl = self._generations_table()
        if tbl.count_rows() == 0:
            return 0
        rows = (
            tbl.search()
            .select(["number", "agent", "shared_with"])
            .limit(None)
            .to_arrow()
            .to_pylist()
        )
        best = 0
        for r in rows:
            reach = r.get("shared_with")
            if agent_of(r.get("agent")) == self.agent or (
                reach is not None and receives(self.agent, reach, self.groups)
            ):
                best = max(best, int(r["number"]))
        return best

    def history(self) -> list[Generation]:
        """The generations of this agent's own library (oldest first)."""
        return [g.generation for g in self._generation_rows() if g.generation.agent == self.agent]

    @staticmethod
    def _fold_all(gens: Iterable[_GenerationRow], upto: int = -1) -> dict[str, dict[str, str]]:
        """owner → name → row id of the live version, after generations 1..upto (-1: all)."""
        live: dict[str, dict[str, str]] = {}
        for g in gens:
            if 0 <= upto < g.generation.number:
                break
            own = live.setdefault(g.generation.agent, {})
            for name in g.generation.retired:
                own.pop(name, None)
            for row_id in g.versions:
                own[_name_of(row_id)] = row_id
        return live

    def _fold(self, gens: list[_GenerationRow], upto: int) -> dict[str, str]:
        """name → row id of this agent's live version, after generations 1..upto."""
        return self._fold_all(gens, upto).get(self.agent, {})

    def state(self) -> LibraryState:
        """Every agent's live skills as of the newest generation (reads the store)."""
        with self._lock:
            gens = self._generation_rows()
            live = self._fold_all(gens)
            wanted = {rid for own in live.values() for rid in own.values()}
            rows = {k: v for k, v in self._rows_by_id().items() if k in wanted} if wanted else {}
        missing = sorted(wanted - set(rows))
        if missing:
            raise StoreError(
                "metaclaw: the live generations reference skill versions missing from the "
                f"store: {missing[:5]}; the store is damaged (restore it or roll back)"
            )
        number = gens[-1].generation.number if gens else 0
        return LibraryState(number, tuple(gens), live, rows, self.groups)

    def _rows_by_id(self) -> dict[str, dict[str, Any]]:
        tbl = self._skills_table()
        if tbl is None:
            return {}
        return {r["row_id"]: r for r in tbl.search().limit(None).to_arrow().to_pylist()}

    @staticmethod
    def _to_skill(row: dict[str, Any], retired: int | None = None) -> Skill:
        return Skill.model_construct(
            agent=agent_of(row.get("agent")),
            shared=bool(row.get("shared")),
            groups=list(row.get("groups") or []),
            name=row["name"],
            description=row["description"],
            body=row["body"],
            category=row["category"],
            source=row["source"] or "manual",
            provenance=row["provenance"] or [],
            status=row["status"],
            generation_added=row["generation_added"],
            generation_retired=retired,
            created_at=row["created_at"],
        )

    def _live_rows(self, generation: int | None = None) -> tuple[int, list[dict[str, Any]]]:
        gens = self._generation_rows()
        current = gens[-1].generation.number if gens else 0
        g = current if generation is None else generation
        live = self._fold(gens, g)
        rows = self._rows_by_id() if live else {}
        missing = [rid for rid in live.values() if rid not in rows]
        if missing:
            raise StoreError(
                f"metaclaw: generation {g} references skill versions missing from the store: "
                f"{missing[:5]}; the store is damaged (restore it or roll back)"
            )
        return g, sorted((rows[rid] for rid in live.values()), key=lambda r: r["name"])

    def live(self, generation: int | None = None) -> list[Skill]:
        """This agent's own live skills at ``generation`` (default: now), sorted by name."""
        return [self._to_skill(r) for r in self._live_rows(generation)[1]]

    def received(self) -> list[Skill]:
        """Shared skills of other agents that this agent receives now (sorted by name)."""
        with self._lock:
            state = self.state()
        return [self._to_skill(r) for r in state.received_rows(self.agent)]

    def visible(self) -> list[Skill]:
        """What this agent is served: its own live skills and the shared ones it receives."""
        with self._lock:
            state = self.state()
        return [self._to_skill(r) for r in state.visible_rows(self.agent)]

    def get(self, name: str) -> Skill:
        for s in self.live():
            if s.name == name:
                return s
        raise SkillNotFoundError(
            f"metaclaw: no live skill named {name!r}; see `metaclaw skills list`"
        )

    def all_versions(self) -> list[Skill]:
        """Every version ever made live, with the generation that retired or replaced it."""
        gens = self._generation_rows()
        rows = self._rows_by_id()
        ended: dict[str, int] = {}
        live: dict[str, str] = {}
        for g in gens:
            n = g.generation.number
            for name in g.generation.retired:
                if name in live:
                    ended[live.pop(name)] = n
            for row_id in g.versions:
                name = _name_of(row_id)
                if name in live and live[name] != row_id:
                    ended[live[name]] = n
                live[name] = row_id
        seen = {rid for g in gens for rid in g.versions}
        out = [self._to_skill(rows[rid], ended.get(rid)) for rid in seen if rid in rows]
        return sorted(out, key=lambda s: (s.name, s.generation_added or 0))

    @property
    def embedder_id(self) -> str:
        """What the ``embedder`` column records for vectors this library writes."""
        return str(getattr(self.embedder, "model_id", None) or type(self.embedder).__name__)

    def _check_embedder(self, rows: list[dict[str, Any]]) -> None:
        """Refuse to serve or extend a library whose vectors another model made: their
        similarities to this embedder's queries would be meaningless."""
        ours = self.embedder_id
        theirs = sorted({str(r["embedder"]) for r in rows if r.get("embedder")} - {ours})
        if theirs:
            raise EmbedderError(
                f"metaclaw: the live skills' vectors were made by {', '.join(theirs)} but this "
                f"engine embeds with {ours}; set METACLAW_EMBEDDING__MODEL to the library's "
                "model, or re-embed the store with this one (`metaclaw skills reembed`)"
            )

    def snapshot(self) -> SkillSnapshot:
        """An immutable index of what this agent is served now (reads the store; off the
        hot path)."""
        return self.snapshot_of(self.state(), self.agent)

    def snapshot_of(self, state: LibraryState, agent: str) -> SkillSnapshot:
        """``agent``'s index (own + shared skills reaching it) from ``state``: no I/O."""
        g = state.generation_of(agent)
        rows = state.visible_rows(agent)
        self._check_embedder(rows)
        vectors: list[npt.NDArray[np.float32] | None] = [
            np.asarray(r["vector"], dtype=np.float32) if r["vector"] is not None else None
            for r in rows
        ]
        return SkillSnapshot.build(g, [self._to_skill(r) for r in rows], vectors)

    # -- changing ------------------------------------------------------------------------
    def add(self, skills: Skill | list[Skill], *, reason: str = "add") -> Generation:
        """Add new skills (names must not be live); one new generation."""
        skills = [skills] if isinstance(skills, Skill) else list(skills)
        return self.apply(added=skills, reason=reason)

    def update(self, skill: Skill, *, reason: str = "update") -> Generation:
        """Replace the live skill of the same name with this version."""
        return self.apply(updated=[skill], reason=reason)

    def retire(self, names: str | list[str], *, reason: str = "retire") -> Generation:
        names = [names] if isinstance(names, str) else list(names)
        return self.apply(retired=names, reason=reason)

    def import_dir(
        self,
        path: Path,
        *,
        reason: str | None = None,
        replace: bool = False,
        strict: bool = False,
        allow_flagged: bool = False,
    ) -> ImportReport:
        """Import ``<name>/SKILL.md`` folders, each file judged on its own.

        What passes every check goes live (one generation); what a check holds for a person
        waits in ``pending`` with its findings (or goes live too with ``allow_flagged``: the
        person running the import has decided); what a check rejects, or a file that does not
        parse, is reported and not written. ``strict``: all or nothing, as before: any file
        that would not go live raises and nothing is written. Names already live are refused
        unless ``replace`` (then they are updated).
        """
        report = ImportReport()
        parsed = read_skill_files(Path(path))
        skills: list[Skill] = []
        for file, result in parsed:
            if isinstance(result, Skill):
                skills.append(result)
                report.files[result.name] = str(file)
            else:
                report.rejected[str(file)] = [str(result)]
        live = {s.name for s in self.live()}
        clash = sorted(s.name for s in skills if s.name in live)
        if clash and not replace:
            if strict:
                raise SkillFormatError(
                    f"skills already live: {', '.join(clash)}; use --replace to update them",
                    path=path,
                )
            for name in clash:
                report.rejected[name] = ["already live; use --replace to update it"]
            skills = [s for s in skills if s.name not in clash]
        waiting = {r["name"] for r in self._pending_rows()}
        for s in [s for s in skills if s.name in waiting]:
            report.rejected[s.name] = ["a version is already pending review; approve or reject it"]
        skills = [s for s in skills if s.name not in waiting]
        reviews = self.vet(skills, replacing=[s.name for s in skills if s.name in live])
        admitted: list[Skill] = []
        held: list[Skill] = []
        for s in skills:
            review = reviews[s.name]
            if review.verdict == "reject":
                report.rejected[s.name] = review.reasons()
            elif review.verdict == "quarantine" and not allow_flagged:
                report.quarantined[s.name] = review
                held.append(s)
            else:
                admitted.append(s)
        if strict and report.held_back:
            problems = [f"{n}: {'; '.join(r)}" for n, r in report.rejected.items()] + [
                f"{n}: held for review: {'; '.join(r.reasons())}"
                for n, r in report.quarantined.items()
            ]
            raise SkillRejectedError(
                "import refused (--strict: all or nothing): " + " | ".join(problems),
                reviews={**report.quarantined},
            )
        if admitted:
            report.generation = self.apply(
                added=[s for s in admitted if s.name not in live],
                updated=[s for s in admitted if s.name in live],
                reason=reason or f"import {path}",
                allow_flagged=allow_flagged,
            )
            report.live = [s.name for s in admitted]
        if held:
            self.propose(held, reason=f"held for review: import {path}", reviews=reviews)
        return report

    def vet(self, skills: list[Skill], *, replacing: Iterable[str] = ()) -> dict[str, Review]:
        """Every check's findings about each of ``skills`` (nothing is written)."""
        out: dict[str, Review] = {}
        if self.vetter is None:
            return {s.name: Review() for s in skills}
        changed = set(replacing)
        others = [s for s in self.live() if s.name not in changed]
        others += self._received_skills(exclude=changed | {s.name for s in skills})
        for s in skills:
            out[s.name] = Review(self.vetter(Skill.model_validate(s.model_dump()), others))
        return out

    def export_dir(self, path: Path) -> list[Path]:
        return write_skill_dir(Path(path), self.live())

    def rollback(self, generation: int, *, reason: str | None = None) -> Generation:
        """Make the live set equal to that of ``generation``, as a new generation.

        The old versions are made live again as they were (same rows, no re-embedding).
        """
        self._check_writable()
        with self._lock:
            self.refresh()
            gens = self._generation_rows()
            current = gens[-1].generation.number if gens else 0
            if generation < 0 or generation > current:
                raise StoreError(f"metaclaw: no generation {generation} (current is {current})")
            target = self._fold(gens, generation)
            now = self._fold(gens, current)
            retired = sorted(set(now) - set(target))
            added = sorted(set(target) - set(now))
            updated = sorted(n for n in set(target) & set(now) if target[n] != now[n])
            if not (retired or added or updated):
                raise StoreError(
                    f"metaclaw: generation {generation} has the same library as the current one"
                )
            versions = [target[n] for n in added + updated]
            rows = self._rows_by_id()
            touched = [
                list(rows[rid].get("groups") or [])
                for rid in [now[n] for n in retired + updated] + versions
                if rid in rows and _shared_row(rows[rid])
            ]
            return self._publish(
                current,
                Generation(
                    number=current + 1,
                    reason=reason or f"rollback to generation {generation}",
                    added=added,
                    retired=retired,
                    updated=updated,
                    agent=self.agent,
                    shared_with=_reach(touched),
                ),
                versions,
                new_rows=[],
            )

    def apply(
        self,
        *,
        added: list[Skill] | None = None,
        updated: list[Skill] | None = None,
        retired: list[str] | None = None,
        reason: str,
        vet: bool = True,
        allow_flagged: bool = False,
    ) -> Generation:
        """The one place the live set changes: validate, vet, write rows, publish generation.

        Any rejecting finding raises :class:`SkillRejectedError`; a finding that holds a skill
        for a person raises :class:`SkillQuarantinedError`, unless ``allow_flagged`` (a person
        decided: ``skills approve``, ``import --allow-flagged``). Either way nothing is written.
        """
        added, updated, retired = list(added or []), list(updated or []), list(retired or [])
        self._check_writable()
        if not (added or updated or retired):
            raise StoreError("metaclaw: nothing to change")
        with self._lock:
            self.refresh()
            current, live_rows = self._live_rows()
            self._check_embedder(live_rows)
            live = {r["name"]: r for r in live_rows}
            names = [s.name for s in added + updated] + retired
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise SkillFormatError(f"skill named more than once in one change: {dupes}")
            for s in added:
                if s.name in live:
                    raise SkillFormatError(f"skill {s.name!r} is already live; update it instead")
            for n in [s.name for s in updated] + retired:
                if n not in live:
                    raise SkillNotFoundError(f"metaclaw: no live skill named {n!r}")
            # Re-validate: skills built with model_construct or mutated in place skip pydantic.
            # A skill belongs to the agent whose library it joins; an update keeps the scope
            # of the version it replaces unless it names one (``share`` changes it).
            fresh = [self._owned(s, live.get(s.name)) for s in added + updated]
            if vet and self.vetter is not None:
                changed = {s.name for s in updated} | set(retired)
                others = [self._to_skill(r) for n, r in live.items() if n not in changed]
                others += self._received_skills(exclude=changed | {s.name for s in fresh})
                reviews = {s.name: Review(self.vetter(s, others)) for s in fresh}
                rejected = [
                    f"{n}: {r.describe()}" for n, rv in reviews.items() for r in rv.rejections
                ]
                if rejected:
                    raise SkillRejectedError(
                        "skill rejected by vetting: " + "; ".join(rejected), reviews=reviews
                    )
                held = [f"{n}: {r.describe()}" for n, rv in reviews.items() for r in rv.quarantines]
                if held and not allow_flagged:
                    raise SkillQuarantinedError(
                        "skill held for review by vetting (nothing went live; a person may "
                        "admit it with `metaclaw skills approve` or --allow-flagged): "
                        + "; ".join(held),
                        reviews=reviews,
                    )
            new_gen = current + 1
            rows = self._version_rows(fresh, new_gen)
            touched = [s.groups for s in fresh if s.shared] + [
                list(live[n].get("groups") or [])
                for n in [s.name for s in updated] + retired
                if _shared_row(live[n])
            ]
            gen = Generation(
                number=new_gen,
                reason=reason,
                added=sorted(s.name for s in added),
                retired=sorted(retired),
                updated=sorted(s.name for s in updated),
                agent=self.agent,
                shared_with=_reach(touched),
            )
            return self._publish(current, gen, [r["row_id"] for r in rows], new_rows=rows)

    def _owned(self, skill: Skill, replaces: dict[str, Any] | None) -> Skill:
        data = skill.model_dump()
        data["agent"] = self.agent
        keep_scope = "shared" not in skill.model_fields_set  # an update keeps the scope
        if replaces is not None and not skill.shared and _shared_row(replaces) and keep_scope:
            data["shared"], data["groups"] = True, list(replaces.get("groups") or [])
        if not data.get("shared"):
            data["groups"] = []
        return Skill.model_validate(data)

    def _received_skills(self, exclude: Iterable[str] = ()) -> list[Skill]:
        """The shared skills of other agents this agent receives (for vetting)."""
        skip = set(exclude)
        try:
            state = self.state()
        except StoreError:
            return []
        return [self._to_skill(r) for r in state.received_rows(self.agent) if r["name"] not in skip]

    def share(
        self,
        name: str,
        *,
        groups: list[str] | None = None,
        reason: str | None = None,
        allow_flagged: bool = False,
    ) -> Generation:
        """Promote this agent's live skill ``name`` to shared: every agent (or the agents of
        ``groups``) receives it from the next generation on. Vetted again, against the
        libraries of the agents that will receive it; refused if another agent already
        shares a skill of that name. One generation, a generation of every receiving agent."""
        self._check_writable()
        groups = sorted({validate_agent(g) for g in groups or []})
        unknown = [g for g in groups if g not in self.groups]
        if unknown:
            raise StoreError(
                f"metaclaw: no agent group named {', '.join(unknown)}; groups are set in "
                "the settings ([agents] groups)"
            )
        with self._lock:
            self.refresh()
            state = self.state()
            own = {r["name"]: r for r in state.own_rows(self.agent)}
            if name not in own:
                raise SkillNotFoundError(
                    f"metaclaw: agent {self.agent!r} has no live skill named {name!r}"
                )
            for owner, live in state.live.items():
                rid = live.get(name)
                if owner != self.agent and rid and _shared_row(state.rows[rid]):
                    raise SkillFormatError(
                        f"metaclaw: agent {owner!r} already shares a skill named {name!r}; "
                        "rename one of them first"
                    )
            skill = self._to_skill(own[name]).model_copy(update={"shared": True, "groups": groups})
            recipients = [
                a for a in state.agents() if a != self.agent and receives(a, groups, self.groups)
            ]
            seen: dict[str, Skill] = {}
            for agent in recipients:
                for r in state.visible_rows(agent):
                    if r["name"] != name:
                        key = f"{agent_of(r.get('agent'))}/{r['name']}"
                        seen.setdefault(key, self._to_skill(r))
            if self.vetter is not None:
                review = Review(
                    self.vetter(Skill.model_validate(skill.model_dump()), list(seen.values()))
                )
                if review.rejections:
                    raise SkillRejectedError(
                        "share refused by vetting: "
                        + "; ".join(r.describe() for r in review.rejections),
                        reviews={name: review},
                    )
                if review.quarantines and not allow_flagged:
                    raise SkillQuarantinedError(
                        "share held by vetting (nothing changed; a person may share it with "
                        "--allow-flagged): " + "; ".join(r.describe() for r in review.quarantines),
                        reviews={name: review},
                    )
            return self.apply(
                updated=[skill],
                reason=reason
                or f"share {name} from {self.agent}"
                + (f" with {', '.join(groups)}" if groups else " with every agent"),
                vet=False,  # vetted above, against the receiving agents' libraries
            )

    def stale_vectors(self) -> list[str]:
        """Names of the live skills whose vectors this library's embedder did not make (another
        model's, or rows written before the ``embedder`` column, which say nothing)."""
        with self._lock:
            self.refresh()
            _, rows = self._live_rows()
        return [r["name"] for r in rows if r.get("embedder") != self.embedder_id]

    def reembed(self, *, reason: str | None = None) -> Generation | None:
        """The migration to this library's embedder: every live skill whose vector another
        model made (or an old row that does not say) gets a new version embedded by this
        one, published as one generation (the skills' text is unchanged, so they are not
        vetted again). None when there is nothing to re-embed."""
        self._check_writable()
        with self._lock:
            self.refresh()
            current, rows = self._live_rows()
            stale = [r for r in rows if r.get("embedder") != self.embedder_id]
            if not stale:
                return None
            skills = [self._to_skill(r) for r in stale]
            new_gen = current + 1
            fresh = self._version_rows(skills, new_gen)
            gen = Generation(
                number=new_gen,
                reason=reason or f"re-embedded with {self.embedder_id}",
                updated=sorted(s.name for s in skills),
                agent=self.agent,
                shared_with=_reach([s.groups for s in skills if s.shared]),
            )
            return self._publish(current, gen, [r["row_id"] for r in fresh], new_rows=fresh)

    def _check_writable(self) -> None:
        if self.read_only_reason:
            raise StoreError(f"metaclaw: {self.read_only_reason}")

    def _version_rows(self, skills: list[Skill], generation: int) -> list[dict[str, Any]]:
        if not skills:
            return []
        vectors = self.embedder.embed_documents([s.embedding_text for s in skills])
        self._skills_table(create=True)
        dim = self.store.vector_dim(SKILLS)
        if vectors.shape[1] != dim:
            raise StoreError(
                f"metaclaw: the embedder gives {vectors.shape[1]}-dim vectors but the skills "
                f"table holds {dim}-dim ones; use the model the library was built with or "
                "re-import the skills into a new store"
            )
        now = datetime.now(UTC)
        return [
            {
                "row_id": f"{s.name}@{uuid.uuid4().hex}",
                "name": s.name,
                "description": s.description,
                "body": s.body,
                "category": s.category,
                "source": s.source,
                "provenance": list(s.provenance),
                "status": "active",
                "generation_added": generation,
                "generation_retired": None,
                "created_at": now,
                "vector": v.tolist(),
                "embedder": self.embedder_id,
                "agent": self.agent,
                "shared": bool(s.shared),
                "groups": list(s.groups) if s.shared else [],
            }
            for s, v in zip(skills, vectors, strict=True)
        ]

    def _publish(
        self,
        current: int,
        gen: Generation,
        versions: list[str],
        *,
        new_rows: list[dict[str, Any]],
    ) -> Generation:
        """Write the new versions, then claim the generation number (exactly one writer wins)."""
        import pyarrow as pa

        table = self._skills_table(create=bool(new_rows))
        if new_rows:
            table.add(pa.Table.from_pylist(new_rows, schema=table.schema))
        gen = gen.model_copy(update={"created_at": datetime.now(UTC)})
        row = {**gen.model_dump(), "versions": versions, "writer": self.writer_id}
        gens = self._generations_table()
        result = (
            gens.merge_insert("number")
            .when_not_matched_insert_all()
            .execute(pa.Table.from_pylist([row], schema=gens.schema))
        )
        if getattr(result, "num_inserted_rows", 1) != 1:
            if new_rows:  # unreferenced versions would be harmless; still, leave no litter
                table.delete(sql_in("row_id", [r["row_id"] for r in new_rows]))
            raise GenerationConflictError(
                f"metaclaw: another writer published generation {gen.number} first (this change "
                "was not applied); run only one learner per store, or retry the change"
            )
        log.info("metaclaw: generation %d (%s)", gen.number, gen.reason)
        live_now = self.live(gen.number)
        for listener in self.listeners:
            try:
                listener(gen, live_now)
            except Exception:
                log.exception("metaclaw: generation listener failed")
        return gen

    # -- review: pending candidates --------------------------------------------------------
    # A pending candidate is a skill row with status 'pending' that no generation references:
    # it is never live. Approving makes it live through apply() (vetted again, against the
    # library of that moment) as one new generation; rejecting keeps the row, marked rejected.
    def _pending_rows(self) -> list[dict[str, Any]]:
        tbl = self._skills_table()
        if tbl is None:
            return []
        where = f"status = 'pending' AND {agent_filter(self.agent)}"
        rows = tbl.search().where(where).limit(None).to_arrow().to_pylist()
        return sorted(rows, key=lambda r: (r["name"], r["created_at"]))

    def pending(self) -> list[Skill]:
        """Candidates waiting for review (``metaclaw skills pending``), sorted by name."""
        return [self._to_skill(r) for r in self._pending_rows()]

    def pending_reviews(self) -> list[tuple[Skill, Review]]:
        """Each pending candidate with the findings that held it (empty: manual review)."""
        rows = self._pending_rows()
        found = self.reviews.of([r["row_id"] for r in rows])
        return [(self._to_skill(r), found.get(r["row_id"], Review())) for r in rows]

    def propose(
        self,
        skills: list[Skill],
        *,
        reason: str = "proposed",
        reviews: dict[str, Review] | None = None,
    ) -> list[Skill]:
        """Store candidates as pending (no new generation; nothing becomes live), with the
        findings that held them (``reviews``, by name) for the person who decides."""
        self._check_writable()
        fresh = [Skill.model_validate(s.model_dump()) for s in skills]
        if not fresh:
            return []
        with self._lock:
            self.refresh()
            waiting = {r["name"] for r in self._pending_rows()}
            clash = sorted(s.name for s in fresh if s.name in waiting)
            if clash:
                raise SkillFormatError(
                    f"candidates already pending: {', '.join(clash)}; approve or reject them first"
                )
            rows = self._version_rows(fresh, 0)
            for row in rows:
                row["status"] = "pending"
                row["generation_added"] = None
            table = self._skills_table(create=True)
            import pyarrow as pa

            table.add(pa.Table.from_pylist(rows, schema=table.schema))
            held = [
                (r["row_id"], r["name"], reviews[r["name"]])
                for r in rows
                if reviews and r["name"] in reviews and reviews[r["name"]].findings
            ]
            self.reviews.record(held)
        log.info("metaclaw: %d candidate(s) pending review (%s)", len(rows), reason)
        return [self._to_skill(r) for r in rows]

    def approve(self, names: list[str] | None = None, *, reason: str | None = None) -> Generation:
        """Make pending candidates live (all when ``names`` is None): one new generation.

        A candidate whose name is live by now replaces that skill (an update).
        """
        self._check_writable()
        with self._lock:
            self.refresh()
            rows = {r["name"]: r for r in self._pending_rows()}
            wanted = sorted(rows) if names is None else list(dict.fromkeys(names))
            missing = [n for n in wanted if n not in rows]
            if missing:
                raise SkillNotFoundError(
                    f"metaclaw: no pending candidate named {', '.join(missing)}; "
                    "see `metaclaw skills pending`"
                )
            if not wanted:
                raise StoreError("metaclaw: no candidates are pending review")
            live = {s.name for s in self.live()}
            skills = [
                self._to_skill(rows[n]).model_copy(update={"status": "active"}) for n in wanted
            ]
            gen = self.apply(
                added=[s for s in skills if s.name not in live],
                updated=[s for s in skills if s.name in live],
                reason=reason or f"approve {', '.join(wanted)}",
                allow_flagged=True,  # a person decided; rejecting findings still refuse
            )
            self._skills_table().delete(sql_in("row_id", [rows[n]["row_id"] for n in wanted]))
        return gen

    def reject(self, names: list[str], *, reason: str | None = None) -> list[str]:
        """Mark pending candidates rejected (kept for the record, never live)."""
        self._check_writable()
        with self._lock:
            self.refresh()
            rows = {r["name"]: r for r in self._pending_rows()}
            missing = [n for n in names if n not in rows]
            if missing:
                raise SkillNotFoundError(
                    f"metaclaw: no pending candidate named {', '.join(missing)}; "
                    "see `metaclaw skills pending`"
                )
            if names:
                self._skills_table().update(
                    where=sql_in("row_id", [rows[n]["row_id"] for n in names]),
                    values={"status": "rejected"},
                )
        log.info("metaclaw: rejected %s (%s)", ", ".join(names), reason or "review")
        return list(names)
