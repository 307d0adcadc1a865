"""The slow loop: RL buffer with support/query separation, GRPO, backends, the served policy.

Heavy dependencies (torch, transformers, peft, tinker) load only when a backend starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaclaw_core.lazy import lazy_exports

if TYPE_CHECKING:
    from metaclaw_core.train.backend import (
        AdamConfig,
        PolicySampler,
        SampledCompletion,
        SamplingParams,
        StepMetrics,
        TrainDatum,
        TrainingBackend,
    )
    from metaclaw_core.train.buffer import BufferSizes, QueryBuffer
    from metaclaw_core.train.checkpoints import Checkpoint, CheckpointLog
    from metaclaw_core.train.grpo import (
        GrpoGroup,
        GrpoTrainer,
        StepReport,
        centred_advantages,
        grpo_datum,
    )
    from metaclaw_core.train.policy import PolicyNotReadyError, PolicyServer, SamplerHandle
    from metaclaw_core.train.rewards import RewardFn, hook_reward, iso_timestamp_reward
    from metaclaw_core.train.tokenize import ByteTokenizer, ChatTokenizer, HFChatTokenizer

__all__ = [
    "AdamConfig",
    "BufferSizes",
    "ByteTokenizer",
    "ChatTokenizer",
    "Checkpoint",
    "CheckpointLog",
    "GrpoGroup",
    "GrpoTrainer",
    "HFChatTokenizer",
    "PolicyNotReadyError",
    "PolicySampler",
    "PolicyServer",
    "QueryBuffer",
    "RewardFn",
    "SampledCompletion",
    "SamplerHandle",
    "SamplingParams",
    "StepMetrics",
    "StepReport",
    "TrainDatum",
    "TrainingBackend",
    "centred_advantages",
    "grpo_datum",
    "hook_reward",
    "iso_timestamp_reward",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "AdamConfig": "metaclaw_core.train.backend",
        "PolicySampler": "metaclaw_core.train.backend",
        "SampledCompletion": "metaclaw_core.train.backend",
        "SamplingParams": "metaclaw_core.train.backend",
        "StepMetrics": "metaclaw_core.train.backend",
        "TrainDatum": "metaclaw_core.train.backend",
        "TrainingBackend": "metaclaw_core.train.backend",
        "BufferSizes": "metaclaw_core.train.buffer",
        "QueryBuffer": "metaclaw_core.train.buffer",
        "Checkpoint": "metaclaw_core.train.checkpoints",
        "CheckpointLog": "metaclaw_core.train.checkpoints",
        "GrpoGroup": "metaclaw_core.train.grpo",
        "GrpoTrainer": "metaclaw_core.train.grpo",
        "StepReport": "metaclaw_core.train.grpo",
        "centred_advantages": "metaclaw_core.train.grpo",
        "grpo_datum": "metaclaw_core.train.grpo",
        "PolicyNotReadyError": "metaclaw_core.train.policy",
        "PolicyServer": "metaclaw_core.train.policy",
        "SamplerHandle": "metaclaw_core.train.policy",
        "RewardFn": "metaclaw_core.train.rewards",
        "hook_reward": "metaclaw_core.train.rewards",
        "iso_timestamp_reward": "metaclaw_core.train.rewards",
        "ByteTokenizer": "metaclaw_core.train.tokenize",
        "ChatTokenizer": "metaclaw_core.train.tokenize",
        "HFChatTokenizer": "metaclaw_core.train.tokenize",
    },
)
