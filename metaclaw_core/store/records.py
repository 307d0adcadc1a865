"""Journal records: how a captured trajectory or a reward is written as one line of bytes.

A trajectory line is ``{"k":"t","v":<base64 float32 query vector or null>,"d":<scalar
fields>,"m":<messages>,"o":<output>,"x":<metadata>}``, made on the hot path in one orjson call
(:mod:`metaclaw_core.capture`). The writer thread derives the store's JSON columns from the
same plain data, also with orjson (about a microsecond a record).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from metaclaw_core.embeddings import Vector
from metaclaw_core.models import Reward, Trajectory

KIND_TRAJECTORY = "t"
KIND_REWARD = "r"
_SCALARS = {"messages", "output", "metadata", "rewards"}
_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(obj: Any) -> bytes:
    """Compact JSON; values JSON has no type for are written as ``str(value)``."""
    return orjson.dumps(obj, default=str, option=_OPTIONS)


@dataclass(slots=True)
class EncodedTrajectory:
    """A captured trajectory as its journal line (and the query vector it carries).

    While it waits in the writer's queue it holds nothing but the line and the vector, neither
    of which the garbage collector tracks: the objects a queued capture keeps alive make the
    host's calls run young-generation collections (a tracked container per field would mean
    one collection inside ``after_call`` every few dozen calls). The writer thread parses the
    line back (orjson, a few microseconds) for the store's columns and builds the pydantic
    :attr:`trajectory` for the observers.
    """

    line: bytes
    vector: Vector | None
    built: Trajectory | None = None
    parsed: dict[str, Any] | None = None

    def _record(self) -> dict[str, Any]:
        if self.parsed is None:
            self.parsed = _parse(orjson.loads(self.line))
        return self.parsed

    @property
    def head(self) -> dict[str, Any]:
        """The scalar fields (``created_at`` as a datetime)."""
        return self._record()["d"]  # type: ignore[no-any-return]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self._record().get("m") or []

    @property
    def output(self) -> dict[str, Any]:
        return self._record().get("o") or {}

    @property
    def metadata(self) -> dict[str, Any]:
        return self._record().get("x") or {}

    @property
    def id(self) -> str:
        return str(self.head["id"])

    @property
    def output_text(self) -> str:
        return str(self.output.get("text") or "")

    @property
    def messages_json(self) -> str:
        return dumps(self.messages).decode()

    @property
    def output_json(self) -> str:
        return dumps(self.output).decode()

    @property
    def metadata_json(self) -> str:
        return dumps(self.metadata).decode()

    @property
    def trajectory(self) -> Trajectory:
        if self.built is None:
            self.built = Trajectory.model_validate(
                {
                    **self.head,
                    "messages": self.messages,
                    "output": self.output,
                    "metadata": self.metadata,
                }
            )
        return self.built


def _parse(obj: dict[str, Any]) -> dict[str, Any]:
    head = obj["d"]
    if isinstance(head.get("created_at"), str):
        head["created_at"] = datetime.fromisoformat(head["created_at"])
    return obj


def encode_parts(
    head: dict[str, Any],
    messages: list[dict[str, Any]],
    output: dict[str, Any],
    metadata: dict[str, Any],
    vector: Vector | None,
) -> EncodedTrajectory:
    """The record of a trajectory given as plain data (one serialisation, newline included).

    Raises ``orjson.JSONEncodeError`` on a string that is not valid UTF-8 (lone surrogate).
    """
    vec = None
    if vector is not None:
        raw = np.asarray(vector, dtype=np.float32).tobytes()
        vec = binascii.b2a_base64(raw, newline=False).decode()
    line = orjson.dumps(
        {"k": KIND_TRAJECTORY, "v": vec, "d": head, "m": messages, "o": output, "x": metadata},
        default=str,
        option=_OPTIONS | orjson.OPT_APPEND_NEWLINE,
    )
    return EncodedTrajectory(line, vector)


def encode_trajectory(trajectory: Trajectory, vector: Vector | None) -> EncodedTrajectory:
    """The record of a trajectory object (one a ``metaclaw_prepare_trajectory`` plugin saw)."""
    record = encode_parts(
        trajectory.model_dump(exclude=_SCALARS),
        [m.model_dump() for m in trajectory.messages],
        trajectory.output.model_dump(),
        trajectory.metadata,
        vector,
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
        record = EncodedTrajectory(line, vec, parsed=_parse(obj))
        # Validated now: a record that cannot become a trajectory is corrupt, and is skipped
        # here rather than failing a whole commit later.
        record.trajectory  # noqa: B018
        return kind, record
    if kind == KIND_REWARD:
        return kind, Reward.model_validate(obj["d"])
    raise ValueError(f"unknown journal record kind {kind!r}")
