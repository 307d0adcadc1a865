"""Journal records: how a captured trajectory or a reward is written as one line of bytes.

A trajectory line is ``{"k":"t","v":<base64 float32 query vector or null>,"e":<the
embedder that made it, or absent>,"d":<scalar fields>,"m":<messages>,"o":<output>,
"x":<metadata>}``, made on the hot path in one orjson call
(:mod:`metaclaw_core.capture`). The writer thread parses each line back with orjson for the
store's columns (a few microseconds a record, keeping nothing), so a queued capture is just
its bytes.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from metaclaw_core.agents import DEFAULT_AGENT
from metaclaw_core.embeddings import Vector
from metaclaw_core.models import Reward, Trajectory
from metaclaw_core.store.layout import scalar_columns

KIND_TRAJECTORY = "t"
KIND_REWARD = "r"
_SCALARS = {"messages", "output", "metadata", "rewards"}
_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(obj: Any) -> bytes:
    """Compact JSON; values JSON has no type for are written as ``str(value)``."""
    return orjson.dumps(obj, default=str, option=_OPTIONS)


# the scalar fields copied to columns of the same name (the layout is declared once, in layout.py)
SCALAR_COLUMNS = scalar_columns()


@dataclass(slots=True)
class EncodedTrajectory:
    """A captured trajectory as its journal line (and the query vector it carries).

    It holds nothing but the line and the vector, neither of which the garbage collector
    tracks, and parses the line anew for each use instead of keeping the parsed objects: what a
    queued capture keeps alive makes the host's calls run young-generation collections (a
    tracked container per field meant one inside ``after_call`` every few dozen calls), and
    what the writer keeps alive while it works through a batch made its collections cost more
    than its parsing (docs/benchmarks.md has the numbers).
    """

    line: bytes
    vector: Vector | None
    built: Trajectory | None = None

    @property
    def id(self) -> str:
        if self.built is not None:
            return self.built.id
        return str(orjson.loads(self.line)["d"]["id"])

    @property
    def agent(self) -> str:
        """The agent that made the call."""
        if self.built is not None:
            return self.built.agent
        return str(orjson.loads(self.line)["d"].get("agent") or DEFAULT_AGENT)

    @property
    def error(self) -> str | None:
        """The error the host reported for the call, if any."""
        if self.built is not None:
            return self.built.error
        error = orjson.loads(self.line)["d"].get("error")
        return None if error is None else str(error)

    def columns(self) -> dict[str, Any]:
        """The store's row for this trajectory, vector aside (JSON columns as text)."""
        obj = _parse(orjson.loads(self.line))
        head = obj["d"]
        row = {name: head.get(name) for name in SCALAR_COLUMNS}
        row["agent"] = head.get("agent") or DEFAULT_AGENT  # lines journaled before agents
        output = obj.get("o") or {}
        row["injected_skills"] = list(head.get("injected_skills") or [])
        row["output_text"] = str(output.get("text") or "")
        row["messages_json"] = dumps(obj.get("m") or []).decode()
        row["output_json"] = dumps(output).decode()
        row["metadata_json"] = dumps(obj.get("x") or {}).decode()
        # the model that made the query vector (lines journaled before it was recorded: None)
        row["embedder"] = obj.get("e") if obj.get("v") else None
        return row

    @property
    def trajectory(self) -> Trajectory:
        if self.built is None:
            self.built = _trajectory(_parse(orjson.loads(self.line)))
        return self.built


def _parse(obj: dict[str, Any]) -> dict[str, Any]:
    head = obj["d"]
    if isinstance(head.get("created_at"), str):
        head["created_at"] = datetime.fromisoformat(head["created_at"])
    return obj


def _trajectory(obj: dict[str, Any]) -> Trajectory:
    """The Trajectory of a parsed journal line (raises ValueError if it is not one)."""
    return Trajectory.model_validate(
        {
            **obj["d"],
            "messages": obj.get("m") or [],
            "output": obj.get("o") or {},
            "metadata": obj.get("x") or {},
        }
    )


def encode_parts(
    head: dict[str, Any],
    messages: list[dict[str, Any]],
    output: dict[str, Any],
    metadata: dict[str, Any],
    vector: Vector | None,
    embedder: str | None = None,
) -> EncodedTrajectory:
    """The record of a trajectory given as plain data (one serialisation, newline included).
    ``embedder`` names the model that made ``vector`` (``Embedder.model_id``).

    Raises ``orjson.JSONEncodeError`` on a string that is not valid UTF-8 (lone surrogate).
    """
    vec = None
    if vector is not None:
        raw = np.asarray(vector, dtype=np.float32).tobytes()
        vec = binascii.b2a_base64(raw, newline=False).decode()
    obj = {"k": KIND_TRAJECTORY, "v": vec, "d": head, "m": messages, "o": output, "x": metadata}
    if vec is not None and embedder:
        obj["e"] = embedder
    line = orjson.dumps(
        obj,
        default=str,
        option=_OPTIONS | orjson.OPT_APPEND_NEWLINE,
    )
    return EncodedTrajectory(line, vector)


def encode_trajectory(
    trajectory: Trajectory, vector: Vector | None, embedder: str | None = None
) -> EncodedTrajectory:
    """The record of a trajectory object (one a ``metaclaw_prepare_trajectory`` plugin saw)."""
    record = encode_parts(
        trajectory.model_dump(exclude=_SCALARS),
        [m.model_dump() for m in trajectory.messages],
        trajectory.output.model_dump(),
        trajectory.metadata,
        vector,
        embedder,
    )
    record.built = trajectory
    return record


def encode_reward(reward: Reward) -> bytes:
    return b'{"k":"r","d":' + reward.model_dump_json().encode() + b"}"


def decode(line: bytes) -> tuple[str, Any]:
    """Return (kind, EncodedTrajectory or Reward); raises ValueError if malformed."""
    obj = orjson.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("a journal record is a JSON object")
    kind = obj.get("k")
    if kind == KIND_TRAJECTORY:
        vec = None
        if obj.get("v"):
            vec = np.frombuffer(binascii.a2b_base64(obj["v"]), dtype=np.float32)
        # Validated now, from the line already parsed: a record that cannot become a
        # trajectory is corrupt, and is skipped here rather than failing a whole commit later.
        return kind, EncodedTrajectory(line, vec, built=_trajectory(_parse(obj)))
    if kind == KIND_REWARD:
        return kind, Reward.model_validate(obj["d"])
    raise ValueError(f"unknown journal record kind {kind!r}")
