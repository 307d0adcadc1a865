"""What vetting says of a skill: findings, each with an outcome, folded into one verdict.

A ``metaclaw_vet_skill`` implementation answers None (nothing found), a plain string (a
reason to reject: the contract of earlier versions), or one or more :class:`Finding` objects.
A finding either *rejects* the skill (never live) or *quarantines* it (it waits for a person:
``metaclaw skills pending``). The verdict of a skill is the worst of its findings: any
rejection rejects, else any quarantine quarantines, else the skill may go live.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

FindingOutcome = Literal["quarantine", "reject"]
Verdict = Literal["live", "quarantine", "reject"]


@dataclass(frozen=True)
class Finding:
    """One reason a skill may not simply go live.

    ``check`` names the check (``structure``, ``intent``, ``reviewer``, ...), ``category`` the
    kind of risk (``credentials``, ``evidence``, ...), ``sentence`` the text it is about and
    ``score`` the check's own measure (a similarity, a vote share), when it has one.
    """

    outcome: FindingOutcome
    reason: str
    check: str = "vetting"
    category: str | None = None
    sentence: str | None = None
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "check": self.check,
            "category": self.category,
            "reason": self.reason,
            "sentence": self.sentence,
            "score": None if self.score is None else round(self.score, 3),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        outcome: FindingOutcome = "quarantine" if data.get("outcome") == "quarantine" else "reject"
        score = data.get("score")
        return cls(
            outcome=outcome,
            reason=str(data.get("reason") or ""),
            check=str(data.get("check") or "vetting"),
            category=data.get("category"),
            sentence=data.get("sentence"),
            score=float(score) if isinstance(score, int | float) else None,
        )

    def describe(self) -> str:
        """One line for a person: what, why, and where."""
        head = f"{self.category}: " if self.category else ""
        tail = f" ({self.score:.2f})" if self.score is not None else ""
        where = f" — {self.sentence[:120]!r}" if self.sentence else ""
        return f"{head}{self.reason}{tail}{where}"


@dataclass
class Review:
    """Every finding about one skill and the verdict they add up to."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        if any(f.outcome == "reject" for f in self.findings):
            return "reject"
        if self.findings:
            return "quarantine"
        return "live"

    @property
    def rejections(self) -> list[Finding]:
        return [f for f in self.findings if f.outcome == "reject"]

    @property
    def quarantines(self) -> list[Finding]:
        return [f for f in self.findings if f.outcome == "quarantine"]

    def reasons(self) -> list[str]:
        return [f.describe() for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "findings": [f.to_json() for f in self.findings]}


def as_findings(results: Iterable[Any]) -> list[Finding]:
    """Normalise the answers of every ``metaclaw_vet_skill`` implementation."""
    out: list[Finding] = []
    for r in results:
        if r is None or r == "" or r == []:
            continue
        if isinstance(r, Finding):
            out.append(r)
        elif isinstance(r, str):
            out.append(Finding("reject", r))
        elif isinstance(r, list | tuple):
            out.extend(as_findings(r))
        else:  # a plugin answered something we cannot read: hold the skill back, say why
            out.append(
                Finding("quarantine", f"a vetting plugin answered {type(r).__name__!r}", "plugin")
            )
    return out
