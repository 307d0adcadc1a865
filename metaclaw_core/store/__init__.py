"""Durable state on LanceDB: tables, the trajectory store, the capture journal and writer."""

from metaclaw_core.store.db import Store
from metaclaw_core.store.trajectories import TrajectoryStore

__all__ = ["Store", "TrajectoryStore"]
