"""Journal records: how a captured trajectory or a reward is written as one line of bytes.

A trajectory is serialised once, on the hot path, in parts: the writer thread stores those
same strings in LanceDB columns, so it never re-serialises (its Python work holds the GIL,
and every microsecond it holds it is one a host thread may wait for).
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
    """A trajectory with its serialised parts and its journal line."""

    trajectory: Trajectory
    vector: Vector | None
    messages_json: str
    output_json: str
    metadata_json: str
    line: bytes


def encode_trajectory(trajectory: Trajectory, vector: Vector | None) -> EncodedTrajectory:
    """One JSON line; the vector travels as base64 float32 (no float formatting cost)."""
    msgs = _MESSAGES.dump_json(trajectory.messages).decode()
    out = trajectory.output.model_dump_json()
    meta = json.dumps(trajectory.metadata, default=str, separators=(",", ":"))
    head = trajectory.model_dump_json(exclude=_SCALARS)
    vec = "null"
    if vector is not None:
        raw = np.ascontiguousarray(vector, np.float32).tobytes()
        vec = '"' + base64.b64encode(raw).decode() + '"'
    line = f'{{"k":"t","v":{vec},"d":{head},"m":{msgs},"o":{out},"x":{meta}}}'.encode()
    return EncodedTrajectory(trajectory, vector, msgs, out, meta, line)


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
        t = Trajectory.model_validate(data)
        return kind, EncodedTrajectory(
            t,
            vec,
            _MESSAGES.dump_json(t.messages).decode(),
            t.output.model_dump_json(),
            json.dumps(t.metadata, default=str, separators=(",", ":")),
            line,
        )
    if kind == KIND_REWARD:
        return kind, Reward.model_validate(obj["d"])
    raise ValueError(f"unknown journal record kind {kind!r}")
