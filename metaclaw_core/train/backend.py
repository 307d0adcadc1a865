"""The training backend contract: what GRPO and serving need from Tinker, PEFT or a plugin.

A backend owns the weights. It samples from the current training weights (for GRPO groups),
takes ``forward_backward`` + ``optim_step`` (submitted back to back, results awaited after),
saves resumable checkpoints, and *publishes* sampler weights: a :class:`PolicySampler` that
keeps serving exactly those weights however far training moves on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from metaclaw_core.train.tokenize import ChatTokenizer

T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True)
class SamplingParams:
    """How one prompt is sampled."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(frozen=True)
class SampledCompletion:
    """One sampled continuation: its tokens and the sampler's log-probability of each."""

    tokens: list[int]
    logprobs: list[float]
    stop_reason: str = "stop"  # "stop" (end token or stop string) or "length"


@dataclass(frozen=True)
class TrainDatum:
    """One row of a policy-gradient batch, laid out as Tinker's ``Datum`` (shifted by one).

    ``model_input`` is prompt + sampled[:-1]; the three per-position lists are aligned with it:
    targets ``[0]*(P-1) + sampled``, old logprobs ``[0.0]*(P-1) + sampler_logprobs``, advantages
    ``[0.0]*(P-1) + [A]*len(sampled)`` (prompt positions carry no advantage, so no gradient).
    """

    model_input: list[int]
    target_tokens: list[int]
    logprobs: list[float]
    advantages: list[float]

    def __post_init__(self) -> None:
        n = len(self.model_input)
        if not (len(self.target_tokens) == len(self.logprobs) == len(self.advantages) == n):
            raise ValueError(
                f"TrainDatum lengths differ: input {n}, targets {len(self.target_tokens)}, "
                f"logprobs {len(self.logprobs)}, advantages {len(self.advantages)}"
            )


@dataclass(frozen=True)
class AdamConfig:
    """One optimiser step's parameters (AdamW, as Tinker's ``AdamParams``)."""

    learning_rate: float
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0


@dataclass
class StepMetrics:
    """What forward_backward or optim_step reported (names like ``loss:sum``)."""

    values: dict[str, float] = field(default_factory=dict)


class Pending(Protocol[T_co]):
    """A submitted backend operation; ``result()`` waits for it."""

    def result(self, timeout: float | None = None) -> T_co: ...


@runtime_checkable
class PolicySampler(Protocol):
    """Samples from one fixed set of weights (or, for the training sampler, the live ones)."""

    @property
    def label(self) -> str:
        """Which weights these are, e.g. ``base`` or ``step-000012``."""
        ...

    def sample(
        self, prompt: list[int], num_samples: int, params: SamplingParams
    ) -> list[SampledCompletion]:
        """``num_samples`` independent continuations of ``prompt`` (token ids)."""
        ...

    def close(self) -> None:
        """Release the weights; called once no request uses this sampler any more."""
        ...


@runtime_checkable
class TrainingBackend(Protocol):
    """LoRA training + sampling behind one interface (built-ins: ``local``, ``tinker``)."""

    name: str
    model_name: str

    @property
    def tokenizer(self) -> ChatTokenizer:
        """Turns chat messages into prompt tokens and sampled tokens into text."""
        ...

    def start(self, resume_from: str | None = None) -> None:
        """Load the base model and the adapter; ``resume_from`` is a checkpoint path saved by
        :meth:`save_state` (weights and optimiser state). Idempotent."""
        ...

    def training_sampler(self) -> PolicySampler:
        """A sampler over the current training weights (GRPO's "current policy")."""
        ...

    def forward_backward(self, data: list[TrainDatum], loss_fn: str) -> Pending[StepMetrics]:
        """Submit one forward+backward pass; accumulates gradients. Returns at once."""
        ...

    def optim_step(self, adam: AdamConfig) -> Pending[StepMetrics]:
        """Submit one optimiser step after the pending forward_backward. Returns at once."""
        ...

    def save_state(self, name: str) -> str:
        """Save weights + optimiser state; return the path :meth:`start` resumes from."""
        ...

    def publish(self, name: str) -> tuple[PolicySampler, str]:
        """Freeze the current weights for serving: a new sampler and the path it lives at."""
        ...

    def close(self) -> None: ...
