"""The LanceDB connection, the table schemas, and schema migrations.

Schemas are pyarrow schemas built by functions because the vector width comes from the
embedder at run time (a LanceModel class would fix it at import time). A table that lacks
columns of the current schema is migrated by adding them (nullable, filled with nulls);
columns are never dropped silently.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from metaclaw_core.config import Settings
from metaclaw_core.errors import StoreError

if TYPE_CHECKING:  # pyarrow is imported where the store is first used, not with the engine
    import pyarrow as pa

log = logging.getLogger("metaclaw.store")

SCHEMA_VERSION = 1
SKILLS = "skills"
GENERATIONS = "generations"
TRAJECTORIES = "trajectories"
HOLDOUTS = "holdouts"  # the randomised holdout of new skills (metaclaw_core.holdout)
HOLDOUT_CALLS = "holdout_calls"
REPLAYS = "replays"  # replay validation of candidates (metaclaw_core.evolve.validation)
REWARDS = "rewards"

PK_METADATA = b"lance-schema:unenforced-primary-key:position"
OPEN_ATTEMPTS = 5  # opening/creating a table another process is creating at the same moment
_CONFLICT_WORDS = ("concurrent", "conflict", "retryable commit")


def is_commit_conflict(exc: BaseException) -> bool:
    """A Lance commit lost to another writer's commit (the operation may be tried again)."""
    text = str(exc).lower()
    return any(word in text for word in _CONFLICT_WORDS)


# Tables whose key makes merge_insert a compare-and-set across concurrent writers.
PRIMARY_KEYS = {GENERATIONS: "number"}


def timestamp_type() -> pa.DataType:
    """The timestamp column type of every table (microseconds, UTC)."""
    import pyarrow as pa

    return pa.timestamp("us", tz="UTC")


