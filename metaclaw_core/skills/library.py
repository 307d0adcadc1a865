"""The skill library on LanceDB: live skills, persisted generations, rollback, SKILL.md I/O.

Each row of the ``skills`` table is one version of a skill, live from ``generation_added``
until ``generation_retired``. The live set of generation g is every active row with
``added <= g < retired``. A change writes its rows first and the generation row last, so a
crash in between leaves rows of an unpublished generation that are never live and are
removed before the next change: readers never see a half-applied change.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from metaclaw_core.embeddings import Embedder
from metaclaw_core.errors import SkillFormatError, SkillNotFoundError, StoreError
from metaclaw_core.models import Generation, Skill
from metaclaw_core.skills.index import SkillSnapshot
from metaclaw_core.skills.skillmd import read_skill_dir, write_skill_dir
from metaclaw_core.store.db import (
    GENERATIONS,
    SKILLS,
    Store,
    generations_schema,
    skills_schema,
    sql_in,
)

log = logging.getLogger("metaclaw.skills")

Vetter = Callable[[Skill, list[Skill]], list[str]]
GenerationListener = Callable[[Generation, list[Skill]], None]


class SkillRejectedError(SkillFormatError):
    """A vetting check refused a skill; nothing was written."""


class SkillLibrary:
    """CRUD over skills where every change to the live set is a new, persisted generation."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        vetter: Vetter | None = None,
        listeners: Iterable[GenerationListener] = (),
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.vetter = vetter
        self.listeners = list(listeners)
        self._lock = threading.RLock()
        self._writer = f"{socket.gethostname()}:{id(self):x}"

    # -- tables --------------------------------------------------------------------------
    def _skills_table(self, create: bool = False) -> Any:
        if create:
            dim = self.store.vector_dim(SKILLS) if self.store.has_table(SKILLS) else None
            return self.store.table(SKILLS, skills_schema(dim or self.embedder.dimension()))
        return self.store.table(SKILLS) if self.store.has_table(SKILLS) else None

    def _generations_table(self) -> Any:
        return self.store.table(GENERATIONS, generations_schema())

    def refresh(self) -> None:
        """See changes made by other processes."""
        for name in (SKILLS, GENERATIONS):
            if self.store.has_table(name):
                self.store.table(name)
                self.store.refresh(name)

    # -- reading -------------------------------------------------------------------------
    def current_generation(self) -> int:
        """The newest published generation (0 for an empty, new library)."""
        tbl = self._generations_table()
        if tbl.count_rows() == 0:
            return 0
        rows = tbl.search().select(["number"]).limit(None).to_arrow()
        return int(max(rows["number"].to_pylist()))

    def history(self) -> list[Generation]:
        tbl = self._generations_table()
        rows = tbl.search().limit(None).to_arrow().to_pylist()
        gens = [
            Generation(
                number=r["number"],
                created_at=r["created_at"],
                reason=r["reason"] or "",
                added=r["added"] or [],
                retired=r["retired"] or [],
                updated=r["updated"] or [],
            )
            for r in rows
        ]
        return sorted(gens, key=lambda g: g.number)

    def _rows(self, where: str | None = None) -> list[dict[str, Any]]:
        tbl = self._skills_table()
        if tbl is None:
            return []
        q = tbl.search()
        if where:
            q = q.where(where)
        return list(q.limit(None).to_arrow().to_pylist())

    @staticmethod
    def _live_at(row: dict[str, Any], generation: int) -> bool:
        added, retired = row["generation_added"], row["generation_retired"]
        return (
            row["status"] == "active"
            and added is not None
            and added <= generation
            and (retired is None or retired > generation)
        )

    @staticmethod
    def _to_skill(row: dict[str, Any]) -> Skill:
        return Skill.model_construct(
            name=row["name"],
            description=row["description"],
            body=row["body"],
            category=row["category"],
            source=row["source"] or "manual",
            provenance=row["provenance"] or [],
            status=row["status"],
            generation_added=row["generation_added"],
            generation_retired=row["generation_retired"],
            created_at=row["created_at"],
        )

    def _live_rows(self, generation: int | None = None) -> list[dict[str, Any]]:
        g = self.current_generation() if generation is None else generation
        rows = [r for r in self._rows() if self._live_at(r, g)]
        return sorted(rows, key=lambda r: r["name"])

    def live(self, generation: int | None = None) -> list[Skill]:
        """The live skills of ``generation`` (default: the current one), sorted by name."""
        return [self._to_skill(r) for r in self._live_rows(generation)]

    def get(self, name: str) -> Skill:
        for s in self.live():
            if s.name == name:
                return s
        raise SkillNotFoundError(
            f"metaclaw: no live skill named {name!r}; see `metaclaw skills list`"
        )

    def all_versions(self) -> list[Skill]:
        return [
            self._to_skill(r)
            for r in sorted(self._rows(), key=lambda r: (r["name"], r["generation_added"] or 0))
        ]

    def snapshot(self) -> SkillSnapshot:
        """An immutable index of the current generation (reads the store; off the hot path)."""
        with self._lock:
            g = self.current_generation()
            rows = self._live_rows(g)
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
        self, path: Path, *, reason: str | None = None, replace: bool = False
    ) -> Generation:
        """Import ``<name>/SKILL.md`` folders: all files are parsed and vetted before any write.

        Names already live are an error unless ``replace`` (then they are updated).
        """
        skills = read_skill_dir(Path(path))
        live = {s.name for s in self.live()}
        clash = sorted(s.name for s in skills if s.name in live)
        if clash and not replace:
            raise SkillFormatError(
                f"skills already live: {', '.join(clash)}; use --replace to update them",
                path=path,
            )
        added = [s for s in skills if s.name not in live]
        updated = [s for s in skills if s.name in live]
        return self.apply(added=added, updated=updated, reason=reason or f"import {path}")

    def export_dir(self, path: Path) -> list[Path]:
        return write_skill_dir(Path(path), self.live())

    def rollback(self, generation: int, *, reason: str | None = None) -> Generation:
        """Make the live set equal to that of ``generation``, as a new generation."""
        with self._lock:
            current = self.current_generation()
            if generation < 0 or generation > current:
                raise StoreError(f"metaclaw: no generation {generation} (current is {current})")
            target = {s.name: s for s in self.live(generation)}
            now = {s.name: s for s in self.live(current)}
            retired = sorted(set(now) - set(target))
            added = [target[n] for n in sorted(set(target) - set(now))]
            updated = [
                target[n]
                for n in sorted(set(target) & set(now))
                if (target[n].body, target[n].description, target[n].category)
                != (now[n].body, now[n].description, now[n].category)
            ]
            return self.apply(
                added=added,
                updated=updated,
                retired=retired,
                reason=reason or f"rollback to generation {generation}",
                vet=False,
            )

    def apply(
        self,
        *,
        added: list[Skill] | None = None,
        updated: list[Skill] | None = None,
        retired: list[str] | None = None,
        reason: str,
        vet: bool = True,
    ) -> Generation:
        """The one place the live set changes: validate, vet, write rows, publish generation."""
        added, updated, retired = list(added or []), list(updated or []), list(retired or [])
        if not (added or updated or retired):
            raise StoreError("metaclaw: nothing to change")
        with self._lock:
            self.refresh()
            current = self.current_generation()
            live_rows = {r["name"]: r for r in self._live_rows(current)}
            names = [s.name for s in added + updated] + retired
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise SkillFormatError(f"skill named more than once in one change: {dupes}")
            for s in added:
                if s.name in live_rows:
                    raise SkillFormatError(f"skill {s.name!r} is already live; update it instead")
            for n in [s.name for s in updated] + retired:
                if n not in live_rows:
                    raise SkillNotFoundError(f"metaclaw: no live skill named {n!r}")
            # Re-validate: skills built with model_construct or mutated in place skip pydantic.
            fresh = [Skill.model_validate(s.model_dump()) for s in added + updated]
            if vet and self.vetter is not None:
                others = [
                    self._to_skill(r)
                    for n, r in live_rows.items()
                    if n not in retired and n not in {s.name for s in updated}
                ]
                problems: list[str] = []
                for s in fresh:
                    problems += [f"{s.name}: {p}" for p in self.vetter(s, others)]
                if problems:
                    raise SkillRejectedError("skill rejected by vetting: " + "; ".join(problems))

            new_gen = current + 1
            table = self._skills_table(create=True)
            # Rows of a generation that was never published (a crash mid-change) go first.
            table.delete(f"generation_added > {current}")
            table.update(
                where=f"generation_retired > {current}", values={"generation_retired": None}
            )
            now = datetime.now(UTC)
            if fresh:
                vectors = self.embedder.embed_documents([s.embedding_text for s in fresh])
                dim = self.store.vector_dim(SKILLS)
                if vectors.shape[1] != dim:
                    raise StoreError(
                        f"metaclaw: the embedder gives {vectors.shape[1]}-dim vectors but the "
                        f"skills table holds {dim}-dim ones; use the model the library was "
                        "built with or re-import the skills into a new store"
                    )
                rows = []
                for s, v in zip(fresh, vectors, strict=True):
                    rows.append(
                        {
                            "row_id": f"{s.name}@{new_gen}",
                            "name": s.name,
                            "description": s.description,
                            "body": s.body,
                            "category": s.category,
                            "source": s.source,
                            "provenance": list(s.provenance),
                            "status": "active",
                            "generation_added": new_gen,
                            "generation_retired": None,
                            "created_at": now,
                            "vector": v.tolist(),
                        }
                    )
                table.add(pa.Table.from_pylist(rows, schema=table.schema))
            ending = [live_rows[n]["row_id"] for n in retired + [s.name for s in updated]]
            if ending:
                table.update(where=sql_in("row_id", ending), values={"generation_retired": new_gen})
            gen = Generation(
                number=new_gen,
                created_at=now,
                reason=reason,
                added=sorted(s.name for s in added),
                retired=sorted(retired),
                updated=sorted(s.name for s in updated),
            )
            self._generations_table().add(
                pa.Table.from_pylist(
                    [{**gen.model_dump(), "writer": self._writer}], schema=generations_schema()
                )
            )
            log.info("metaclaw: generation %d (%s)", new_gen, reason)
        live_now = self.live(new_gen)
        for listener in self.listeners:
            try:
                listener(gen, live_now)
            except Exception:
                log.exception("metaclaw: generation listener failed")
        return gen
