"""The domain objects every part of metaclaw-core speaks in (pydantic models)."""

from __future__ import annotations

import itertools
import os
import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from metaclaw_core.agents import DEFAULT_AGENT, validate_agent
from metaclaw_core.scoring import mean_reward

SKILL_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
SkillStatus = Literal["active", "pending", "rejected"]
Role = Literal["system", "user", "assistant", "tool"]


def utcnow() -> datetime:
    return datetime.now(UTC)


_ID_PREFIX = os.urandom(8).hex()
_ID_COUNTER = itertools.count(int.from_bytes(os.urandom(4), "big"))


def _agent_id(v: str | None) -> str:
    try:
        return validate_agent(v)
    except Exception as exc:  # a ConfigError is not a ValueError: pydantic would not wrap it
        raise ValueError(str(exc)) from None


def new_id() -> str:
    """A 32-hex-digit id, unique across processes: a random per-process prefix + a counter.

    uuid4() costs a getrandom syscall per call, which releases the GIL on the hot path.
    """
    # Multiplying by an odd constant mod 2**64 is a bijection: unique per process, and the
    # leading digits differ from one id to the next (ids are shown truncated).
    return f"{(next(_ID_COUNTER) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF:016x}{_ID_PREFIX}"


class Skill(BaseModel):
    """A short behavioural rule learned from experience (the paper's SKILL.md)."""

    name: str = Field(description="Slug, unique among live skills: lowercase letters, digits, -.")
    description: str = Field(description="One line: when the skill applies.")
    body: str = Field(description="The instructions injected into the prompt.")
    category: str | None = None
    source: str = Field("manual", description="Where it came from: manual, import, evolver, ...")
    provenance: list[str] = Field(
        default_factory=list, description="Trajectory ids that produced it."
    )
    status: SkillStatus = "active"
    generation_added: int | None = None
    generation_retired: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    agent: str = Field(DEFAULT_AGENT, description="The agent that owns it (learned it).")
    shared: bool = Field(
        False, description="Shared: received by every agent (or by ``groups``), not only its own."
    )
    groups: list[str] = Field(
        default_factory=list,
        description="For a shared skill: the groups of agents (settings ``[agents] groups``) "
        "that receive it; empty = every agent.",
    )

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        return _agent_id(v)

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SKILL_NAME_RE.match(v):
            raise ValueError(
                f"skill name {v!r} is not a slug (lowercase letters, digits and '-', "
                "starting with a letter or digit, at most 64 characters)"
            )
        return v

    @field_validator("description")
    @classmethod
    def _one_line(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("skill description is empty")
        if "\n" in v:
            raise ValueError("skill description must be one line")
        if len(v) > 1024:
            raise ValueError("skill description is longer than 1024 characters")
        return v

    @field_validator("body")
    @classmethod
    def _body(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("skill body is empty")
        if len(v) > 8000:
            raise ValueError("skill body is longer than 8000 characters")
        return v

    @property
    def embedding_text(self) -> str:
        return f"{self.name.replace('-', ' ')}: {self.description}\n{self.body[:1000]}"


class ToolCall(BaseModel):
    """A tool call the model asked for (and, once known, its result)."""

    id: str | None = None
    name: str
    arguments: str = Field("", description="Arguments as the model wrote them (usually JSON).")


class Message(BaseModel):
    """One chat message as the model saw it."""

    role: Role
    content: str = ""
    name: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None


class ModelOutput(BaseModel):
    """What the model answered."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)


class Reward(BaseModel):
    """A score for a trajectory from one source (judge, user, check)."""

    trajectory_id: str
    value: float = Field(ge=-1.0, le=1.0)
    source: str = "user"
    detail: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    agent: str = Field(DEFAULT_AGENT, description="The agent of the rewarded trajectory.")


class Generation(BaseModel):
    """A version of the live skill library; every change makes a new one."""

    number: int = Field(ge=0)
    created_at: datetime = Field(default_factory=utcnow)
    reason: str = ""
    added: list[str] = Field(default_factory=list)
    retired: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    agent: str = Field(
        DEFAULT_AGENT, description="The agent whose library changed (the owner of the skills)."
    )
    shared_with: list[str] | None = Field(
        None,
        description="When the change touched shared skills: the groups that receive them "
        "([] = every agent); None: only ``agent`` sees the change.",
    )


class CallContext(BaseModel):
    """One LLM call as the host framework describes it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    call_id: str = Field(default_factory=new_id)
    messages: list[Message] = Field(default_factory=list)
    task: str | None = Field(None, description="The task text, when the host knows it directly.")
    session_id: str | None = None
    framework: str = "python"
    model: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: str | None = Field(
        None, description="The agent making the call (None: the engine's agent)."
    )

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str | None) -> str | None:
        return None if v is None else _agent_id(v)


class ScoredSkill(BaseModel):
    """A skill chosen for a call, with its similarity to the query."""

    skill: Skill
    score: float


# The markers of the block ``before_call`` appends to the system prompt (rendered by the
# ``metaclaw_render_injection`` hook): a later turn, the query extractor and the proxies find
# and strip an earlier turn's block by them.
BLOCK_START = "<metaclaw-skills>"
BLOCK_END = "</metaclaw-skills>"
_BLOCK = re.compile(re.escape(BLOCK_START) + r".*?" + re.escape(BLOCK_END) + r"\s*", re.DOTALL)


def strip_injection(text: str) -> str:
    """Remove any block an earlier turn injected (so it neither repeats nor skews retrieval)."""
    if BLOCK_START not in text:
        return text
    return _BLOCK.sub("", text)


class Injection(BaseModel):
    """What before_call decided to add to the prompt."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    call_id: str
    generation: int
    text: str = Field("", description="The rendered block ('' when nothing fits).")
    skills: list[ScoredSkill] = Field(default_factory=list)
    query: str = ""
    query_vector: Any = Field(None, exclude=True, repr=False)
    started_at: float = Field(0.0, exclude=True, repr=False)
    degraded: str | None = Field(None, description="Why nothing was injected, if it failed open.")
    agent: str | None = Field(None, description="The agent the skills were chosen for.")
    holdout: dict[str, str] | None = Field(
        None,
        description="Skills under a randomised holdout that retrieval chose for this call: "
        "name → 'injected' or 'held_out' (recorded as the trajectory's metadata['holdout']).",
    )

    @property
    def skill_names(self) -> list[str]:
        return [s.skill.name for s in self.skills]

    def apply_to_system(self, system: str | None) -> str:
        """Return ``system`` with this block at its end (replacing an earlier block)."""
        base = strip_injection(system or "").rstrip()
        if not self.text:
            return base
        return f"{base}\n\n{self.text}" if base else self.text


Outcome = Literal["unknown", "success", "failure", "error"]


class Trajectory(BaseModel):
    """One captured LLM call: what the model saw, what it said, what was injected."""

    id: str = Field(default_factory=new_id)
    created_at: datetime = Field(default_factory=utcnow)
    session_id: str | None = None
    framework: str = "python"
    model: str | None = None
    messages: list[Message] = Field(default_factory=list)
    output: ModelOutput = Field(default_factory=ModelOutput)
    injected_skills: list[str] = Field(default_factory=list)
    generation: int = Field(0, description="Skill generation in force at before_call time.")
    query: str = ""
    latency_ms: float | None = None
    error: str | None = None
    outcome: Outcome = "unknown"
    truncated: bool = False
    rewards: list[Reward] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: str = Field(DEFAULT_AGENT, description="The agent that made the call.")

    @property
    def reward(self) -> float | None:
        """Mean of the rewards received so far (None if none; :mod:`metaclaw_core.scoring`)."""
        return mean_reward(r.value for r in self.rewards)