def __getattr__(name: str) -> Any:
    # ``TS`` (the timestamp type) is made on first use so importing this module stays free of
    # pyarrow; ``from metaclaw_core.store.db import TS`` still works.
    if name == "TS":
        return timestamp_type()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def skills_schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    TS = timestamp_type()
    return pa.schema(
        [
            pa.field("row_id", pa.string(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("description", pa.string()),
            pa.field("body", pa.string()),
            pa.field("category", pa.string()),
            pa.field("source", pa.string()),
            pa.field("provenance", pa.list_(pa.string())),
            pa.field("status", pa.string()),
            pa.field("generation_added", pa.int64()),
            pa.field("generation_retired", pa.int64()),
            pa.field("created_at", TS),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            # The model that made ``vector`` (Embedder.model_id); null in rows written before
            # it was recorded. The library never serves vectors of two models together.
            pa.field("embedder", pa.string()),
            # Added with agents (null in rows written before: the default agent, own scope).
            pa.field("agent", pa.string()),
            pa.field("shared", pa.bool_()),
            pa.field("groups", pa.list_(pa.string())),
        ],
        metadata={"metaclaw_schema_version": str(SCHEMA_VERSION)},
    )


def generations_schema() -> pa.Schema:
    import pyarrow as pa

    TS = timestamp_type()
    return pa.schema(
        [
            pa.field("number", pa.int64(), nullable=False),
            pa.field("created_at", TS),
            pa.field("reason", pa.string()),
            pa.field("added", pa.list_(pa.string())),
            pa.field("retired", pa.list_(pa.string())),
            pa.field("updated", pa.list_(pa.string())),
            pa.field("versions", pa.list_(pa.string())),
            pa.field("writer", pa.string()),
            # Added with agents: whose library changed (null: the default agent), and, for a
            # change to shared skills, the groups that receive it ([]: every agent).
            pa.field("agent", pa.string()),
            pa.field("shared_with", pa.list_(pa.string())),
        ],
        metadata={"metaclaw_schema_version": str(SCHEMA_VERSION)},
    )


def trajectories_schema(dim: int) -> pa.Schema:
    """The ``trajectories`` table, laid out from the model (:mod:`metaclaw_core.store.layout`)."""
    import pyarrow as pa

    from metaclaw_core.store.layout import arrow_fields

    return pa.schema(arrow_fields(dim), metadata={"metaclaw_schema_version": str(SCHEMA_VERSION)})


def rewards_schema() -> pa.Schema:
    import pyarrow as pa

    TS = timestamp_type()
    return pa.schema(
        [
            pa.field("trajectory_id", pa.string(), nullable=False),
            pa.field("value", pa.float64()),
            pa.field("source", pa.string()),
            pa.field("detail", pa.string()),
            pa.field("created_at", TS),
            pa.field("agent", pa.string()),  # added with agents (null before: the default)
        ],
        metadata={"metaclaw_schema_version": str(SCHEMA_VERSION)},
    )


def sql_str(value: str) -> str:
    """Quote a string for a LanceDB filter expression."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})"


def agent_filter(agent: str) -> str:
    """The rows of ``agent`` (rows written before agents, with a null ``agent``, are the
    default agent's)."""
    from metaclaw_core.agents import DEFAULT_AGENT

    if agent == DEFAULT_AGENT:
        return f"(agent IS NULL OR agent = {sql_str(agent)})"
    return f"agent = {sql_str(agent)}"


class Store:
    """One LanceDB database holding metaclaw's tables; opens and migrates them lazily."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.uri = settings.store_uri
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._migrated: set[str] = set()  # tables checked against the current schema
        self._lock = threading.RLock()

    @property
    def is_local(self) -> bool:
        return "://" not in self.uri

    def connect(self) -> Any:
        with self._lock:
            if self._db is None:
                os.environ.setdefault("LANCE_LOG", "error")
                import lancedb

                try:
                    if self.is_local:
                        os.makedirs(self.uri, exist_ok=True)
                    self._db = lancedb.connect(
                        self.uri, storage_options=self.settings.store.storage_options or None
                    )
                except Exception as exc:
                    raise StoreError(
                        f"metaclaw: cannot open the store at {self.uri!r}: {exc}; check "
                        "store.uri (METACLAW_STORE__URI) and that the location is writable"
                    ) from exc
            return self._db

    def _open(self, name: str) -> Any:
        """The table, or None if it does not exist (table_exists is not on every connection)."""
        try:
            return self.connect().open_table(name)
        except (ValueError, FileNotFoundError) as exc:
            if "not found" in str(exc) or isinstance(exc, FileNotFoundError):
                return None
            raise

    def has_table(self, name: str) -> bool:
        with self._lock:
            if name in self._tables:
                return True
            try:
                tbl = self._open(name)
            except Exception as exc:
                raise StoreError(f"metaclaw: cannot read the store at {self.uri!r}: {exc}") from exc
            if tbl is not None:
                self._tables[name] = tbl
            return tbl is not None

    def table(self, name: str, schema: pa.Schema | None = None) -> Any:
        """Open ``name``; create it with ``schema`` if missing (None: return None if missing)."""
        with self._lock:
            tbl = self._tables.get(name)
            if tbl is not None:
                if schema is not None and name not in self._migrated:
                    # opened before without a schema (has_table): migrate it once now
                    self._migrate(tbl, schema)
                    self._migrated.add(name)
                return tbl
            db = self.connect()
            for attempt in range(OPEN_ATTEMPTS):
                try:
                    tbl = self._open(name)
                    if tbl is not None:
                        if schema is not None:
                            self._migrate(tbl, schema)
                    elif schema is None:
                        return None
                    else:
                        tbl = db.create_table(name, schema=schema, exist_ok=True)
                    if name in PRIMARY_KEYS:
                        self._ensure_primary_key(tbl, PRIMARY_KEYS[name])
                    break
                except StoreError:
                    raise
                except Exception as exc:
                    # Another process created or changed the table between our look and our
                    # commit (two hosts starting at once on one object store): look again.
                    if is_commit_conflict(exc) and attempt + 1 < OPEN_ATTEMPTS:
                        log.info("metaclaw: table %s changed while opening; retrying", name)
                        time.sleep(0.05 * (attempt + 1))
                        continue
                    raise StoreError(
                        f"metaclaw: cannot open table {name!r} in {self.uri!r}: {exc}"
                    ) from exc
            self._tables[name] = tbl
            if schema is not None:
                self._migrated.add(name)
            return tbl

    def vector_dim(self, name: str) -> int | None:
        tbl = self.table(name)
        if tbl is None:
            return None
        field = tbl.schema.field("vector")
        return int(field.type.list_size)

    @staticmethod
    def _ensure_primary_key(tbl: Any, column: str) -> None:
        meta = tbl.schema.field(column).metadata or {}
        if PK_METADATA not in meta:
            try:
                tbl.set_unenforced_primary_key(column)
            except ValueError as exc:
                if "already set" not in str(exc):
                    raise

    def migrate(self, name: str, schema: pa.Schema) -> bool:
        """Add the columns of ``schema`` that table ``name`` lacks (nullable, filled with
        nulls); True if it changed. The table must exist."""
        with self._lock:
            tbl = self.table(name)
            if tbl is None:
                raise StoreError(f"metaclaw: the store at {self.uri!r} has no table {name!r}")
            if all(f.name in tbl.schema.names for f in schema):
                return False
            self._migrate(tbl, schema)
            return True

    @staticmethod
    def _migrate(tbl: Any, schema: pa.Schema) -> None:
        import pyarrow as pa

        have = set(tbl.schema.names)
        missing = [f for f in schema if f.name not in have]
        if missing:
            log.info("metaclaw: migrating table %s: adding %s", tbl.name, [f.name for f in missing])
            tbl.add_columns(pa.schema([f.with_nullable(True) for f in missing]))

    def refresh(self, name: str) -> None:
        """See commits made by other processes since the table was opened."""
        tbl = self._tables.get(name)
        if tbl is not None:
            tbl.checkout_latest()
