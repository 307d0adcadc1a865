"""What one evolution reports: its candidates and their verdicts (the value the
``metaclaw_evolution_finished`` hook carries; it imports only the models)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from metaclaw_core.models import Generation, Skill
from metaclaw_core.skills.verdict import Finding

Mode = Literal["llm", "feedback"]
Verdict = Literal["live", "pending", "quarantined", "accepted", "rejected"]
Kind = Literal["failure", "success"]
Outcome = Literal["fixed", "not-fixed", "kept", "regressed", "unscored", "error", "skipped"]
State = Literal["validated", "failed", "unvalidated", "not-validated"]

__all__ = [
    "Candidate",
    "EvolutionReport",
    "Kind",
    "Mode",
    "Outcome",
    "Replay",
    "State",
    "Validation",
    "Verdict",
]


@dataclass
class Replay:
    """One replayed model call and what its new answer scored."""

    skill: str
    kind: Kind
    trajectory_id: str
    outcome: Outcome
    source: str | None = None
    original_reward: float | None = None
    new_reward: float | None = None
    model: str | None = None
    output_text: str = ""
    error: str | None = None
    latency_ms: float | None = None


@dataclass
class Validation:
    """The evidence on one candidate."""

    skill: str
    state: State
    fixed: int = 0
    not_fixed: int = 0
    kept: int = 0
    regressed: int = 0
    unscored: int = 0
    errors: int = 0
    calls: int = 0
    message: str = ""
    replays: list[Replay] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"fixed {self.fixed}/{self.fixed + self.not_fixed} failure(s), regressed "
            f"{self.regressed}/{self.kept + self.regressed} success(es)"
            + (f", {self.errors} replay(s) not run" if self.errors else "")
            + (f", {self.unscored} unscored" if self.unscored else "")
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["summary"] = self.summary()
        return out


@dataclass
class Candidate:
    """A proposed skill and what became of it."""

    skill: Skill
    updates: str | None = None
    verdict: Verdict = "rejected"
    reasons: list[str] = field(default_factory=list)
    merged_into: str | None = None
    findings: list[Finding] = field(default_factory=list)
    validation: Validation | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "skill": self.skill.model_dump(mode="json"),
            "updates": self.updates,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "merged_into": self.merged_into,
            "findings": [f.to_json() for f in self.findings],
            "validation": None if self.validation is None else self.validation.to_json(),
        }


@dataclass
class EvolutionReport:
    """What one evolution looked at, proposed, and changed."""

    id: str
    mode: Mode
    trigger: str
    dry_run: bool
    review: str
    failures: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    generation: Generation | None = None
    model: str | None = None
    message: str = ""

    @property
    def live(self) -> list[str]:
        return [c.skill.name for c in self.candidates if c.verdict == "live"]

    @property
    def pending(self) -> list[str]:
        return [c.skill.name for c in self.candidates if c.verdict == "pending"]

    @property
    def quarantined(self) -> list[str]:
        return [c.skill.name for c in self.candidates if c.verdict == "quarantined"]

    @property
    def rejected(self) -> list[str]:
        return [c.skill.name for c in self.candidates if c.verdict == "rejected"]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "mode": self.mode,
            "trigger": self.trigger,
            "dry_run": self.dry_run,
            "review": self.review,
            "failures": list(self.failures),
            "candidates": [c.to_json() for c in self.candidates],
            "generation": None
            if self.generation is None
            else self.generation.model_dump(mode="json"),
            "live": self.live,
            "pending": self.pending,
            "quarantined": self.quarantined,
            "rejected": self.rejected,
            "model": self.model,
            "message": self.message,
        }
