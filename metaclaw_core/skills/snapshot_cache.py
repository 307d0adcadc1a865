"""The last served skill snapshot, kept on local disk so a restart serves skills at once.

Opening LanceDB costs a cold process seconds (importing ``lancedb`` alone takes ~1-2 s on two
cores; an object store adds round trips), and until the library is read every call is served
without skills. The engine writes each snapshot it reads from the store to
``$METACLAW_HOME/cache/snapshot-<store>.npz`` (written whole to a temporary file, then renamed)
and, on start-up, serves the cached one (its generation, its skills, its vectors) until the
first read of the store replaces it, whichever generation that has. The file is a cache:
missing, damaged, of another store or of another embedding model, it is ignored.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from datetime import datetime
from pathlib import Path

import numpy as np

from metaclaw_core.skills.index import SkillSnapshot

log = logging.getLogger("metaclaw.skills")

FORMAT = 1


def cache_path(home: Path, store_uri: str, agent: str | None = None) -> Path:
    """Where the snapshot of ``store_uri`` is cached (one file per store and agent; the
    default agent's keeps the name it had before agents)."""
    key = store_uri if agent in (None, "default") else f"{store_uri}#agent={agent}"
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return home / "cache" / f"snapshot-{digest}.npz"


def save_snapshot(
    path: Path,
    snap: SkillSnapshot,
    *,
    store_uri: str,
    embedder_id: str,
    agents: list[str] | None = None,
) -> None:
    """Write ``snap`` to ``path`` atomically (a reader sees the old file or the new one).
    ``agents``: the agents the library knew when it was read (``metaclaw status`` answers
    from the cache only for a store of one agent)."""
    meta = {
        "format": FORMAT,
        "store_uri": store_uri,
        "embedder": embedder_id,
        "generation": snap.generation,
        "agents": agents,
        "records": [[*r[:6], r[6], r[7].isoformat()] for r in snap.records],
    }
    buf = io.BytesIO()
    np.savez(buf, matrix=snap.matrix, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(buf.getvalue())
    os.replace(tmp, path)


def load_snapshot(path: Path, *, store_uri: str, embedder_id: str) -> SkillSnapshot | None:
    """The cached snapshot, or None when there is none usable (never raises)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode("utf-8"))
            matrix = np.ascontiguousarray(data["matrix"], dtype=np.float32)
        if meta.get("format") != FORMAT or meta.get("store_uri") != store_uri:
            return None
        if meta.get("embedder") != embedder_id:
            log.info("metaclaw: cached snapshot is of embedder %s; ignored", meta.get("embedder"))
            return None
        records = tuple(
            (r[0], r[1], r[2], r[3], r[4], tuple(r[5]), r[6], datetime.fromisoformat(r[7]))
            for r in meta["records"]
        )
        if len(records) and matrix.shape != (len(records), matrix.shape[1]):
            return None
        if not records:
            matrix = np.zeros((0, 0), dtype=np.float32)
        return SkillSnapshot(generation=int(meta["generation"]), records=records, matrix=matrix)
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged cache is not an error: the store is read anyway
        log.info("metaclaw: ignoring the cached snapshot %s: %s", path, exc)
        return None


def cached_agents(path: Path) -> list[str] | None:
    """The agents the cached snapshot's read of the library knew (None: not recorded)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode("utf-8"))
        agents = meta.get("agents")
        return None if agents is None else [str(a) for a in agents]
    except Exception:
        return None
