"""Journal records: how a captured trajectory or a reward is written as one line of bytes."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from metaclaw_core.embeddings import Vector
from metaclaw_core.models import Reward, Trajectory

KIND_TRAJECTORY = "t"
KIND_REWARD = "r"


def encode_trajectory(trajectory: Trajectory, vector: Vector | None) -> bytes:
    """One JSON line; the vector travels as base64 float32 (no float formatting cost)."""
    vec = "null"
    if vector is not None:
        vec = (
            '"'
            + base64.b64encode(np.ascontiguousarray(vector, np.float32).tobytes()).decode()
            + '"'
        )
    return b'{"k":"t","v":' + vec.encode() + b',"d":' + trajectory.model_dump_json().encode() + b"}"


def encode_reward(reward: Reward) -> bytes:
    return b'{"k":"r","d":' + reward.model_dump_json().encode() + b"}"


def decode(line: bytes) -> tuple[str, Any, Vector | None]:
    """Return (kind, Trajectory or Reward, vector or None); raises ValueError if malformed."""
    obj = json.loads(line)
    kind = obj.get("k")
    if kind == KIND_TRAJECTORY:
        vec = None
        if obj.get("v"):
            vec = np.frombuffer(base64.b64decode(obj["v"]), dtype=np.float32)
        return kind, Trajectory.model_validate(obj["d"]), vec
    if kind == KIND_REWARD:
        return kind, Reward.model_validate(obj["d"]), None
    raise ValueError(f"unknown journal record kind {kind!r}")
