"""The slow loop: RL buffer with support/query separation, GRPO, backends, the served policy.

Heavy dependencies (torch, transformers, peft, tinker) load only when a backend starts.
"""

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
