"""The ``tinker`` backend: LoRA training and sampling in the cloud through the Tinker SDK.

A LoRA training client (``create_lora_training_client``; resumed with
``create_training_client_from_state_with_optimizer``), ``forward_backward`` and ``optim_step``
futures submitted back to back, ``save_state`` checkpoints, and published samplers from
``save_weights_for_sampler`` + ``create_sampling_client``, whose ``tinker://`` paths are
recorded so serving survives a restart. Set ``TINKER_API_KEY`` (or ``train.tinker_api_key``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from metaclaw_core.config import Settings
from metaclaw_core.errors import ConfigError
from metaclaw_core.train.backend import (
    AdamConfig,
    SampledCompletion,
    SamplingParams,
    StepMetrics,
    TrainDatum,
)
from metaclaw_core.train.tokenize import (
    ByteTokenizer,
    ChatTokenizer,
    HFChatTokenizer,
    load_hf_tokenizer,
)

log = logging.getLogger("metaclaw.train")

T = TypeVar("T")


def _tinker() -> Any:
    try:
        import tinker
    except ImportError as exc:
        raise ConfigError(
            "metaclaw: the tinker backend needs the Tinker SDK; install metaclaw-core[tinker]"
        ) from exc
    return tinker


class _Mapped(Generic[T]):
    """A Tinker future whose result is converted on the way out."""

    def __init__(self, future: Any, convert: Callable[[Any], T]) -> None:
        self.future = future
        self.convert = convert

    def result(self, timeout: float | None = None) -> T:
        return self.convert(self.future.result(timeout=timeout))


class TinkerSampler:
    """A Tinker ``SamplingClient`` for one set of weights."""

    def __init__(self, client: Any, label: str, path: str | None = None) -> None:
        self.client = client
        self._label = label
        self.path = path

    @property
    def label(self) -> str:
        return self._label

    def sample(
        self, prompt: list[int], num_samples: int, params: SamplingParams
    ) -> list[SampledCompletion]:
        types = _tinker().types
        resp = self.client.sample(
            prompt=types.ModelInput.from_ints(prompt),
            num_samples=num_samples,
            sampling_params=types.SamplingParams(
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                top_p=params.top_p,
                stop=list(params.stop) or None,
                seed=params.seed,
            ),
        ).result()
        out = []
        for seq in resp.sequences:
            tokens = [int(t) for t in seq.tokens]
            logprobs = seq.logprobs
            if logprobs is None or len(logprobs) != len(tokens):
                raise RuntimeError(
                    "metaclaw: the Tinker sampler returned no logprobs for a sample; GRPO's "
                    "importance sampling needs them"
                )
            out.append(SampledCompletion(tokens, [float(x) for x in logprobs], seq.stop_reason))
        return out

    def close(self) -> None:
        return None  # sampling sessions end with the service session


class TinkerBackend:
    """LoRA on Tinker; see the module docstring."""

    name = "tinker"

    def __init__(
        self,
        base_model: str,
        *,
        lora_rank: int = 32,
        tokenizer: ChatTokenizer | str = "auto",
        base_url: str | None = None,
        api_key: str | None = None,
        seed: int | None = None,
    ) -> None:
        if base_model in ("auto", ""):
            raise ConfigError(
                "metaclaw: the tinker backend needs a base model; set train.base_model "
                "(METACLAW_TRAIN__BASE_MODEL), e.g. 'Qwen/Qwen3-8B'"
            )
        self.model_name = base_model
        self.lora_rank = lora_rank
        self._tokenizer_spec = tokenizer
        self._tokenizer: ChatTokenizer | None = None if isinstance(tokenizer, str) else tokenizer
        self.base_url = base_url
        self.api_key = api_key
        self.seed = seed
        self.steps = 0
        self.service: Any = None
        self.training: Any = None
        self._train_sampler: TinkerSampler | None = None
        self._lock = threading.RLock()

    @classmethod
    def from_settings(cls, settings: Settings) -> TinkerBackend:
        t = settings.train
        return cls(
            t.base_model,
            lora_rank=t.lora_rank,
            tokenizer=t.tokenizer,
            base_url=t.tinker_base_url,
            api_key=t.tinker_api_key.get_secret_value() if t.tinker_api_key else None,
            seed=t.seed,
        )

    @property
    def tokenizer(self) -> ChatTokenizer:
        if self._tokenizer is None:
            raise RuntimeError("metaclaw: TinkerBackend.start() has not run yet")
        return self._tokenizer

    def _load_tokenizer(self) -> ChatTokenizer:
        spec = self._tokenizer_spec
        assert isinstance(spec, str)
        if spec == "bytes":
            return ByteTokenizer()
        if spec != "auto":
            return load_hf_tokenizer(spec)
        try:
            return HFChatTokenizer(self.training.get_tokenizer())
        except Exception as exc:
            raise ConfigError(
                f"metaclaw: cannot load the tokenizer of {self.model_name} from the model hub "
                f"({type(exc).__name__}); set train.tokenizer to a local tokenizer folder or "
                ".gguf of the same model"
            ) from exc

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, resume_from: str | None = None) -> None:
        with self._lock:
            if self.training is not None:
                return
            tinker = _tinker()
            # The SDK logs every "try_again" poll of a pending future at WARNING: normal
            # operation, and one line per poll in the service's log.
            polling = logging.getLogger("tinker.lib.api_future_impl")
            if polling.level == logging.NOTSET:
                polling.setLevel(logging.ERROR)
            try:
                self.service = tinker.ServiceClient(base_url=self.base_url, api_key=self.api_key)
                if resume_from:
                    self.training = self.service.create_training_client_from_state_with_optimizer(
                        resume_from
                    ).result()
                else:
                    self.training = self.service.create_lora_training_client(
                        base_model=self.model_name, rank=self.lora_rank, seed=self.seed
                    ).result()
            except tinker.TinkerError as exc:
                raise ConfigError(
                    f"metaclaw: Tinker refused to start training ({exc}); check TINKER_API_KEY "
                    "(it starts with 'tml-') and train.base_model"
                ) from exc
            if self._tokenizer is None:
                self._tokenizer = self._load_tokenizer()
            log.info("metaclaw: tinker training client %s", self.training.model_id)

    def close(self) -> None:
        with self._lock:
            if self.service is not None:
                try:
                    self.service.close("success").result(timeout=30)
                except Exception as exc:
                    log.warning("metaclaw: closing the Tinker session failed: %s", exc)
                self.service = None
                self.training = None

    # -- sampling ------------------------------------------------------------------------
    def training_sampler(self) -> TinkerSampler:
        """A sampler over the current weights (refreshed after each optimiser step)."""
        self.start()
        with self._lock:
            if self._train_sampler is None:
                client = self.training.save_weights_and_get_sampling_client().result()
                self._train_sampler = TinkerSampler(client, f"training@{self.steps}")
            return self._train_sampler

    # -- training ------------------------------------------------------------------------
    def forward_backward(self, data: list[TrainDatum], loss_fn: str) -> _Mapped[StepMetrics]:
        self.start()
        types = _tinker().types
        datums = [
            types.Datum(
                model_input=types.ModelInput.from_ints(d.model_input),
                loss_fn_inputs={
                    "target_tokens": types.TensorData(
                        data=d.target_tokens, dtype="int64", shape=[len(d.target_tokens)]
                    ),
                    "logprobs": types.TensorData(
                        data=d.logprobs, dtype="float32", shape=[len(d.logprobs)]
                    ),
                    "advantages": types.TensorData(
                        data=d.advantages, dtype="float32", shape=[len(d.advantages)]
                    ),
                },
            )
            for d in data
        ]
        future = self.training.forward_backward(datums, loss_fn)
        return _Mapped(future, lambda out: StepMetrics(dict(out.metrics)))

    def optim_step(self, adam: AdamConfig) -> _Mapped[StepMetrics]:
        self.start()
        types = _tinker().types
        future = self.training.optim_step(
            types.AdamParams(
                learning_rate=adam.learning_rate,
                beta1=adam.beta1,
                beta2=adam.beta2,
                eps=adam.eps,
                weight_decay=adam.weight_decay,
                grad_clip_norm=adam.grad_clip_norm,
            )
        )
        with self._lock:
            self.steps += 1
            self._train_sampler = None  # the weights change: sample from the new ones next

        return _Mapped(future, lambda out: StepMetrics(dict(out.metrics or {})))

    # -- weights -------------------------------------------------------------------------
    def save_state(self, name: str) -> str:
        self.start()
        return str(self.training.save_state(name).result().path)

    def publish(self, name: str) -> tuple[TinkerSampler, str]:
        self.start()
        path = str(self.training.save_weights_for_sampler(name).result().path)
        client = self.service.create_sampling_client(model_path=path).result()
        return TinkerSampler(client, name, path), path
