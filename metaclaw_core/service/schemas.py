"""The wire format of the engine API (``/v1/inject``, ``/v1/trajectories``, ...).

Requests forbid unknown fields, so a misspelt field is a 422 that names it rather than a
silently ignored setting. Messages and outputs are the core's own models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from metaclaw_core.models import Generation, Message, ModelOutput, Skill

ID_PATTERN = r"^[A-Za-z0-9_.:@/-]{1,200}$"
MAX_TASK_CHARS = 200_000


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InjectRequest(_Request):
    """One LLM call about to happen: what it is about, so skills can be chosen for it."""

    task: str | None = Field(
        None, max_length=MAX_TASK_CHARS, description="The task text (else the last user message)."
    )
    messages: list[Message] = Field(default_factory=list, description="The call's messages.")
    session_id: str | None = Field(None, max_length=256)
    framework: str = Field("http", min_length=1, max_length=64)
    model: str | None = Field(None, max_length=256)
    call_id: str | None = Field(
        None, pattern=ID_PATTERN, description="Your id for the call (default: a new one)."
    )
    top_k: int | None = Field(None, ge=0, le=50, description="Most skills for this call.")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _has_task(self) -> InjectRequest:
        if not (self.task and self.task.strip()) and not self.messages:
            raise ValueError("give 'task' or 'messages' (the skills are chosen for them)")
        return self


class InjectedSkill(BaseModel):
    name: str
    score: float


class InjectResponse(BaseModel):
    call_id: str = Field(description="Send it back with the capture of this call.")
    text: str = Field(description="The block to append to the system prompt ('' for none).")
    skill_ids: list[str] = Field(description="Names of the injected skills.")
    skills: list[InjectedSkill]
    generation: int = Field(description="Skill generation the block comes from.")
    query: str = Field(description="The text the skills were retrieved for.")
    degraded: str | None = Field(None, description="Why nothing was injected, if it failed open.")


class CaptureRequest(_Request):
    """One finished LLM call (or agent turn) to store as a trajectory."""

    call_id: str | None = Field(
        None, pattern=ID_PATTERN, description="The call_id /v1/inject returned for this call."
    )
    session_id: str | None = Field(None, max_length=256)
    framework: str = Field("http", min_length=1, max_length=64)
    model: str | None = Field(None, max_length=256)
    messages: list[Message] = Field(
        default_factory=list,
        description="What the model saw. Without 'output', a trailing assistant message is "
        "taken as the output.",
    )
    output: ModelOutput | str | None = None
    success: bool | None = Field(None, description="Whether the call or turn succeeded.")
    error: str | None = Field(None, max_length=20_000)
    latency_ms: float | None = Field(None, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)


class CaptureResponse(BaseModel):
    captured: bool
    trajectory_id: str | None
    call_id: str


class FeedbackRequest(_Request):
    """A reward for a captured trajectory, named directly, by call id, or as a session's last."""

    trajectory_id: str | None = Field(None, pattern=ID_PATTERN)
    call_id: str | None = Field(None, pattern=ID_PATTERN)
    session_id: str | None = Field(
        None, max_length=256, description="Rate the latest trajectory of this session."
    )
    reward: float = Field(ge=-1.0, le=1.0)
    source: str = Field("user", min_length=1, max_length=64)
    detail: str | None = Field(None, max_length=4000)

    @model_validator(mode="after")
    def _names_one(self) -> FeedbackRequest:
        if not (self.trajectory_id or self.call_id or self.session_id):
            raise ValueError("name the trajectory: 'trajectory_id', 'call_id' or 'session_id'")
        return self


class FeedbackResponse(BaseModel):
    trajectory_id: str
    reward: float
    source: str


class SessionEndRequest(_Request):
    reason: str | None = Field(None, max_length=256)
    message_count: int | None = Field(None, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)


class SessionEndResponse(BaseModel):
    session_id: str
    captured: int = Field(description="Trajectories this service captured for the session.")
    failures: int
    trajectory_ids: list[str]


class SkillIn(_Request):
    """A skill to add (``source`` defaults to ``api``)."""

    name: str
    description: str
    body: str
    category: str | None = Field(None, max_length=64)
    source: str = Field("api", max_length=64)

    @model_validator(mode="after")
    def _valid_skill(self) -> SkillIn:
        try:
            self.to_skill()
        except ValidationError as exc:  # the core's rules (slug, one line, sizes), as a 422
            raise ValueError(
                "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            ) from None
        return self

    def to_skill(self) -> Skill:
        return Skill(
            name=self.name,
            description=self.description,
            body=self.body,
            category=self.category,
            source=self.source,
        )


class AddSkillsRequest(_Request):
    skills: list[SkillIn] = Field(min_length=1, max_length=500)
    reason: str = Field("added through the API", max_length=500)

    @field_validator("skills")
    @classmethod
    def _distinct(cls, skills: list[SkillIn]) -> list[SkillIn]:
        names = [s.name for s in skills]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"skill named more than once: {', '.join(dupes)}")
        return skills


class RetireSkillsRequest(_Request):
    names: list[str] = Field(min_length=1, max_length=500)
    reason: str = Field("retired through the API", max_length=500)


class SkillOut(BaseModel):
    name: str
    description: str
    body: str
    category: str | None
    source: str
    generation_added: int | None
    created_at: datetime

    @classmethod
    def of(cls, s: Skill) -> SkillOut:
        return cls(
            name=s.name,
            description=s.description,
            body=s.body,
            category=s.category,
            source=s.source,
            generation_added=s.generation_added,
            created_at=s.created_at,
        )


class SkillsResponse(BaseModel):
    generation: int
    skills: list[SkillOut]


class GenerationResponse(BaseModel):
    generation: Generation
