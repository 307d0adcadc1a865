"""Journal records: how a captured trajectory or a reward is written as one line of bytes.

A trajectory is serialised once, on the hot path, in parts (:mod:`metaclaw_core.capture`):
the writer thread stores those same strings in LanceDB columns, so it never re-serialises (its
Python work holds the GIL, and every microsecond it holds it is one a host thread may wait for).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from metaclaw_core.embeddings import Vector
from metaclaw_core.models import Message, Reward, Trajectory

KIND_TRAJECTORY = "t"
KIND_REWARD = "r"
_SCALARS = {"messages", "output", "metadata", "rewards"}
_MESSAGES = TypeAdapter(list[Message])


@dataclass(slots=True)
class EncodedTrajectory:
    """A captured trajectory as its journal line and the parts the store's columns take.

    ``head`` holds the scalar fields (``created_at`` as a datetime); ``messages``, ``output``
    and ``metadata`` the plain data the JSON strings were made from. The pydantic
    :attr:`trajectory` is built on first use, off the hot path.
    """

    head: dict[str, Any]
    messages: list[dict[str, Any]]
    output: dict[str, Any]
    metadata: dict[str, Any]
    vector: Vector | None
    messages_json: str
    output_json: str
    metadata_json: str
    line: bytes
    built: Trajectory | None = None

    @property
    def id(self) -> str:
        return str(self.head["id"])

    @property
    def output_text(self) -> str:
        return str(self.output.get("text") or "")

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


def trajectory_line(vec: bytes, head: bytes, messages: bytes, output: bytes, meta: bytes) -> bytes:
    """The journal line from its JSON parts; the vector travels as base64 float32 or null."""
    parts = (b'{"k":"t","v":', vec, b',"d":', head, b',"m":', messages, b',"o":', output)
    return b"".join((*parts, b',"x":', meta, b"}\n"))


def encode_trajectory(
    trajectory: Trajectory, vector: Vector | None, line: bytes | None = None
) -> EncodedTrajectory:
    """The record of a trajectory object: one a ``metaclaw_prepare_trajectory`` plugin has
    seen, or one read back from the journal (``line`` given)."""
    msgs = _MESSAGES.dump_json(trajectory.messages).decode()
    out = trajectory.output.model_dump_json()
    meta = json.dumps(trajectory.metadata, default=str, separators=(",", ":"))
    if line is None:
        vec = b"null"
        if vector is not None:
            raw = np.ascontiguousarray(vector, np.float32).tobytes()
            vec = b'"' + base64.b64encode(raw) + b'"'
        head = trajectory.model_dump_json(exclude=_SCALARS).encode()
        line = trajectory_line(vec, head, msgs.encode(), out.encode(), meta.encode())
    return EncodedTrajectory(
        head=trajectory.model_dump(exclude=_SCALARS),
        messages=[],
        output=trajectory.output.model_dump(),
        metadata=trajectory.metadata,
        vector=vector,
        messages_json=msgs,
        output_json=out,
        metadata_json=meta,
        line=line,
        built=trajectory,
    )


def encode_reward(reward: Reward) -> bytes:
    return b'{"k":"r","d":' + reward.model_dump_json().encode() + b"}"


def decode(line: bytes) -> tuple[str, Any]:
    """Return (kind, EncodedTrajectory or Reward); raises ValueError if malformed."""
    obj = json.loads(line)
    kind = obj.get("k")
    if kind == KIND_TRAJECTORY:
        vec = None
        if obj.get("v"):
            vec = np.frombuffer(base64.b64decode(obj["v"]), dtype=np.float32)
        data = dict(obj["d"])
        data.update(
            messages=obj.get("m") or [], output=obj.get("o") or {}, metadata=obj.get("x") or {}
        )
        return kind, encode_trajectory(Trajectory.model_validate(data), vec, line)
    if kind == KIND_REWARD:
        return kind, Reward.model_validate(obj["d"])
    raise ValueError(f"unknown journal record kind {kind!r}")
