"""Agent ids: who a skill, a trajectory, a generation or a policy belongs to.

One deployment may serve several agents (a support bot, a coding agent, the sub-agents of one
graph); each learns for itself. An agent id is a short slug; records written before agents
existed belong to :data:`DEFAULT_AGENT`. A skill may also be *shared*: every agent (or the
agents of named groups, ``[agents] groups`` in the settings) receives it on top of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from metaclaw_core.errors import ConfigError

DEFAULT_AGENT = "default"
SHARED = "shared"
"""The scope of a skill every agent (or a group) receives; owned by the agent it came from."""

AGENT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def validate_agent(agent: str | None) -> str:
    """``agent`` lower-cased if it is a valid id (1–64 characters ``[a-z0-9][a-z0-9._-]*``);
    ``None`` or ``""`` is the default agent. Anything else: :class:`ConfigError`."""
    if agent is None or agent == "":
        return DEFAULT_AGENT
    if not isinstance(agent, str):
        raise ConfigError(f"metaclaw: an agent id is a string, not {type(agent).__name__}")
    value = agent.strip().lower()
    if not AGENT_RE.match(value):
        raise ConfigError(
            f"metaclaw: {agent[:80]!r} is not an agent id (1-64 characters: lowercase letters, "
            "digits, '.', '_' and '-', starting with a letter or digit)"
        )
    return value


def agent_of(value: object) -> str:
    """The agent a stored row names (null in rows written before agents: the default)."""
    return str(value) if value else DEFAULT_AGENT


def receives(
    agent: str,
    groups: Iterable[str],
    members: Mapping[str, Iterable[str]],
) -> bool:
    """Whether ``agent`` receives a shared skill scoped to ``groups`` (empty: every agent),
    given the settings' ``members`` (group name → agent ids)."""
    wanted = list(groups)
    if not wanted:
        return True
    return any(agent in set(members.get(g, ())) for g in wanted)
